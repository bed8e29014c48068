package incidents

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/warehouse"
)

// hourly returns one point per hour in [from, to) with value f(t).
func hourly(from, to time.Time, f func(t time.Time) float64) []MetricPoint {
	var out []MetricPoint
	for t := from; t.Before(to); t = t.Add(time.Hour) {
		out = append(out, MetricPoint{At: t, Value: f(t)})
	}
	return out
}

func mustDefine(t testing.TB, s *Service, p DefineMetricParams) *MetricDefinition {
	t.Helper()
	d, err := s.DefineMetric(context.Background(), p)
	if err != nil {
		t.Fatalf("define %s: %v", p.Name, err)
	}
	return d
}

func mustMonitor(t testing.TB, s *Service, p MonitorParams) *MonitorResult {
	t.Helper()
	r, err := s.MonitorMetric(context.Background(), p)
	if err != nil {
		t.Fatalf("monitor %s: %v", p.Metric, err)
	}
	return r
}

func TestMonitorNoisySeasonalMetricDoesNotAlertAtItsMondayPeak(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		monday := time.Date(2026, 10, 12, 0, 0, 0, 0, time.UTC)
		s, clk := newService(t, db, monday.Add(10*time.Hour+30*time.Minute), nil)
		mustDefine(t, s, DefineMetricParams{Name: "app_sessions", Description: "sessions started per hour",
			Asset: "duckdb://web.sessions", Unit: "sessions"})
		rng := rand.New(rand.NewPCG(1, 2))
		usual := func(t time.Time) float64 {
			v := 1000.0
			if t.Weekday() == time.Monday && t.Hour() >= 9 && t.Hour() <= 11 {
				v = 3000 // the weekly peak
			}
			return v * (1 + 0.15*(rng.Float64()*2-1)) // ±15% noise
		}
		// Four weeks of history, loaded without judging.
		back := mustMonitor(t, s, MonitorParams{Metric: "app_sessions", Backfill: true,
			Points: hourly(monday.Add(-28*24*time.Hour), monday.Add(10*time.Hour), usual)})
		if back.Recorded != 28*24+10 || len(back.Incidents) != 0 {
			t.Fatalf("backfill: %+v", back.Summary)
		}
		// Monday 10:00 at its usual peak: normal.
		r := mustMonitor(t, s, MonitorParams{Metric: "app_sessions", Points: []MetricPoint{{At: monday.Add(10 * time.Hour), Value: 3100}}})
		if r.Points[0].Verdict != baseline.Normal || len(r.Incidents) != 0 || len(r.Anomalies) != 0 {
			t.Fatalf("Monday peak judged %s: %s", r.Points[0].Verdict, r.Points[0].Reason)
		}
		// The same value on a Tuesday at 10:00 is three times the usual.
		clk.Set(tue(10, 30))
		more := hourly(monday.Add(11*time.Hour), tue(10, 0), usual)
		mustMonitor(t, s, MonitorParams{Metric: "app_sessions", Backfill: true, Points: more})
		r = mustMonitor(t, s, MonitorParams{Metric: "app_sessions", Points: []MetricPoint{{At: tue(10, 0), Value: 3100}}})
		if r.Points[0].Verdict != baseline.Anomalous || len(r.Incidents) != 1 || !r.Incidents[0].Opened {
			t.Fatalf("Tuesday 10:00 at 3100 judged %s (%s), incidents %+v", r.Points[0].Verdict, r.Points[0].Reason, r.Incidents)
		}
		inc, err := s.GetIncident(ctx, r.Incidents[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		sym := inc.Symptoms[0]
		t.Logf("%s\n%s", sym.Detail, r.Summary)
		if sym.Kind != SymptomValue || sym.Metric != "app_sessions" || sym.Asset != "duckdb://web.sessions" || sym.Observed != 3100 || sym.ExpectedHigh >= 3100 {
			t.Fatalf("symptom %+v", sym)
		}
		// The detail states the move against the usual Tuesday 10:00 in
		// numbers: the percent above the median the symptom records.
		move := baseline.PercentChange(sym.Observed, sym.Expected)
		if move < 100 || !strings.Contains(sym.Detail, fmt.Sprintf("%.0f%% above the usual", move)) || !strings.Contains(sym.Detail, "10:00") {
			t.Fatalf("detail %q should say %.0f%% above the usual 10:00", sym.Detail, move)
		}
	})
}

func TestMonitorDivergenceOfMetricsThatMoveTogether(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := newService(t, db, tue(15, 5), nil)
		mustDefine(t, s, DefineMetricParams{Name: "ride_starts", Description: "rides started per hour", Asset: "duckdb://mobility.rides"})
		mustDefine(t, s, DefineMetricParams{Name: "rides", Description: "rides billed per hour", Asset: "duckdb://mobility.rides",
			MovesWith: []string{"ride_starts"}})
		rng := rand.New(rand.NewPCG(3, 4))
		starts := map[int64]float64{}
		startsAt := func(t time.Time) float64 {
			v := (300 + 200*math.Sin(float64(t.Hour())/24*2*math.Pi)) * (1 + 0.12*(rng.Float64()*2-1))
			starts[t.Unix()] = v
			return v
		}
		from, to := tue(15, 0).Add(-14*24*time.Hour), tue(15, 0)
		mustMonitor(t, s, MonitorParams{Metric: "ride_starts", Backfill: true, Points: hourly(from, to, startsAt)})
		mustMonitor(t, s, MonitorParams{Metric: "rides", Backfill: true, Points: hourly(from, to, func(t time.Time) float64 {
			return starts[t.Unix()] * (1 + 0.01*(rng.Float64()*2-1))
		})})
		// 15:00: ride starts as usual; rides 23% above them.
		base := 300 + 200*math.Sin(15.0/24*2*math.Pi)
		r1 := mustMonitor(t, s, MonitorParams{Metric: "ride_starts", Points: []MetricPoint{{At: tue(15, 0), Value: base}}})
		if len(r1.Anomalies) != 0 {
			t.Fatalf("ride_starts alone: %+v", r1.Anomalies)
		}
		r2 := mustMonitor(t, s, MonitorParams{Metric: "rides", Points: []MetricPoint{{At: tue(15, 0), Value: base * 1.23}}})
		var div *Symptom
		for i, a := range r2.Anomalies {
			if a.Kind == SymptomDivergence {
				div = &r2.Anomalies[i]
			}
		}
		if div == nil || div.Metric != "rides" || div.RelatedMetric != "ride_starts" {
			t.Fatalf("no divergence reported: %+v (%s)", r2.Anomalies, r2.Summary)
		}
		t.Logf("%s\n%s", div.Detail, r2.Summary)
		if !strings.Contains(div.Detail, "rides up 2") || !strings.Contains(div.Detail, "ride_starts flat") {
			t.Fatalf("divergence detail %q", div.Detail)
		}
		if len(r2.Incidents) != 1 {
			t.Fatalf("incidents %+v; want the symptoms on one incident", r2.Incidents)
		}
		inc, err := s.GetIncident(ctx, r2.Incidents[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(inc.Symptoms) != len(r2.Anomalies) {
			t.Fatalf("incident has %d symptoms, report had %d", len(inc.Symptoms), len(r2.Anomalies))
		}
	})
}

func TestMonitorRefusesFutureTimesAndBadWindows(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := newService(t, db, tue(15, 5), nil)
		fw := &fakeWarehouse{}
		s.OpenWarehouse = func(context.Context, string) (warehouse.Warehouse, error) { return fw, nil }
		mustDefine(t, s, DefineMetricParams{Name: "pushed", Description: "d", Asset: "duckdb://a.b"})
		mustDefine(t, s, DefineMetricParams{Name: "computed", Description: "d", Asset: "duckdb://a.b", Warehouse: "demo",
			SQL: "SELECT hour, AVG(balance) AS value FROM loyalty.member_balances GROUP BY hour", TimeColumn: "hour"})
		cases := []struct {
			p    MonitorParams
			want string
		}{
			{MonitorParams{Metric: "pushed", Points: []MetricPoint{{At: tue(16, 0), Value: 1}}}, "in the future"},
			{MonitorParams{Metric: "pushed", Points: []MetricPoint{{At: tue(14, 0), Value: math.NaN()}}}, "finite"},
			{MonitorParams{Metric: "pushed", Points: []MetricPoint{{At: tue(14, 0), Value: 1}, {At: tue(14, 0), Value: 2}}}, "one value per bucket"},
			{MonitorParams{Metric: "pushed", Window: &Window{Start: tue(13, 0), End: tue(14, 0)}}, "give points, not a window"},
			{MonitorParams{Metric: "computed", Window: &Window{Start: tue(14, 0), End: tue(13, 0)}}, "before or when it starts"},
			{MonitorParams{Metric: "computed", Window: &Window{Start: tue(14, 0), End: tue(17, 0)}}, "in the future"},
			{MonitorParams{Metric: "computed", Points: []MetricPoint{{At: tue(14, 0), Value: 1}}}, "give a window, not points"},
			{MonitorParams{Metric: "pushd", Points: []MetricPoint{{At: tue(14, 0), Value: 1}}}, "closest: pushed"},
		}
		for _, c := range cases {
			_, err := s.MonitorMetric(ctx, c.p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%+v: err = %v; want %q", c.p, err, c.want)
			}
		}
		if len(fw.queries) != 0 {
			t.Fatalf("a refused call reached the warehouse: %v", fw.queries)
		}
		pts, err := baseline.Load(ctx, db, baseline.Series{Asset: "duckdb://a.b", Metric: "pushed", Grain: "hour"}, tue(0, 0), tue(23, 0))
		if err != nil || len(pts) != 0 {
			t.Fatalf("refused points were stored: %v %v", pts, err)
		}
	})
}

func TestDefineMetricRefusesUnsafeSQL(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := newService(t, db, tue(15, 5), nil)
		base := DefineMetricParams{Name: "m", Description: "d", Asset: "duckdb://a.b", Warehouse: "demo"}
		cases := map[string]string{
			"SELECT 1; DROP TABLE loyalty.member_balances": "one statement",
			"DELETE FROM loyalty.member_balances":          "must start with SELECT or WITH",
			"-- comment first\nSELECT 1":                   "must start with SELECT or WITH",
			"":                                             "",
		}
		for q, want := range cases {
			p := base
			p.SQL = q
			if q == "" {
				// Empty SQL means a pushed metric, which must not name a warehouse.
				want = "apply only to a metric defined by sql"
			}
			_, err := s.DefineMetric(ctx, p)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
				t.Errorf("sql %q: err = %v; want %q", q, err, want)
			}
		}
		p := base
		p.SQL, p.ValueColumn = "SELECT 1 AS v;", "v; DROP"
		if _, err := s.DefineMetric(ctx, p); err == nil || !strings.Contains(err.Error(), "value_column") {
			t.Errorf("bad value column: %v", err)
		}
		mustDefine(t, s, DefineMetricParams{Name: "rides", Description: "d", Asset: "duckdb://a.b"})
		p = DefineMetricParams{Name: "m", Description: "d", Asset: "duckdb://a.b", MovesWith: []string{"rides; DROP"}}
		if _, err := s.DefineMetric(ctx, p); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not a metric name") {
			t.Errorf("moves_with that is no metric name: %v", err)
		}
		if _, err := s.DefineMetric(ctx, DefineMetricParams{Name: "Bad Name", Description: "d", Asset: "duckdb://a.b"}); err == nil {
			t.Error("bad name accepted")
		}
		list, err := s.ListMetrics(ctx)
		if err != nil || len(list) != 1 {
			t.Fatalf("metrics stored after refusals: %+v %v", list, err)
		}
		// A trailing semicolon is fine, and the definition round-trips.
		p = base
		p.SQL, p.TimeColumn = "SELECT hour, 1 AS value FROM t GROUP BY hour;", "hour"
		d := mustDefine(t, s, p)
		if d.Source != SourceSQL || d.ValueColumn != "value" || d.Grain != "hour" || d.Direction != "both" || d.SymptomKind != SymptomValue {
			t.Fatalf("stored definition %+v", d)
		}
	})
}

// The kinds a metric may report are exactly the ones DefineMetric takes:
// every symptom kind but divergence, the default first.
func TestMetricSymptomKinds(t *testing.T) {
	s, _ := newService(t, storetest.SQLite(t), tue(15, 5), nil)
	for _, k := range SymptomKinds {
		_, err := s.DefineMetric(context.Background(), DefineMetricParams{Name: "m_" + string(k), Description: "d", Asset: "snowflake://usage.usage_hourly", SymptomKind: string(k)})
		if listed := slices.Contains(MetricSymptomKinds, k); listed != (err == nil) {
			t.Errorf("symptom kind %s: listed %v, DefineMetric error %v", k, listed, err)
		}
	}
	if d := mustDefine(t, s, DefineMetricParams{Name: "m_default", Description: "d", Asset: "snowflake://usage.usage_hourly"}); d.SymptomKind != MetricSymptomKinds[0] {
		t.Errorf("default symptom kind %s, listed first %s", d.SymptomKind, MetricSymptomKinds[0])
	}
}
