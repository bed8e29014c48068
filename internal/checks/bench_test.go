package checks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

const benchRows = 10_000_000

var (
	benchOnce sync.Once
	benchDir  string
	benchPath string
	benchErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// benchTable creates, once per process, a DuckDB file with a 10-million
// row, 12-column table spread evenly over one day, with nulls in several
// columns, using DuckDB's own range() so no rows cross the Go boundary.
func benchTable(b *testing.B) (*duckdb.Warehouse, *warehouse.Table) {
	benchOnce.Do(func() {
		if benchDir, benchErr = os.MkdirTemp("", "dw-checks-bench-"); benchErr != nil {
			return
		}
		benchPath = filepath.Join(benchDir, "bench.duckdb")
		ctx := context.Background()
		db, err := duckdb.OpenWrite(ctx, benchPath, 5*time.Second)
		if err != nil {
			benchErr = err
			return
		}
		defer db.Close()
		// 8,640 microseconds apart: 10M rows fill exactly 24 hours.
		_, benchErr = db.ExecContext(ctx, `CREATE TABLE events AS SELECT
			i AS id,
			i % 50000 AS account_id,
			TIMESTAMP '2025-03-11 00:00:00' + to_microseconds(i * 8640) AS event_time,
			TIMESTAMP '2025-03-11 00:00:00' + to_microseconds(i * 8640 + (i % 300) * 1000000) AS loaded_at,
			CASE WHEN i % 100 = 0 THEN NULL ELSE (i % 1000) * 0.5 END::DOUBLE AS amount,
			CASE WHEN i % 7 = 0 THEN NULL ELSE ['ok', 'retry', 'fail'][i % 3 + 1] END AS status,
			CASE WHEN i % 3 = 0 THEN NULL ELSE i % 17 END AS quantity,
			CAST(i % 13 AS VARCHAR) AS region,
			i * 2 AS bytes,
			CASE WHEN i % 11 = 0 THEN NULL ELSE i % 5 END AS priority,
			i % 2 = 0 AS is_test,
			CASE WHEN i % 1000 = 0 THEN NULL ELSE 'sku-' || (i % 97) END AS sku
			FROM range(`+itoa(benchRows)+`) t(i)`)
		if benchErr == nil {
			_, benchErr = db.ExecContext(ctx, "CHECKPOINT")
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	wh, err := duckdb.Open("bench", benchPath, 10*time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	tab, err := warehouse.Resolve(context.Background(), wh, "events")
	if err != nil {
		b.Fatal(err)
	}
	return wh, tab
}

func itoa(n int) string {
	s, _ := numberLiteral(float64(n))
	return s
}

// floorSQL is the query an engineer would write by hand for the same
// results: every column's non-null count, newest event and rows per hour,
// and with a key its distinct ids per hour and (ROLLUP) for the whole day.
// Without a key the day's values are sums of the hours, so no ROLLUP.
func floorSQL(tab *warehouse.Table, withKey bool, values []Spec) string {
	var b strings.Builder
	b.WriteString(`SELECT date_trunc('hour', event_time) AS h, COUNT(*)`)
	for _, c := range tab.Columns {
		b.WriteString(`, COUNT("` + c.Name + `")`)
	}
	for _, v := range values {
		q := `"` + v.Column + `"`
		if c, _ := tab.Column(warehouse.DuckDB{}, v.Column); classify("duckdb", c.Type) == kindText {
			// A category column: distinct values and the top value's count.
			h := `histogram(` + q + `)` // one histogram gives the top value and its count
			b.WriteString(`, approx_count_distinct(` + q + `), map_keys(` + h + `)[list_position(map_values(` + h + `), list_max(map_values(` + h + `)))], list_max(map_values(` + h + `))`)
			continue
		}
		b.WriteString(`, COUNT(CASE WHEN ` + q + ` = 0 THEN 1 END), AVG(` + q + `), approx_quantile(` + q + `, 0.5), approx_quantile(` + q + `, 0.95)`)
	}
	if withKey {
		b.WriteString(`, COUNT(DISTINCT id)`)
	}
	b.WriteString(`, MAX(event_time) FROM events
		WHERE event_time >= TIMESTAMP '2025-03-11 00:00:00' AND event_time < TIMESTAMP '2025-03-12 00:00:00'`)
	if withKey || len(values) > 0 {
		b.WriteString(` GROUP BY ROLLUP (date_trunc('hour', event_time))`)
	} else {
		b.WriteString(` GROUP BY date_trunc('hour', event_time)`)
	}
	return b.String()
}

// BenchmarkHourlyProfile compares, in one run, three ways to get every
// column's null rate, one key's uniqueness, freshness and row count per
// hour over a day of 10 million rows: this package's single planned scan;
// the same checks as one query each; and one hand-written aggregate query
// computing the same values (the floor). ns/op is the planned scan; the
// ratios are reported as metrics. The without_key variant leaves out the
// exact distinct count, whose cost no plan can share, to show what
// merging the rest saves.
//
// The with_values variant adds the value profile of every numeric column
// but the key (mean, median, p95, zero share) and of every category text
// column (distinct count, top value and its count), as Profile plans it.
func BenchmarkHourlyProfile(b *testing.B) {
	for _, v := range []struct {
		name            string
		withKey, values bool
	}{{"with_key", true, false}, {"without_key", false, false}, {"with_key_and_values", true, true}} {
		b.Run(v.name, func(b *testing.B) { benchHourlyProfile(b, v.withKey, v.values) })
	}
}

func benchHourlyProfile(b *testing.B, withKey, withValues bool) {
	wh, tab := benchTable(b)
	d := wh.Dialect()
	specs := []Spec{{Kind: KindRowCount}, {Kind: KindFreshness, Column: "event_time"}}
	if withKey {
		specs = append(specs, Spec{Kind: KindUniqueness, Columns: []string{"id"}})
	}
	for _, c := range tab.Columns {
		specs = append(specs, Spec{Kind: KindNullRate, Column: c.Name})
	}
	var values []Spec
	if withValues {
		values = valueSpecs(tab, d, []string{"id"})
		specs = append(specs, values...)
	}
	w := Window{Column: "event_time", Start: day, End: day.Add(24 * time.Hour), Grain: Hour}
	ctx := context.Background()
	opts := RunOptions{Clock: fixedClock{day.Add(25 * time.Hour)}}
	floor := floorSQL(tab, withKey, values)

	planned := func() {
		plan, err := Plan(tab, d, specs, w)
		if err != nil {
			b.Fatal(err)
		}
		scan, err := Run(ctx, wh, plan, opts)
		if err != nil {
			b.Fatal(err)
		}
		if len(scan.Buckets) != 24 {
			b.Fatalf("%d buckets", len(scan.Buckets))
		}
	}
	perCheck := func() {
		for _, s := range specs {
			plan, err := Plan(tab, d, []Spec{s}, w)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Run(ctx, wh, plan, opts); err != nil {
				b.Fatal(err)
			}
		}
	}
	handWritten := func() {
		res, err := wh.Query(ctx, warehouse.Query{SQL: floor})
		if err != nil {
			b.Fatal(err)
		}
		if want := map[bool]int{true: 25, false: 24}[withKey || withValues]; len(res.Rows) != want {
			b.Fatalf("%d rows, want %d", len(res.Rows), want)
		}
	}

	var tPlanned, tPerCheck, tFloor time.Duration
	timeIt := func(f func()) time.Duration { start := time.Now(); f(); return time.Since(start) }
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Interleaved, so load on the machine falls on all three alike.
		tFloor += timeIt(handWritten)
		tPlanned += timeIt(planned)
		if !withValues {
			// One query per check is the point of the first two variants
			// only; with the value profile it would take minutes.
			tPerCheck += timeIt(perCheck)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(tPlanned.Nanoseconds())/n, "ns/op")
	b.ReportMetric(float64(tFloor.Nanoseconds())/n, "floor-ns/op")
	b.ReportMetric(float64(tPlanned)/float64(tFloor), "x-floor")
	if !withValues {
		b.ReportMetric(float64(tPerCheck.Nanoseconds())/n, "per-check-ns/op")
		b.ReportMetric(float64(tPerCheck)/float64(tPlanned), "speedup-vs-per-check")
	}
	b.ReportMetric(float64(len(specs)), "checks")
}
