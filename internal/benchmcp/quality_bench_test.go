package benchmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// eventsColumns are the bench table's columns (backfillTable), in order.
var eventsColumns = []string{"id", "account_id", "event_time", "loaded_at", "amount", "status", "quantity", "region", "bytes", "priority", "is_test", "sku"}

// floorCheck is one check of the profile dw-quality infers for the bench
// table (checks.Profile), written by hand: the aggregates it needs per
// bucket (or for the whole table), and window, those of them whose value
// over a window does not add up from its buckets' (a distinct count, a
// quantile, the most common value), which a check of a bucketed window
// also computes over the window. Every statement starts with COUNT(*),
// which the row count and every rate share.
type floorCheck struct {
	kind   checks.Kind
	column string
	aggs   []string
	window []string
}

// eventsChecks is the profile of the bench table by hand: the row count,
// every column's nulls, the inferred key's repeats, freshness and load lag
// of the two time columns, and the values of every numeric and category
// column but the key. checkFloorMatches holds it to checks.Profile.
func eventsChecks() []floorCheck {
	out := []floorCheck{{kind: checks.KindRowCount}}
	for _, c := range eventsColumns {
		out = append(out, floorCheck{kind: checks.KindNullRate, column: c, aggs: []string{`COUNT("` + c + `")`}})
	}
	out = append(out, floorCheck{kind: checks.KindUniqueness, column: "id", aggs: []string{`COUNT(DISTINCT id)`}, window: []string{`COUNT(DISTINCT id)`}})
	out = append(out, floorCheck{kind: checks.KindFreshness, column: "event_time", aggs: []string{`MAX(event_time)`}})
	lag := `epoch_ms(loaded_at) - epoch_ms(event_time)`
	out = append(out, floorCheck{kind: checks.KindLoadLag, column: "loaded_at",
		aggs:   []string{`SUM(` + lag + `)`, `COUNT(` + lag + `)`, `quantile_cont(` + lag + `, 0.95)`},
		window: []string{`quantile_cont(` + lag + `, 0.95)`}})
	for _, c := range []string{"account_id", "amount", "status", "quantity", "region", "bytes", "priority", "sku"} {
		q := `"` + c + `"`
		fc := floorCheck{kind: checks.KindDistribution, column: c}
		switch c {
		case "status", "region", "sku": // categories: distinct values, the top value and its count
			h := `histogram(` + q + `)` // one histogram gives the top value and its count
			fc.aggs = []string{`approx_count_distinct(` + q + `)`, `map_keys(` + h + `)[list_position(map_values(` + h + `), list_max(map_values(` + h + `)))]`, `list_max(map_values(` + h + `))`}
			fc.window = fc.aggs
		default: // numbers: zero count, mean (a window's adds up from its buckets' and their counts), median and p95
			fc.aggs = []string{`COUNT(CASE WHEN ` + q + ` = 0 THEN 1 END)`, `AVG(` + q + `)`, `approx_quantile(` + q + `, [0.5, 0.95])`}
			fc.window = []string{`approx_quantile(` + q + `, [0.5, 0.95])`}
		}
		out = append(out, fc)
	}
	return out
}

// checkFloorMatches fails unless the hand-written checks are the ones
// dw-quality profiles the table with, so the floor answers the same
// question as the product (and a profile that grows a check fails here
// rather than flattering the ratio).
func checkFloorMatches(b *testing.B, wh warehouse.Warehouse) {
	b.Helper()
	tab, err := warehouse.Resolve(context.Background(), wh, "events")
	if err != nil {
		b.Fatal(err)
	}
	specs, _ := checks.Profile(tab, wh.Dialect())
	var product, floor []string
	for _, s := range specs {
		col := s.Column
		switch s.Kind {
		case checks.KindUniqueness:
			col = strings.Join(s.Columns, ",")
		case checks.KindLoadLag:
			col = s.IngestTime
		}
		product = append(product, string(s.Kind)+":"+col)
	}
	for _, c := range eventsChecks() {
		floor = append(floor, string(c.kind)+":"+c.column)
	}
	slices.Sort(product)
	slices.Sort(floor)
	if !slices.Equal(product, floor) {
		b.Fatalf("the hand-written floor computes %v; dw-quality profiles the table with %v: update eventsChecks", floor, product)
	}
}

// floorStatement is one hand-written statement and how many rows it must
// answer.
type floorStatement struct {
	sql  string
	rows int
}

// floorSQL is one statement over the checks cs: over [from, to) (the whole
// table when from is zero), per hour when byHour, computing each check's
// aggs, or with windowPart only its window aggregates.
func floorSQL(cs []floorCheck, from, to time.Time, byHour, windowPart bool) floorStatement {
	var b strings.Builder
	b.WriteString("SELECT ")
	if byHour {
		b.WriteString("date_trunc('hour', event_time) AS h, ")
	}
	b.WriteString("COUNT(*)")
	for _, c := range cs {
		aggs := c.aggs
		if windowPart {
			aggs = c.window
		}
		for _, a := range aggs {
			b.WriteString(", " + a)
		}
	}
	b.WriteString(" FROM events")
	if !from.IsZero() {
		fmt.Fprintf(&b, " WHERE event_time >= TIMESTAMP '%s' AND event_time < TIMESTAMP '%s'", from.Format(time.DateTime), to.Format(time.DateTime))
	}
	st := floorStatement{sql: b.String(), rows: 1}
	if byHour {
		st.sql += " GROUP BY date_trunc('hour', event_time)"
		st.rows = int(to.Sub(from) / time.Hour)
	}
	return st
}

// qualityRow is one of issue 18's quality-check rows: the window asked
// for, and its floor and query-per-check statements.
type qualityRow struct {
	what     string
	args     map[string]any
	buckets  int // hourly buckets the answer's window must hold; 0 for the whole table
	floor    []floorStatement
	perCheck []floorStatement
	// fresh runs every call on a new store (a new agent, warmed): a
	// window longer than two days is a backfill, and a second backfill of
	// the same window within hours resumes from the first instead of
	// scanning again.
	fresh bool
	calls int
}

func qualityRows() []qualityRow {
	cs := eventsChecks()
	day := func(d int) time.Time { return backfillStart.Add(time.Duration(d) * 24 * time.Hour) }
	// One window, hand-written: the hourly statement, plus (windowed) one
	// plain statement for the window's values that do not add up.
	floor := func(from, to time.Time, windowed bool) (one []floorStatement, per []floorStatement) {
		byHour := !from.IsZero()
		one = []floorStatement{floorSQL(cs, from, to, byHour, false)}
		if windowed {
			one = append(one, floorSQL(cs, from, to, false, true))
		}
		for _, c := range cs {
			per = append(per, floorSQL([]floorCheck{c}, from, to, byHour, false))
			if windowed && len(c.window) > 0 {
				per = append(per, floorSQL([]floorCheck{c}, from, to, false, true))
			}
		}
		return one, per
	}
	window := func(from, to time.Time) map[string]any {
		return map[string]any{"table": "events", "since": from.Format(time.RFC3339), "until": to.Format(time.RFC3339), "bucket": "hour", "no_incident": true}
	}
	last := backfillDays - 1
	dayFloor, dayPer := floor(day(last), day(last+1), true)
	// A 21-day check is a backfill (one statement per chunk, each hour
	// recorded): the window's distinct counts and quantiles are left to
	// the buckets, so its floor has none either.
	weeksFloor, weeksPer := floor(day(0), day(21), false)
	wholeFloor, wholePer := floor(time.Time{}, time.Time{}, false)
	return []qualityRow{
		{what: "one day by hour", args: window(day(last), day(last+1)), buckets: 24, floor: dayFloor, perCheck: dayPer, calls: qualityCalls(5)},
		{what: "21 days by hour", args: window(day(0), day(21)), buckets: 21 * 24, floor: weeksFloor, perCheck: weeksPer, fresh: true, calls: qualityCalls(3)},
		{what: "whole table", args: map[string]any{"table": "events", "no_incident": true}, floor: wholeFloor, perCheck: wholePer, calls: qualityCalls(3)},
	}
}

// qualityCalls is how many measured calls a row makes: def unless
// DW_BENCH_QUALITY_CALLS says otherwise.
func qualityCalls(def int) int {
	if n, err := strconv.Atoi(os.Getenv("DW_BENCH_QUALITY_CALLS")); err == nil && n >= 1 {
		return n
	}
	return def
}

// runFloor runs statements in this process and checks each answered its
// rows.
func runFloor(b *testing.B, wh warehouse.Warehouse, sts []floorStatement) time.Duration {
	b.Helper()
	t := time.Now()
	for _, st := range sts {
		res, err := wh.Query(context.Background(), warehouse.Query{SQL: st.sql})
		if err != nil {
			b.Fatalf("floor: %v\n%s", err, st.sql)
		}
		if len(res.Rows) != st.rows {
			b.Fatalf("floor: %d rows, want %d: %s", len(res.Rows), st.rows, st.sql)
		}
	}
	return time.Since(t)
}

// qualityAnswer is what the benchmark reads of run_quality_check's answer.
type qualityAnswer struct {
	Statements int               `json:"statements"`
	Window     *checks.Window    `json:"window"`
	Results    []json.RawMessage `json:"results"`
}

// BenchmarkE2EQualityCheck is issue 18's three quality-check rows on the
// 10M-row, 12-column table (28 days, shared with the backfill row): one
// day by hour, 21 days by hour and the whole table, run_quality_check with
// the table's inferred profile (24 checks) on a warm dw-quality over
// stdio. In the same run, alternating with each call: the floor, the same
// values by hand in this process in as few plain statements as give them
// (the hourly GROUP BY, plus for a bucketed window one statement for the
// window's distinct counts and quantiles), and the same statements split
// into a query per check. The goal is the first ratio (≤ 1.3×) and the
// product never slower than the query per check.
// DW_BENCH_QUALITY_ROWS (comma-separated row names, e.g. "whole table")
// runs only those rows, DW_BENCH_QUALITY_CALLS sets the calls per row.
func BenchmarkE2EQualityCheck(b *testing.B) {
	path := eventsTable(b)
	wh, err := duckdb.Open("bench", path, 30*time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	defer wh.Close()
	checkFloorMatches(b, wh)
	dir := b.TempDir()
	homes := 0
	// start runs a dw-quality on a store of its own, warmed: the store
	// open and the warehouse child up before a measured call. The
	// statement timeout is well past the 60 s default, so a slow check is
	// measured rather than cut off.
	start := func() *Agent {
		homes++
		home := filepath.Join(dir, fmt.Sprintf("home-%d", homes))
		if err := os.MkdirAll(home, 0o700); err != nil {
			b.Fatal(err)
		}
		conf := filepath.Join(home, "dw.yaml")
		yaml := fmt.Sprintf("home: %s\nwarehouses:\n  - name: bench\n    kind: duckdb\n    path: %s\n    timeout: 30m\n", home, path)
		if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
			b.Fatal(err)
		}
		a := Start(b, "dw-quality", "DW_CONFIG="+conf, "DW_HOME="+home)
		a.Call(b, "list_tables", map[string]any{}, nil)
		return a
	}
	shared := start()
	only := os.Getenv("DW_BENCH_QUALITY_ROWS") // e.g. "whole table": the rows to run while iterating
	for i := 0; i < b.N; i++ {
		for _, q := range qualityRows() {
			if only != "" && !slices.Contains(strings.Split(only, ","), q.what) {
				continue
			}
			row := Row{Key: "quality", What: fmt.Sprintf("quality check, %dM rows × %d columns, %s", backfillRows/1_000_000, len(eventsColumns), q.what)}
			var perCheck []time.Duration
			var ans qualityAnswer
			agent := shared
			if !q.fresh {
				// The first check of a window records its history; the
				// measured ones are the warm calls after it.
				agent.Call(b, "run_quality_check", q.args, nil)
			}
			for c := 0; c < q.calls; c++ {
				if q.fresh {
					agent = start()
				}
				ans = qualityAnswer{}
				peak := PeakRSS(b, agent.Pid())
				row.Product = append(row.Product, agent.Call(b, "run_quality_check", q.args, &ans))
				row.RSSMiB = max(row.RSSMiB, peak())
				if q.fresh {
					agent.session.Close()
				}
				if len(ans.Results) == 0 {
					b.Fatalf("%s: run_quality_check answered no results", q.what)
				}
				if got := windowBuckets(ans.Window); got != q.buckets {
					b.Fatalf("%s: the answer's window holds %d hourly buckets, want %d", q.what, got, q.buckets)
				}
				// Each starts on a DuckDB instance opened for it, as the
				// product's call did (its warehouse child closes an instance
				// a second after its last request, and the calls are further
				// apart): run straight after the floor, the query per check
				// would find the floor's instance warm, which the product
				// never does.
				wh.Close()
				row.Floor = append(row.Floor, runFloor(b, wh, q.floor))
				wh.Close()
				perCheck = append(perCheck, runFloor(b, wh, q.perCheck))
			}
			_, mid := row.Ratios()
			xPer := float64(med(row.Product)) / float64(med(perCheck))
			met := mid <= 1.3 && xPer <= 1
			row.Met = &met
			how := "warm agent, the window's history recorded by a first call"
			if q.fresh {
				how = "each call on a new store (a backfill; a second one of the same window resumes from the first), the agent started and warmed before it"
			}
			row.Note = fmt.Sprintf("%d calls, %s; %d metric results from %d statements; floor: %d hand-written statements; a query per check (%d statements): %.1f ms median, the product %.2f× it; memory: the agent and its warehouse child at their largest during the calls",
				q.calls, how, len(ans.Results), ans.Statements, len(q.floor), len(q.perCheck), float64(med(perCheck).Microseconds())/1000, xPer)
			b.ReportMetric(float64(med(perCheck).Microseconds())/1000, "per-check-ms")
			b.ReportMetric(xPer, "x-per-check")
			row.Report(b)
		}
	}
}

// windowBuckets is how many hourly buckets an answer's window holds.
func windowBuckets(w *checks.Window) int {
	if w == nil || w.Grain != checks.Hour {
		return 0
	}
	return int(w.End.Sub(w.Start) / time.Hour)
}
