package checks

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/warehouse"
)

// visits is five days of hourly rows (a row every 90 s: 40 an hour), with
// a key that is unique unless dupAt names a row whose key repeats the
// first row's, days later, in an hour of its own (no hour holds a
// duplicate).
func visits(dupAt int) string {
	return fmt.Sprintf(`CREATE TABLE shop.visits AS
		SELECT CASE WHEN range = %d THEN 0 ELSE range END AS visit_id,
			TIMESTAMP '2025-03-06 00:00:00' + to_microseconds(range * 90000000) AS event_time,
			CASE WHEN range %% 10 = 0 THEN NULL ELSE (range %% 50) * 1.5 END AS amount,
			['web', 'app', 'api'][range %% 3 + 1] AS channel
		FROM range(5 * 24 * 40)`, dupAt)
}

var visitsStart = time.Date(2025, 3, 6, 0, 0, 0, 0, time.UTC)

// A five-day hourly window is a backfill: one statement per three days
// (two), a progress report after each, every hour recorded, the same
// per-bucket values a single scan of the window gives, and each day's
// window values as a check of that day alone records them.
func TestBackfillRunsInChunksAndRecordsEveryHourAndDay(t *testing.T) {
	wh := &countingWarehouse{Warehouse: openFixture(t, visits(-1))}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		now := visitsStart.Add(6 * 24 * time.Hour)
		var reports [][2]int
		env := Env{DB: db, Warehouse: wh, Clock: clock.NewFake(now), Agent: "dw-quality", Tool: "run_quality_check",
			Progress: func(done, total int, _ string) { reports = append(reports, [2]int{done, total}) }}
		req := CheckRequest{Table: "shop.visits", Bucket: "hour", Since: "2025-03-06", Until: "2025-03-11"}
		before := wh.queries.Load()
		rep, err := RunCheck(ctx, env, req)
		if err != nil {
			t.Fatal(err)
		}
		if n := wh.queries.Load() - before; n != 2 || rep.Statements != 2 {
			t.Fatalf("backfill ran %d queries (%d statements), want one per three days (2)", n, rep.Statements)
		}
		// The plan, then each chunk, of 3 steps, increasing.
		want := [][2]int{{1, 3}, {2, 3}, {3, 3}}
		if !slices.Equal(reports, want) {
			t.Fatalf("progress %v, want %v", reports, want)
		}
		asset := "duckdb://shop.visits"
		points, err := baseline.Load(ctx, db, baseline.Series{Asset: asset, Metric: MetricRowCount, Grain: "hour"}, visitsStart, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(points) != 120 {
			t.Fatalf("%d hourly row counts recorded, want 120", len(points))
		}
		for _, p := range points {
			if p.Value != 40 {
				t.Fatalf("hour %s recorded %v rows, want 40", p.At, p.Value)
			}
		}
		// The hours recorded equal those a single scan of the window
		// (planned the old way, with ROLLUP) records into a fresh store,
		// series for series and value for value.
		table, err := warehouse.Resolve(ctx, wh, "shop.visits")
		if err != nil {
			t.Fatal(err)
		}
		specs, _ := Profile(table, wh.Dialect())
		one, err := Plan(table, wh.Dialect(), specs, Window{Column: "event_time", Start: visitsStart, End: visitsStart.Add(5 * 24 * time.Hour), Grain: Hour})
		if err != nil {
			t.Fatal(err)
		}
		scan, err := Run(ctx, wh, one, RunOptions{Clock: clock.NewFake(now)})
		if err != nil {
			t.Fatal(err)
		}
		ref := storetest.SQLite(t)
		if _, err := Evaluate(ctx, ref, scan); err != nil {
			t.Fatal(err)
		}
		hourly := func(db *store.DB) map[string]float64 {
			t.Helper()
			all, err := baseline.LoadAsset(ctx, db, asset, visitsStart, now)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]float64{}
			for s, ps := range all {
				if s.Grain != "hour" {
					continue
				}
				for _, p := range ps {
					out[s.String()+" "+p.At.Format(time.RFC3339)] = p.Value
				}
			}
			return out
		}
		got, ref1 := hourly(db), hourly(ref)
		if len(ref1) < 120*5 || len(got) != len(ref1) {
			t.Fatalf("backfill recorded %d hourly points, one scan %d", len(got), len(ref1))
		}
		for k, v := range ref1 {
			if g, ok := got[k]; !ok || g != v {
				t.Fatalf("%s: backfill recorded %v (%v), one scan %v", k, g, ok, v)
			}
		}
		// The window's row count adds up from the chunks.
		if r := resultFor(t, rep, "row_count", MetricRowCount); r.Observed == nil || *r.Observed != 4800 {
			t.Fatalf("window rows %v, want 4800", deref(r.Observed))
		}
		checkDays(t, wh, db, now, visitsStart, 5)
	})
}

// A window that starts and ends inside a day gives the days it holds
// whole their points and the two part days none, also when it is stopped
// after its first chunk and run again: chunks end on midnights, so the
// stopped run has recorded the days of the chunk it finished, and the
// re-run, which skips that chunk, the rest.
func TestBackfillFromInsideADayRecordsEveryWholeDay(t *testing.T) {
	wh := &countingWarehouse{Warehouse: openFixture(t, visits(-1))}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		now := visitsStart.Add(6 * 24 * time.Hour)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		env := Env{DB: db, Warehouse: wh, Clock: clock.NewFake(now),
			Progress: func(done, _ int, _ string) {
				if done == 2 { // the plan and the first chunk
					cancel()
				}
			}}
		// Chunks 05:00 on the 6th to midnight on the 9th, then to 05:00
		// on the 11th.
		req := CheckRequest{Table: "shop.visits", Bucket: "hour", Since: "2025-03-06T05:00:00Z", Until: "2025-03-11T05:00:00Z"}
		if _, err := RunCheck(ctx, env, req); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled backfill: %v", err)
		}
		checkDays(t, wh, db, now, visitsStart.Add(24*time.Hour), 2)
		env.Progress = nil
		rerunLastChunk(t, wh, env, req)
		checkDays(t, wh, db, now, visitsStart.Add(24*time.Hour), 4)
	})
}

// A day is recorded once it is over: with the clock in the last hour of a
// day, every hour of it has begun (and is in the scan), but the day is not
// a day's worth yet.
func TestBackfillRecordsNoDayBeforeItEnds(t *testing.T) {
	wh := openFixture(t, visits(-1))
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		now := visitsStart.Add(4*24*time.Hour + 23*time.Hour + 30*time.Minute)
		env := Env{DB: db, Warehouse: wh, Clock: clock.NewFake(now)}
		req := CheckRequest{Table: "shop.visits", Bucket: "hour", Since: "2025-03-06", Until: "2025-03-12"}
		if _, err := RunCheck(context.Background(), env, req); err != nil {
			t.Fatal(err)
		}
		checkDays(t, wh, db, now, visitsStart, 4)
	})
}

// A check judged over the whole window by a statement of its own (here a
// relationship, whose orphans no chunk counts) records no day from the
// chunks, while the counts beside it do.
func TestBackfillDaysLeaveWindowChecksOut(t *testing.T) {
	wh := openFixture(t, visits(-1), `CREATE TABLE shop.channels AS SELECT * FROM (VALUES ('web'), ('app')) v(name)`)
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		now := visitsStart.Add(6 * 24 * time.Hour)
		env := Env{DB: db, Warehouse: wh, Clock: clock.NewFake(now)}
		req := CheckRequest{Table: "shop.visits", Bucket: "hour", Since: "2025-03-06", Until: "2025-03-11",
			Checks: []Spec{{Kind: KindRowCount}, {Kind: KindRelationship, Column: "channel", To: "shop.channels", Field: "name"}}}
		rep, err := RunCheck(context.Background(), env, req)
		if err != nil {
			t.Fatal(err)
		}
		if r := resultFor(t, rep, "relationships(channel -> shop.channels.name)", MetricOrphanRate); r.Observed == nil || math.Abs(*r.Observed-1.0/3) > 1e-9 {
			t.Fatalf("window orphan rate %v, want a third (every api row)", deref(r.Observed))
		}
		all, err := baseline.LoadAsset(context.Background(), db, "duckdb://shop.visits", visitsStart.Add(-24*time.Hour), now)
		if err != nil {
			t.Fatal(err)
		}
		days := map[string]int{}
		for s, ps := range all {
			if s.Grain == "window:24h" {
				days[s.Metric] += len(ps)
			}
		}
		if want := map[string]int{MetricRowCount: 5}; !maps.Equal(days, want) {
			t.Fatalf("day points by metric %v, want %v", days, want)
		}
	})
}

// rerunLastChunk runs the request of a backfill stopped before its last
// chunk again, and requires that it scans that chunk alone.
func rerunLastChunk(t *testing.T, wh *countingWarehouse, env Env, req CheckRequest) *Report {
	t.Helper()
	before := wh.queries.Load()
	rep, err := RunCheck(context.Background(), env, req)
	if err != nil {
		t.Fatal(err)
	}
	if n := wh.queries.Load() - before; n != 1 || rep.Statements != 1 {
		t.Fatalf("the re-run ran %d queries (%d statements), want the chunk left", n, rep.Statements)
	}
	return rep
}

// checkDays requires that db holds window:24h points for exactly the n
// days from first, each day's the same series and values as that day
// scanned alone by a backfill's chunk (the values that add up from
// hours), and each of them the value a one-day check records.
func checkDays(t *testing.T, wh warehouse.Warehouse, db *store.DB, now, first time.Time, n int) {
	t.Helper()
	ctx := context.Background()
	asset := "duckdb://shop.visits"
	all, err := baseline.LoadAsset(ctx, db, asset, visitsStart.Add(-24*time.Hour), now)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for s, ps := range all {
		if s.Grain == "window:24h" {
			for _, p := range ps {
				got[s.Metric+" "+s.Dimension+" "+p.At.Format(time.RFC3339)] = p.Value
			}
		}
	}
	table, err := warehouse.Resolve(ctx, wh, "shop.visits")
	if err != nil {
		t.Fatal(err)
	}
	specs, _ := Profile(table, wh.Dialect())
	want := map[string]float64{}
	ref := storetest.SQLite(t)
	for d := range n {
		day := Window{Column: "event_time", Start: first.Add(time.Duration(d) * 24 * time.Hour), Grain: Hour}
		day.End = day.Start.Add(24 * time.Hour)
		alone, err := plan(table, wh.Dialect(), specs, day, true)
		if err != nil {
			t.Fatal(err)
		}
		scan, err := Run(ctx, wh, alone, RunOptions{Clock: clock.NewFake(now)})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range scan.Observations {
			if o.Total && o.Metric != MetricStaleness {
				want[o.Metric+" "+o.Dimension+" "+day.Start.Format(time.RFC3339)] = o.Value
			}
		}
		one, err := Plan(table, wh.Dialect(), specs, day)
		if err != nil {
			t.Fatal(err)
		}
		if scan, err = Run(ctx, wh, one, RunOptions{Clock: clock.NewFake(now)}); err != nil {
			t.Fatal(err)
		}
		if _, err := Evaluate(ctx, ref, scan); err != nil {
			t.Fatal(err)
		}
	}
	if len(want) < 3*n || len(got) != len(want) {
		t.Fatalf("%d day points recorded, want %d (%d days): %v", len(got), len(want), n, got)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Fatalf("%s: recorded %v (%v), the day alone %v", k, g, ok, v)
		}
	}
	day, err := baseline.LoadAsset(ctx, ref, asset, visitsStart.Add(-24*time.Hour), now)
	if err != nil {
		t.Fatal(err)
	}
	for s, ps := range day {
		for _, p := range ps {
			k := s.Metric + " " + s.Dimension + " " + p.At.Format(time.RFC3339)
			if g, ok := got[k]; ok && s.Grain == "window:24h" && math.Abs(g-p.Value) > 1e-12 {
				t.Fatalf("%s: recorded %v, a check of the day %v", k, g, p.Value)
			}
		}
	}
}

// A backfill cancelled between chunks keeps the hours and days it
// recorded, says how to continue, and the same request run again scans
// only the rest.
func TestBackfillCancelledKeepsItsChunksAndARerunContinues(t *testing.T) {
	wh := &countingWarehouse{Warehouse: openFixture(t, visits(-1))}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		now := visitsStart.Add(6 * 24 * time.Hour)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		env := Env{DB: db, Warehouse: wh, Clock: clock.NewFake(now), Agent: "dw-quality", Tool: "run_quality_check",
			Progress: func(done, _ int, _ string) {
				if done == 2 { // the plan and one chunk
					cancel()
				}
			}}
		req := CheckRequest{Table: "shop.visits", Bucket: "hour", Since: "2025-03-06", Until: "2025-03-11"}
		_, err := RunCheck(ctx, env, req)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "after 1 of 2 chunks") {
			t.Fatalf("cancelled backfill: %v", err)
		}
		asset := "duckdb://shop.visits"
		points, err := baseline.Load(context.Background(), db, baseline.Series{Asset: asset, Metric: MetricRowCount, Grain: "hour"}, visitsStart, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(points) != 72 || !points[71].At.Equal(visitsStart.Add(71*time.Hour)) {
			t.Fatalf("%d hours kept after the cancel, want the first 72", len(points))
		}
		checkDays(t, wh, db, now, visitsStart, 3)
		env.Progress = nil
		rep := rerunLastChunk(t, wh, env, req)
		if !slices.ContainsFunc(rep.Inferred, func(s string) bool { return strings.HasPrefix(s, "resumed: 1 of 2 chunks") }) {
			t.Fatalf("the re-run does not say it resumed: %q", rep.Inferred)
		}
		points, err = baseline.Load(context.Background(), db, baseline.Series{Asset: asset, Metric: MetricRowCount, Grain: "hour"}, visitsStart, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(points) != 120 {
			t.Fatalf("%d hours recorded after the re-run, want 120", len(points))
		}
		checkDays(t, wh, db, now, visitsStart, 5)
	})
}

// A declared key must be unique across the whole window: a key repeated
// days apart (no hour holds a duplicate) fails the backfill, through a
// window-wide statement of its own; the same table without it passes.
func TestBackfillJudgesADeclaredKeyAcrossTheWindow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dupAt int
		fail  bool
	}{{"unique", -1, false}, {"repeated days apart", 3 * 24 * 40, true}} {
		t.Run(tc.name, func(t *testing.T) {
			wh := &countingWarehouse{Warehouse: openFixture(t, visits(tc.dupAt))}
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				env := Env{DB: db, Warehouse: wh, Clock: clock.NewFake(visitsStart.Add(6 * 24 * time.Hour))}
				rep, err := RunCheck(context.Background(), env, CheckRequest{Table: "shop.visits", Bucket: "hour", Since: "2025-03-06", Until: "2025-03-11",
					Checks: []Spec{{Kind: KindUniqueness, Columns: []string{"visit_id"}}}})
				if err != nil {
					t.Fatal(err)
				}
				if rep.Statements != 3 {
					t.Fatalf("%d statements, want one per chunk (2) and the window's key", rep.Statements)
				}
				r := resultFor(t, rep, "uniqueness(visit_id)", MetricDuplicateRate)
				if got := r.Status == Fail; got != tc.fail {
					t.Fatalf("declared key: %s (%s), want fail=%v", r.Status, r.Message, tc.fail)
				}
				for _, b := range r.Buckets {
					if b.Value != 0 {
						t.Fatalf("hour %s has duplicate rate %v; no hour holds a duplicate", b.Start, b.Value)
					}
				}
			})
		})
	}
}
