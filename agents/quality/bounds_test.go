package quality

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/warehouse/duckdb/duckdbtest"
	"github.com/dataworkers/dw/internal/warehouses"
)

// TestWideTableAnswersAreBounded checks a 60-column table per hour over
// three days (a first-check backfill), lists 55 tables, and reads a year of hourly history: each answer stays under
// 80,000 characters, and paging the tables and the history visits each
// item once.
func TestWideTableAnswersAreBounded(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	t.Setenv("DW_HOME", home)
	path := filepath.Join(home, "wide.duckdb")
	now := time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)
	var cols []string
	for i := range 60 {
		// Every column is null in some hours, so the bucketed null rates
		// are not a plain pass and list their buckets.
		cols = append(cols, fmt.Sprintf("CASE WHEN (h + %d) %% 7 = 0 THEN NULL ELSE h END AS c%03d", i, i))
	}
	stmts := []string{
		"CREATE SCHEMA s",
		fmt.Sprintf("CREATE TABLE s.wide AS SELECT TIMESTAMP '2026-02-17 00:00:00' + INTERVAL (h) HOUR AS event_time, h AS id, %s FROM range(0, %d) t(h)",
			strings.Join(cols, ", "), 3*24),
	}
	for i := range 54 {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE s.t%03d (id INTEGER)", i))
	}
	duckdbtest.File(t, path, stmts...)
	cfg, err := config.Parse("dw.yaml", []byte(fmt.Sprintf("home: %s\nwarehouses:\n  - {name: w, kind: duckdb, path: %q}\n", home, path)))
	if err != nil {
		t.Fatal(err)
	}
	d := deps.New(Name, cfg, clock.NewFake(now), nil)
	d.OpenWarehouse = warehouses.Open
	t.Cleanup(func() { d.Close() })
	h := &handlers{d: d}
	size := func(v any) int {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}

	out, summary, err := h.runQualityCheck(ctx, RunIn{CheckRequest: checks.CheckRequest{Table: "s.wide", Since: "2026-02-17", Until: "2026-02-20", Bucket: "hour"}, NoIncident: true})
	if err != nil {
		t.Fatal(err)
	}
	n := size(out) + len(summary)
	t.Logf("run_quality_check: %d characters, %d of %d results listed", n, len(out.Results), out.ResultsTotal)
	if n > 80_000 || out.ResultsTotal < 60 || len(out.Results) != maxResults || out.ResultsOmitted != out.ResultsTotal-maxResults {
		t.Errorf("run_quality_check: %d characters, %d listed of %d, %d omitted", n, len(out.Results), out.ResultsTotal, out.ResultsOmitted)
	}
	sum := 0
	for _, c := range out.ResultsBy {
		sum += c
	}
	if sum != out.ResultsTotal {
		t.Errorf("results by status %v sum to %d of %d", out.ResultsBy, sum, out.ResultsTotal)
	}

	// Each listed table is counted and described, so the walk uses the
	// default page: 50, then 5.
	seen := map[string]int{}
	var in ListTablesIn
	for pages := 0; ; pages++ {
		res, _, err := h.listTables(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if n := size(res); pages == 0 && (n > 80_000 || res.Total != 55 || len(res.Tables) != page.DefaultLimit) {
			t.Errorf("list_tables: %d characters, %d of %d", n, len(res.Tables), res.Total)
		}
		for _, tb := range res.Tables {
			seen[tb.Table]++
		}
		if res.NextCursor == "" {
			break
		}
		in.Cursor = res.NextCursor
	}
	if len(seen) != 55 {
		t.Errorf("list_tables pages visited %d of 55", len(seen))
	}
	for tb, c := range seen {
		if c != 1 {
			t.Errorf("%s listed %d times", tb, c)
		}
	}

	hist, _, err := h.getHistory(ctx, HistoryIn{HistoryRequest: checks.HistoryRequest{Table: "s.wide", Metric: "row_count", Days: 366}})
	if err != nil {
		t.Fatal(err)
	}
	if n := size(hist); n > 80_000 || hist.Total < 3*24 || len(hist.Points) != hist.Total || hist.NextCursor != "" || hist.OthersTotal < 60 || len(hist.Others) != 50 {
		t.Errorf("get_quality_history: %d characters, %d of %d points, others %d of %d", n, len(hist.Points), hist.Total, len(hist.Others), hist.OthersTotal)
	}
	points := map[time.Time]int{}
	var prevOldest time.Time
	hin := HistoryIn{HistoryRequest: checks.HistoryRequest{Table: "s.wide", Metric: "row_count", Days: 366, Limit: 10}}
	for {
		res, _, err := h.getHistory(ctx, hin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range res.Points {
			points[p.At]++
		}
		if len(res.Points) > 0 {
			if !prevOldest.IsZero() && !res.Points[len(res.Points)-1].At.Before(prevOldest) {
				t.Fatalf("a later page is not older: %s after %s", res.Points[len(res.Points)-1].At, prevOldest)
			}
			prevOldest = res.Points[0].At
		}
		if res.NextCursor == "" {
			break
		}
		hin.Cursor = res.NextCursor
	}
	if len(points) != hist.Total {
		t.Errorf("history pages visited %d of %d points", len(points), hist.Total)
	}
	for at, c := range points {
		if c != 1 {
			t.Errorf("point %s listed %d times", at, c)
		}
	}
}

// TestBoundKeepsOnsetAndLatest: a result with 500 buckets lists the first
// buckets that are not a pass (where it started) and the latest, results
// that are not a pass come first, and the counts cover everything.
func TestBoundKeepsOnsetAndLatest(t *testing.T) {
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var buckets []checks.BucketResult
	for i := range 500 {
		st := checks.Pass
		if i >= 100 && i%2 == 0 {
			st = checks.Anomalous
		}
		buckets = append(buckets, checks.BucketResult{Start: start.Add(time.Duration(i) * time.Hour), Status: st})
	}
	var results []checks.MetricResult
	for i := range 100 {
		results = append(results, checks.MetricResult{Check: fmt.Sprintf("pass%d", i), Status: checks.Pass})
	}
	results = append(results, checks.MetricResult{Check: "bad", Status: checks.Anomalous, Buckets: buckets})
	out := &RunOut{Report: checks.Report{Results: results}}
	out.bound()
	if len(out.Results) != maxResults || out.ResultsTotal != 101 || out.ResultsOmitted != 61 || out.ResultsBy["pass"] != 100 || out.ResultsBy["anomalous"] != 1 {
		t.Fatalf("results %d of %d, omitted %d, by %v", len(out.Results), out.ResultsTotal, out.ResultsOmitted, out.ResultsBy)
	}
	bad := out.Results[0]
	if bad.Check != "bad" || bad.BucketsTotal != 500 || len(bad.Buckets) != bucketsHead+bucketsTail {
		t.Fatalf("first result %s with %d of %d buckets", bad.Check, len(bad.Buckets), bad.BucketsTotal)
	}
	if !bad.Buckets[0].Start.Equal(start.Add(100*time.Hour)) || !bad.Buckets[len(bad.Buckets)-1].Start.Equal(start.Add(499*time.Hour)) {
		t.Errorf("buckets kept: onset %s, latest %s", bad.Buckets[0].Start, bad.Buckets[len(bad.Buckets)-1].Start)
	}
	if len(results[100].Buckets) != 500 {
		t.Error("bound changed the report it was given")
	}
}
