package checks

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

const fixtureAsset = "duckdb://shop.events"

// seedHistory records 14 days of hourly history before the fixture's day
// in which the fixture's table was healthy: ten rows an hour, no nulls in
// account_id, no repeated ids, one minute of load lag; plus a freshness
// snapshot every hour.
func seedHistory(t *testing.T, db *store.DB) {
	t.Helper()
	series := func(metric, dim, grain string) baseline.Series {
		return baseline.Series{Asset: fixtureAsset, Metric: metric, Dimension: dim, Grain: grain}
	}
	var samples []baseline.Sample
	for h := 14 * 24; h > 0; h-- {
		at := day.Add(-time.Duration(h) * time.Hour)
		wobble := float64(h%3) - 1 // 9, 10 or 11 rows
		for _, s := range []struct {
			s baseline.Series
			v float64
		}{
			{series(MetricRowCount, "", "hour"), 10 + wobble},
			{series(MetricNullRate, "account_id", "hour"), 0},
			{series(MetricNullRate, "amount", "hour"), 0.1},
			{series(MetricDuplicateRate, "event_id", "hour"), 0},
			{series(MetricLagAvg, "loaded_at-event_time", "hour"), 60 + wobble},
			{series(MetricLagP95, "loaded_at-event_time", "hour"), 60},
			{series(MetricStaleness, "event_time", ""), 600 + 60*wobble},
		} {
			samples = append(samples, baseline.Sample{Series: s.s, Point: baseline.Point{At: at, Value: s.v}})
		}
	}
	if err := baseline.Record(context.Background(), db, day, samples...); err != nil {
		t.Fatal(err)
	}
}

func resultFor(t *testing.T, rep *Report, check, metric string) MetricResult {
	t.Helper()
	for _, r := range rep.Results {
		if r.Check == check && r.Metric == metric {
			return r
		}
	}
	t.Fatalf("no result %s %s in %+v", check, metric, rep.Results)
	return MetricResult{}
}

func TestEvaluateJudgesAgainstHistoryAndExpectations(t *testing.T) {
	wh := openFixture(t)
	tab := resolve(t, wh, "events")
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		seedHistory(t, db)
		w := Window{Column: "event_time", Start: day, End: day.Add(24 * time.Hour), Grain: Hour}
		plan, err := Plan(tab, wh.Dialect(), allSpecs(), w)
		if err != nil {
			t.Fatal(err)
		}
		now := day.Add(5*time.Hour + 30*time.Minute)
		scan, err := Run(ctx, wh, plan, RunOptions{Clock: fixedClock{now}})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Evaluate(ctx, db, scan)
		if err != nil {
			t.Fatal(err)
		}

		nulls := resultFor(t, rep, "null_rate(account_id)", MetricNullRate)
		if nulls.Status != Anomalous || nulls.History == nil || nulls.History.Basis != baseline.AlwaysZero || nulls.History.Points != 336 {
			t.Errorf("account_id nulls: %+v", nulls)
		}
		if !strings.Contains(nulls.Message, "account_id null in 30.0% of rows (3 of 10) at 01:00 (0% in every earlier check for 14 days, 336 points)") {
			t.Errorf("nulls message: %s", nulls.Message)
		}
		if amount := resultFor(t, rep, "null_rate(amount)", MetricNullRate); amount.Status != Pass {
			t.Errorf("amount has its usual 10%% nulls, got %s: %s", amount.Status, amount.Message)
		}

		volume := resultFor(t, rep, "row_count", MetricRowCount)
		if volume.Status != Anomalous || !strings.Contains(volume.Message, "0 rows at 03:00") {
			t.Errorf("the empty hour 03: %s %s", volume.Status, volume.Message)
		}
		// The move in numbers: two weeks of history judge hour 03 against
		// weekday 03:00s (9 to 11 rows), and the message says so in words.
		if volume.Usual == nil || *volume.Usual < 9 || *volume.Usual > 11 || volume.ChangePct == nil || *volume.ChangePct != -100 ||
			volume.ComparedWith != "weekday 03:00" || volume.History == nil || volume.History.Basis != baseline.DayTypeHour {
			t.Errorf("volume move: usual %v change %v compared with %q history %+v", volume.Usual, volume.ChangePct, volume.ComparedWith, volume.History)
		}
		if volume.Usual != nil && !strings.Contains(volume.Message, "0 rows at 03:00, 100% below the usual weekday 03:00 (median "+number(*volume.Usual)+"; expected") {
			t.Errorf("volume message: %s", volume.Message)
		}
		for _, b := range volume.Buckets {
			switch b.Start.Hour() {
			case 3:
				if b.Status != Anomalous {
					t.Errorf("hour 03 bucket %+v", b)
				}
			case 5:
				if !b.Partial || b.Status != Learning {
					t.Errorf("hour 05 has not ended and must not be judged on volume: %+v", b)
				}
			default:
				if b.Status != Pass {
					t.Errorf("hour %d bucket %+v", b.Start.Hour(), b)
				}
			}
		}

		dups := resultFor(t, rep, "uniqueness(event_id)", MetricDuplicateRate)
		if dups.Status != Fail || dups.Expectation != "key must be unique" {
			t.Errorf("declared key with 3 repeats: %+v", dups)
		}
		lag := resultFor(t, rep, "load_lag(loaded_at - event_time)", MetricLagAvg)
		if lag.Status != Anomalous || !strings.Contains(lag.Message, "at 02:00") {
			t.Errorf("late rows in hour 02: %s %s", lag.Status, lag.Message)
		}
		if fresh := resultFor(t, rep, "freshness(event_time)", MetricStaleness); fresh.Status != Pass {
			t.Errorf("freshness 10m against ~10m history: %s %s", fresh.Status, fresh.Message)
		}
		for _, c := range []string{"accepted_values(status)", "range(amount)", "predicate(non_negative)"} {
			found := false
			for _, r := range rep.Results {
				if r.Check == c && r.Status == Fail && r.Problem == ProblemValues {
					found = true
				}
			}
			if !found {
				t.Errorf("%s should fail as a values problem", c)
			}
		}

		want := []Problem{ProblemVolume, ProblemNulls, ProblemUniqueness, ProblemFreshness, ProblemValues}
		if rep.Status != Fail || strings.Join(problemStrings(rep.Problems), ",") != strings.Join(problemStrings(want), ",") {
			t.Errorf("report %s %v, want fail with %v", rep.Status, rep.Problems, want)
		}
		if !strings.HasPrefix(rep.Summary, "shop.events (event_time, 2025-03-11 00:00 to 2025-03-12 00:00 UTC, by hour): Volume problem:") {
			t.Errorf("summary: %s", rep.Summary)
		}

		// Every judged value became history, except the unfinished hour's
		// volume.
		hist, err := baseline.LoadAsset(ctx, db, fixtureAsset, day, now)
		if err != nil {
			t.Fatal(err)
		}
		rc := hist[baseline.Series{Asset: fixtureAsset, Metric: MetricRowCount, Grain: "hour"}]
		if len(rc) != 5 {
			t.Errorf("stored %d row_count buckets for today, want 5 (hour 05 is partial)", len(rc))
		}
		if n := len(hist[baseline.Series{Asset: fixtureAsset, Metric: MetricNullRate, Dimension: "account_id", Grain: "hour"}]); n != 5 {
			t.Errorf("stored %d null-rate buckets, want 5 (hours with rows)", n)
		}
		if n := len(hist[baseline.Series{Asset: fixtureAsset, Metric: MetricNullRate, Dimension: "account_id", Grain: "window:24h"}]); n != 1 {
			t.Errorf("stored %d window totals, want 1", n)
		}

		// A second run later the same day: today's stored anomalies do not
		// train today's baseline, so hour 01 is still anomalous.
		again, err := Run(ctx, wh, plan, RunOptions{Clock: fixedClock{now.Add(15 * time.Minute)}})
		if err != nil {
			t.Fatal(err)
		}
		rep2, err := Evaluate(ctx, db, again)
		if err != nil {
			t.Fatal(err)
		}
		if r := resultFor(t, rep2, "null_rate(account_id)", MetricNullRate); r.Status != Anomalous || r.History.Points != 336 {
			t.Errorf("second run: %s on %d points", r.Status, r.History.Points)
		}
	})
}

func problemStrings(ps []Problem) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}

// A healthy table with history: nothing is wrong with its shape, so the
// summary says the next step is a metric check.
func TestEvaluateCleanTableNamesAValueProblem(t *testing.T) {
	wh := openFixture(t, `CREATE TABLE shop.clean AS SELECT range AS id, 'x' AS name FROM range(10)`)
	tab := resolve(t, wh, "clean")
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		now := day.Add(12 * time.Hour)
		asset := "duckdb://shop.clean"
		var samples []baseline.Sample
		for h := 1; h <= 48; h++ {
			at := now.Add(-time.Duration(h) * time.Hour)
			samples = append(samples,
				baseline.Sample{Series: baseline.Series{Asset: asset, Metric: MetricRowCount}, Point: baseline.Point{At: at, Value: 10}},
				baseline.Sample{Series: baseline.Series{Asset: asset, Metric: MetricNullRate, Dimension: "id"}, Point: baseline.Point{At: at, Value: 0}},
				baseline.Sample{Series: baseline.Series{Asset: asset, Metric: MetricNullRate, Dimension: "name"}, Point: baseline.Point{At: at, Value: 0}},
				baseline.Sample{Series: baseline.Series{Asset: asset, Metric: MetricDuplicateRate, Dimension: "id"}, Point: baseline.Point{At: at, Value: 0}},
			)
		}
		if err := baseline.Record(ctx, db, now, samples...); err != nil {
			t.Fatal(err)
		}
		specs, inf := Profile(tab, wh.Dialect())
		if len(inf.Key) != 1 || inf.Key[0] != "id" {
			t.Fatalf("inferred key %v, want id", inf.Key)
		}
		plan, err := Plan(tab, wh.Dialect(), specs, Window{})
		if err != nil {
			t.Fatal(err)
		}
		scan, err := Run(ctx, wh, plan, RunOptions{Clock: fixedClock{now}})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Evaluate(ctx, db, scan)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Status != Pass || len(rep.Problems) != 0 {
			t.Fatalf("clean table: %s %v\n%s", rep.Status, rep.Problems, rep.Summary)
		}
		for _, want := range []string{"no volume, null or uniqueness problem in 4 checks", "freshness not checked", "value problem"} {
			if !strings.Contains(rep.Summary, want) {
				t.Errorf("summary %q lacks %q", rep.Summary, want)
			}
		}
	})
}
