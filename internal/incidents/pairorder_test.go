package incidents

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestPairedMetricsJudgedTheSameWhateverTheDefineOrder: "rides moves with
// ride_starts" may be said before ride_starts exists. The pairing waits
// (the answer says so, and list_metrics shows it) and resolves once the
// partner is defined; the divergence judged afterwards is the same as when
// the partner was defined first. A healthy hour stays quiet either way.
func TestPairedMetricsJudgedTheSameWhateverTheDefineOrder(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s, _ := newService(t, db, tue(16, 5), nil)
		type outcome struct {
			quiet    int
			observed float64
			expected float64
			low      float64
			high     float64
			related  string
		}
		run := func(order string) outcome {
			starts, rides := order+"_ride_starts", order+"_rides"
			asset := "duckdb://mobility." + order
			defStarts := DefineMetricParams{Name: starts, Description: "rides started per hour", Asset: asset}
			defRides := DefineMetricParams{Name: rides, Description: "rides billed per hour", Asset: asset, MovesWith: []string{starts}}
			if order == "partner_first" {
				mustDefine(t, s, defStarts)
				d := mustDefine(t, s, defRides)
				if len(d.MovesWithUndefined) != 0 || !slices.Equal(d.PairedWith, []string{starts}) {
					t.Fatalf("%s: defined after its partner: paired %v, undefined %v", order, d.PairedWith, d.MovesWithUndefined)
				}
			} else {
				d := mustDefine(t, s, defRides)
				if !slices.Equal(d.MovesWithUndefined, []string{starts}) || len(d.PairedWith) != 0 || len(d.Notes) != 1 ||
					!strings.Contains(d.Notes[0], "define order does not matter") {
					t.Fatalf("%s: defined before its partner: paired %v, undefined %v, notes %q", order, d.PairedWith, d.MovesWithUndefined, d.Notes)
				}
				if got := listed(t, s, rides); !slices.Equal(got.MovesWithUndefined, []string{starts}) {
					t.Fatalf("%s: list_metrics before the partner: undefined %v", order, got.MovesWithUndefined)
				}
				mustDefine(t, s, defStarts)
			}
			// Either way, the listing shows the pair from both sides.
			if r, st := listed(t, s, rides), listed(t, s, starts); !slices.Equal(r.PairedWith, []string{starts}) ||
				!slices.Equal(st.PairedWith, []string{rides}) || len(r.MovesWithUndefined) != 0 {
				t.Fatalf("%s: listed pairs: %s %v (undefined %v), %s %v", order, rides, r.PairedWith, r.MovesWithUndefined, starts, st.PairedWith)
			}

			rng := rand.New(rand.NewPCG(7, 8)) // the same history for both orders
			level := map[int64]float64{}
			startsAt := func(at time.Time) float64 {
				v := (300 + 200*math.Sin(float64(at.Hour())/24*2*math.Pi)) * (1 + 0.12*(rng.Float64()*2-1))
				level[at.Unix()] = v
				return v
			}
			from, to := tue(15, 0).Add(-14*24*time.Hour), tue(15, 0)
			mustMonitor(t, s, MonitorParams{Metric: starts, Backfill: true, Points: hourly(from, to, startsAt)})
			mustMonitor(t, s, MonitorParams{Metric: rides, Backfill: true, Points: hourly(from, to, func(at time.Time) float64 {
				return level[at.Unix()] * (1 + 0.01*(rng.Float64()*2-1))
			})})

			var out outcome
			// 15:00 healthy: rides track their starts.
			usual := 300 + 200*math.Sin(15.0/24*2*math.Pi)
			mustMonitor(t, s, MonitorParams{Metric: starts, Points: []MetricPoint{{At: tue(15, 0), Value: usual}}})
			out.quiet = len(mustMonitor(t, s, MonitorParams{Metric: rides, Points: []MetricPoint{{At: tue(15, 0), Value: usual * 1.005}}}).Anomalies)
			// 16:00: rides 23% above their starts, each alone ordinary.
			usual = 300 + 200*math.Sin(16.0/24*2*math.Pi)
			mustMonitor(t, s, MonitorParams{Metric: starts, Points: []MetricPoint{{At: tue(16, 0), Value: usual}}})
			r := mustMonitor(t, s, MonitorParams{Metric: rides, Points: []MetricPoint{{At: tue(16, 0), Value: usual * 1.23}}})
			for _, a := range r.Anomalies {
				if a.Kind == SymptomDivergence {
					out.observed, out.expected, out.low, out.high = a.Observed, a.Expected, a.ExpectedLow, a.ExpectedHigh
					out.related = strings.TrimPrefix(a.RelatedMetric, order+"_")
				}
			}
			if out.related == "" {
				t.Fatalf("%s: no divergence at 16:00: %+v (%s)", order, r.Anomalies, r.Summary)
			}
			return out
		}
		first, later := run("partner_first"), run("partner_later")
		if first.quiet != 0 || later.quiet != 0 {
			t.Errorf("healthy hour: %d and %d anomalies, want none", first.quiet, later.quiet)
		}
		if first != later {
			t.Errorf("judgement depends on define order:\n partner first: %+v\n partner later: %+v", first, later)
		}
		if first.related != "ride_starts" {
			t.Errorf("divergence related to %q, want ride_starts", first.related)
		}
	})
}

func listed(t *testing.T, s *Service, name string) MetricDefinition {
	t.Helper()
	defs, _, err := s.ListMetricsPage(context.Background(), page.Params{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range defs {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("%s not listed", name)
	return MetricDefinition{}
}
