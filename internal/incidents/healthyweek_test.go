package incidents

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// poisson draws a Poisson count: Knuth's method for small means, a rounded
// normal for large ones (where the two agree).
func poisson(rng *rand.Rand, mean float64) float64 {
	if mean > 60 {
		return math.Max(0, math.Round(mean+math.Sqrt(mean)*rng.NormFloat64()))
	}
	l, k, p := math.Exp(-mean), 0.0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// A healthy simulated week on three tables of different sizes, each with a
// count metric and a pair of counts that move together (orders and
// payments at about 97%), after three weeks of history with quiet nights
// (a handful of events an hour) and quieter weekends. Rates and counts are
// judged with their counts and seasonality works from three weeks, so at
// most one incident opens per table-week; a real drop of payments is still
// caught as a divergence.
func TestHealthyWeekOpensAtMostOneIncidentPerTable(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		rng := rand.New(rand.NewPCG(2026, 14))
		weekStart := time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC) // a Monday
		s, clk := newService(t, db, weekStart.AddDate(0, 0, 8), nil)
		level := func(base float64, at time.Time) float64 {
			shape := 0.1 + math.Pow(math.Sin(math.Pi*float64(at.Hour())/24), 2)
			if at.Weekday() == time.Saturday || at.Weekday() == time.Sunday {
				shape *= 0.5
			}
			return base * shape
		}
		tables := []struct {
			asset string
			base  float64
		}{{"duckdb://shop.orders", 40}, {"duckdb://crm.signups", 150}, {"duckdb://ads.clicks", 900}}
		type series struct{ events, orders, payments []MetricPoint }
		data := make([]series, len(tables))
		from := weekStart.AddDate(0, 0, -21)
		for i, tb := range tables {
			for at := from; at.Before(weekStart.AddDate(0, 0, 8)); at = at.Add(time.Hour) {
				orders := poisson(rng, level(tb.base, at))
				paid := 0.0
				for range int(orders) {
					if rng.Float64() < 0.97 {
						paid++
					}
				}
				data[i].events = append(data[i].events, MetricPoint{At: at, Value: poisson(rng, 3*level(tb.base, at))})
				data[i].orders = append(data[i].orders, MetricPoint{At: at, Value: orders})
				data[i].payments = append(data[i].payments, MetricPoint{At: at, Value: paid})
			}
			p := tb.asset[len("duckdb://"):]
			mustDefine(t, s, DefineMetricParams{Name: p + ".events", Description: "events per hour", Asset: tb.asset})
			mustDefine(t, s, DefineMetricParams{Name: p + ".orders", Description: "orders per hour", Asset: tb.asset})
			mustDefine(t, s, DefineMetricParams{Name: p + ".payments", Description: "payments per hour", Asset: tb.asset,
				MovesWith: []string{p + ".orders"}})
		}
		split := func(ps []MetricPoint, a, b time.Time) []MetricPoint {
			var out []MetricPoint
			for _, pt := range ps {
				if !pt.At.Before(a) && pt.At.Before(b) {
					out = append(out, pt)
				}
			}
			return out
		}
		for i, tb := range tables {
			p := tb.asset[len("duckdb://"):]
			for name, ps := range map[string][]MetricPoint{".events": data[i].events, ".orders": data[i].orders, ".payments": data[i].payments} {
				mustMonitor(t, s, MonitorParams{Metric: p + name, Backfill: true, Points: split(ps, from, weekStart)})
			}
		}
		// The healthy week, judged a day at a time as a daily job would.
		openedPerTable, anomaliesPerTable := map[string]int{}, map[string]int{}
		for d := range 7 {
			day := weekStart.AddDate(0, 0, d)
			clk.Set(day.AddDate(0, 0, 1).Add(5 * time.Minute))
			for i, tb := range tables {
				p := tb.asset[len("duckdb://"):]
				opened, anomalies := 0, 0
				for _, m := range []struct {
					name string
					ps   []MetricPoint
				}{{".events", data[i].events}, {".orders", data[i].orders}, {".payments", data[i].payments}} {
					r := mustMonitor(t, s, MonitorParams{Metric: p + m.name, Points: split(m.ps, day, day.AddDate(0, 0, 1))})
					for _, a := range r.Anomalies {
						t.Logf("%s %s: %s", day.Format("Mon"), m.name, a.Detail)
					}
					anomalies += len(r.Anomalies)
					for _, inc := range r.Incidents {
						if inc.Opened {
							opened++
						}
					}
				}
				openedPerTable[tb.asset] += opened
				anomaliesPerTable[tb.asset] += anomalies
			}
		}
		for _, tb := range tables {
			if n := openedPerTable[tb.asset]; n > 1 {
				t.Errorf("%s: %d incidents opened in a healthy week (%d anomalies); want at most 1", tb.asset, n, anomaliesPerTable[tb.asset])
			}
		}

		// The check can fail: payments of the biggest table drop to half
		// of orders for a day; the pair diverges.
		day := weekStart.AddDate(0, 0, 7)
		clk.Set(day.AddDate(0, 0, 1).Add(5 * time.Minute))
		p := "ads.clicks"
		orders := split(data[2].orders, day, day.AddDate(0, 0, 1))
		mustMonitor(t, s, MonitorParams{Metric: p + ".orders", Points: orders})
		half := make([]MetricPoint, len(orders))
		for i, o := range orders {
			half[i] = MetricPoint{At: o.At, Value: math.Round(o.Value / 2)}
		}
		r := mustMonitor(t, s, MonitorParams{Metric: p + ".payments", Points: half})
		divergences := 0
		for _, a := range r.Anomalies {
			if a.Kind == SymptomDivergence {
				divergences++
			}
		}
		if divergences < 12 || len(r.Incidents) == 0 {
			t.Errorf("payments at half of orders for a day: %d divergent hours, incidents %+v; want most hours and an incident", divergences, r.Incidents)
		}
	})
}

// list_metrics shows a pairing on both metrics, whichever declared it.
func TestListMetricsShowsPairingsBothWays(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s, _ := newService(t, db, tue(12, 0), nil)
		mustDefine(t, s, DefineMetricParams{Name: "ride_starts", Description: "starts", Asset: "duckdb://m.rides"})
		mustDefine(t, s, DefineMetricParams{Name: "rides", Description: "rides", Asset: "duckdb://m.rides", MovesWith: []string{"ride_starts"}})
		mustDefine(t, s, DefineMetricParams{Name: "alone", Description: "alone", Asset: "duckdb://m.rides"})
		defs, info, err := s.ListMetricsPage(context.Background(), page.Params{Limit: 10})
		if err != nil || info.Total != 3 {
			t.Fatalf("list: %d, %v", info.Total, err)
		}
		got := map[string][]string{}
		for _, d := range defs {
			got[d.Name] = d.PairedWith
		}
		if !slices.Equal(got["ride_starts"], []string{"rides"}) || !slices.Equal(got["rides"], []string{"ride_starts"}) || len(got["alone"]) != 0 {
			t.Errorf("paired_with: %v", got)
		}
	})
}
