package checks

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// day is the fixture's day: a Tuesday.
var day = time.Date(2025, 3, 11, 0, 0, 0, 0, time.UTC)

type fixtureRow struct {
	id      int64
	account *string
	amount  *float64
	status  string
	event   time.Time
	loaded  time.Time
}

// fixtureRows builds the events table: hours 00, 01, 02, 04 with ten rows
// and 05 with five; hour 03 has none. Known defects: three null accounts
// in hour 01, one null amount in hour 02, two late rows (one hour of lag)
// in hour 02, two repeated ids in hour 04 and one id in hour 05 repeating
// one from hour 00, two negative amounts in hour 04, one unaccepted status
// in hour 05.
func fixtureRows() []fixtureRow {
	var rows []fixtureRow
	for _, h := range []int{0, 1, 2, 4, 5} {
		n := 10
		if h == 5 {
			n = 5
		}
		for i := 0; i < n; i++ {
			event := day.Add(time.Duration(h)*time.Hour + time.Duration(i)*5*time.Minute)
			r := fixtureRow{id: int64(h*100 + i), event: event, loaded: event.Add(time.Minute), status: "ok"}
			acct := fmt.Sprintf("acct-%d", i%3)
			if !(h == 1 && i < 3) {
				r.account = &acct
			}
			amount := float64(i) * 1.5
			if h == 4 && i >= 8 {
				amount = -1
			}
			if !(h == 2 && i == 0) {
				r.amount = &amount
			}
			if i%2 == 1 {
				r.status = "retry"
			}
			if h == 5 && i == 4 {
				r.status = "bogus"
			}
			if h == 2 && (i == 1 || i == 2) {
				r.loaded = event.Add(time.Hour)
			}
			if h == 4 && i >= 8 {
				r.id = 400
			}
			if h == 5 && i == 3 {
				r.id = 0
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// openFixture writes the fixture to a fresh DuckDB file and returns the
// read-only warehouse over it.
func openFixture(t testing.TB, extraSQL ...string) *duckdb.Warehouse {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fixture.duckdb")
	db, err := duckdb.OpenWrite(ctx, path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{
		`CREATE SCHEMA shop`,
		`CREATE TABLE shop.events (event_id BIGINT, account_id VARCHAR, amount DOUBLE, status VARCHAR,
			event_time TIMESTAMP, loaded_at TIMESTAMP, is_test BOOLEAN)`,
	}
	for _, s := range append(stmts, extraSQL...) {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	for _, r := range fixtureRows() {
		if _, err := db.ExecContext(ctx, `INSERT INTO shop.events VALUES (?, ?, ?, ?, ?, ?, false)`,
			r.id, r.account, r.amount, r.status, r.event, r.loaded); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wh, err := duckdb.Open("test", path, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

func resolve(t testing.TB, wh warehouse.Warehouse, name string) *warehouse.Table {
	t.Helper()
	tab, err := warehouse.Resolve(context.Background(), wh, name)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func f64(v float64) *float64 { return &v }

// allSpecs asks for every kind of check on the fixture.
func allSpecs() []Spec {
	return []Spec{
		{Kind: KindRowCount},
		{Kind: KindNullRate, Column: "account_id"},
		{Kind: KindNullRate, Column: "AMOUNT"}, // catalog spelling is resolved
		{Kind: KindUniqueness, Columns: []string{"event_id"}},
		{Kind: KindFreshness, Column: "event_time"},
		{Kind: KindLoadLag, EventTime: "event_time", IngestTime: "loaded_at"},
		{Kind: KindAcceptedValues, Column: "status", Values: []string{"ok", "retry"}},
		{Kind: KindRange, Column: "amount", Min: f64(0)},
		{Kind: KindPredicate, Name: "non_negative", SQL: "amount >= 0"},
	}
}

type obsKey struct {
	metric, dim string
	hour        int // -1 for the total
}

func index(scan *Scan) map[obsKey]Observation {
	out := map[obsKey]Observation{}
	for _, o := range scan.Observations {
		h := -1
		if !o.Total {
			h = int(o.Bucket.Sub(day) / time.Hour)
		}
		out[obsKey{o.Metric, o.Dimension, h}] = o
	}
	return out
}

func TestScanSemanticsOnDuckDB(t *testing.T) {
	wh := openFixture(t)
	tab := resolve(t, wh, "events")
	now := day.Add(5*time.Hour + 30*time.Minute)
	plan, err := Plan(tab, wh.Dialect(), allSpecs(), Window{Column: "event_time", Start: day, End: day.Add(24 * time.Hour), Grain: Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Statements) != 1 {
		t.Fatalf("%d statements, want one scan", len(plan.Statements))
	}
	scan, err := Run(context.Background(), wh, plan, RunOptions{Clock: fixedClock{now}})
	if err != nil {
		t.Fatalf("%v\n%s", err, plan.SQL())
	}
	if len(scan.Buckets) != 6 {
		t.Fatalf("buckets %v, want the six hours 00..05 including the empty 03", scan.Buckets)
	}
	got := index(scan)
	want := []struct {
		key       obsKey
		value     float64
		count, of int64
	}{
		{obsKey{MetricRowCount, "", 0}, 10, 10, 10},
		{obsKey{MetricRowCount, "", 3}, 0, 0, 0}, // the gap is a bucket of zero rows
		{obsKey{MetricRowCount, "", 5}, 5, 5, 5},
		{obsKey{MetricRowCount, "", -1}, 45, 45, 45},
		{obsKey{MetricNullRate, "account_id", 1}, 0.3, 3, 10},
		{obsKey{MetricNullRate, "account_id", 0}, 0, 0, 10},
		{obsKey{MetricNullRate, "account_id", -1}, 3.0 / 45, 3, 45},
		{obsKey{MetricNullRate, "amount", 2}, 0.1, 1, 10},
		{obsKey{MetricDuplicateRate, "event_id", 4}, 0.2, 2, 10},
		{obsKey{MetricDuplicateRate, "event_id", 5}, 0, 0, 5}, // its repeat is of hour 00
		{obsKey{MetricDuplicateRate, "event_id", -1}, 3.0 / 45, 3, 45},
		{obsKey{MetricStaleness, "event_time", -1}, 600, 0, 45}, // newest 05:20, now 05:30
		{obsKey{MetricLagAvg, "loaded_at-event_time", 2}, 768, 0, 10},
		{obsKey{MetricLagP95, "loaded_at-event_time", 2}, 3600, 0, 10},
		{obsKey{MetricLagAvg, "loaded_at-event_time", -1}, (43*60.0 + 2*3600) / 45, 0, 45},
		{obsKey{MetricLagP95, "loaded_at-event_time", -1}, 60, 0, 45},
		{obsKey{MetricRejectedRate, "status", 5}, 0.2, 1, 5},
		{obsKey{MetricRejectedRate, "status", -1}, 1.0 / 45, 1, 45},
		{obsKey{MetricOutOfRange, "amount", 4}, 0.2, 2, 10},
		{obsKey{MetricOutOfRange, "amount", -1}, 2.0 / 44, 2, 44},
		{obsKey{MetricFailingRows, "non_negative", -1}, 3, 3, 45}, // two negatives and one null
		{obsKey{MetricFailingRows, "non_negative", 2}, 1, 1, 10},
	}
	for _, w := range want {
		o, ok := got[w.key]
		if !ok {
			t.Errorf("no observation %+v", w.key)
			continue
		}
		if math.Abs(o.Value-w.value) > 1e-9 || o.Count != w.count || o.Of != w.of {
			t.Errorf("%+v = %v (%d of %d), want %v (%d of %d)", w.key, o.Value, o.Count, o.Of, w.value, w.count, w.of)
		}
	}
	if _, ok := got[obsKey{MetricNullRate, "account_id", 3}]; ok {
		t.Errorf("a null rate was reported for the empty hour 03")
	}
	if _, ok := got[obsKey{MetricStaleness, "event_time", 2}]; ok {
		t.Errorf("freshness was reported per bucket")
	}
	if o := got[obsKey{MetricStaleness, "event_time", -1}]; !o.Newest.Equal(day.Add(5*time.Hour + 20*time.Minute)) {
		t.Errorf("newest event %v, want 05:20", o.Newest)
	}

	// The same plan without buckets agrees with the window totals.
	whole, err := Plan(tab, wh.Dialect(), allSpecs(), Window{})
	if err != nil {
		t.Fatal(err)
	}
	wscan, err := Run(context.Background(), wh, whole, RunOptions{Clock: fixedClock{now}})
	if err != nil {
		t.Fatal(err)
	}
	for k, o := range index(wscan) {
		if b, ok := got[k]; !ok || math.Abs(b.Value-o.Value) > 1e-9 {
			t.Errorf("whole-table %+v = %v, bucketed total %v", k, o.Value, b.Value)
		}
	}
}

// Checks that share an expression share its column: COUNT(*) once for
// every check, COUNT(amount) once for the null rate and the range.
func TestPlanDedupesAggregates(t *testing.T) {
	wh := openFixture(t)
	tab := resolve(t, wh, "shop.events")
	plan, err := Plan(tab, wh.Dialect(), []Spec{
		{Kind: KindRowCount},
		{Kind: KindNullRate, Column: "amount"},
		{Kind: KindNullRate, Column: "amount"},
		{Kind: KindRange, Column: "amount", Max: f64(100)},
		{Kind: KindUniqueness, Column: "amount"},
	}, Window{})
	if err != nil {
		t.Fatal(err)
	}
	// COUNT(*), COUNT("amount"), the range's CASE, COUNT(DISTINCT "amount").
	if plan.Aggregates() != 4 {
		t.Errorf("%d aggregates, want 4:\n%s", plan.Aggregates(), plan.SQL())
	}
	if len(plan.Checks) != 4 {
		t.Errorf("%d checks, want 4 (the repeated null rate once)", len(plan.Checks))
	}
	if n := strings.Count(plan.SQL(), `COUNT("amount")`); n != 1 {
		t.Errorf("COUNT(\"amount\") appears %d times", n)
	}
}

// smallDialect is DuckDB with a tiny statement limit, to force a split.
type smallDialect struct{ warehouse.DuckDB }

func (smallDialect) MaxStatementBytes() int { return 420 }

func TestPlanSplitsOnlyAtTheStatementLimit(t *testing.T) {
	wh := openFixture(t)
	tab := resolve(t, wh, "events")
	w := Window{Column: "event_time", Start: day, End: day.Add(24 * time.Hour), Grain: Hour}
	split, err := Plan(tab, smallDialect{}, allSpecs(), w)
	if err != nil {
		t.Fatal(err)
	}
	if len(split.Statements) < 3 {
		t.Fatalf("%d statements under a 420-byte limit, want several", len(split.Statements))
	}
	for _, st := range split.Statements {
		if len(st.SQL) > 420 {
			t.Errorf("statement of %d bytes over the limit:\n%s", len(st.SQL), st.SQL)
		}
	}
	one, err := Plan(tab, wh.Dialect(), allSpecs(), w)
	if err != nil {
		t.Fatal(err)
	}
	now := day.Add(5*time.Hour + 30*time.Minute)
	a, err := Run(context.Background(), wh, split, RunOptions{Clock: fixedClock{now}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(context.Background(), wh, one, RunOptions{Clock: fixedClock{now}})
	if err != nil {
		t.Fatal(err)
	}
	ia, ib := index(a), index(b)
	if len(ia) != len(ib) {
		t.Fatalf("split plan gave %d observations, single %d", len(ia), len(ib))
	}
	for k, o := range ib {
		if math.Abs(ia[k].Value-o.Value) > 1e-9 {
			t.Errorf("%+v: split %v, single %v", k, ia[k].Value, o.Value)
		}
	}
	if _, err := Plan(tab, tinyDialect{}, allSpecs(), w); err == nil || !strings.Contains(err.Error(), "statement limit") {
		t.Errorf("an aggregate larger than the limit: %v", err)
	}
}

type tinyDialect struct{ warehouse.DuckDB }

func (tinyDialect) MaxStatementBytes() int { return 100 }

func TestCompositeKeyUniqueness(t *testing.T) {
	wh := openFixture(t)
	tab := resolve(t, wh, "events")
	plan, err := Plan(tab, wh.Dialect(), []Spec{{Kind: KindUniqueness, Columns: []string{"account_id", "status"}}}, Window{})
	if err != nil {
		t.Fatal(err)
	}
	scan, err := Run(context.Background(), wh, plan, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Count it independently: rows with both values, minus distinct pairs.
	rows, seen := 0, map[string]bool{}
	for _, r := range fixtureRows() {
		if r.account == nil {
			continue
		}
		rows++
		seen[*r.account+"|"+r.status] = true
	}
	o := index(scan)[obsKey{MetricDuplicateRate, "account_id,status", -1}]
	if o.Of != int64(rows) || o.Count != int64(rows-len(seen)) {
		t.Errorf("composite key: %d repeats of %d rows, want %d of %d", o.Count, o.Of, rows-len(seen), rows)
	}
}

// Without distinct counts or percentiles there is no ROLLUP: the window's
// values are combined from the buckets, and must equal a scan of the
// window as a whole.
func TestWindowTotalsCombineFromBuckets(t *testing.T) {
	wh := openFixture(t)
	tab := resolve(t, wh, "events")
	specs := []Spec{
		{Kind: KindRowCount},
		{Kind: KindNullRate, Column: "account_id"},
		{Kind: KindNullRate, Column: "amount"},
		{Kind: KindFreshness, Column: "event_time"},
		{Kind: KindAcceptedValues, Column: "status", Values: []string{"ok", "retry"}},
		{Kind: KindRange, Column: "amount", Min: f64(0)},
		{Kind: KindPredicate, Name: "non_negative", SQL: "amount >= 0"},
	}
	now := day.Add(5*time.Hour + 30*time.Minute)
	bucketed, err := Plan(tab, wh.Dialect(), specs, Window{Column: "event_time", Start: day, End: day.Add(24 * time.Hour), Grain: Hour})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(bucketed.SQL(), "ROLLUP") {
		t.Errorf("no aggregate needs ROLLUP here:\n%s", bucketed.SQL())
	}
	whole, err := Plan(tab, wh.Dialect(), specs, Window{Column: "event_time", Start: day, End: day.Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := Run(context.Background(), wh, bucketed, RunOptions{Clock: fixedClock{now}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(context.Background(), wh, whole, RunOptions{Clock: fixedClock{now}})
	if err != nil {
		t.Fatal(err)
	}
	ia, ib := index(a), index(b)
	if len(ib) != 7 {
		t.Fatalf("%d whole-window observations, want 7", len(ib))
	}
	for k, o := range ib {
		c, ok := ia[k]
		if !ok || math.Abs(c.Value-o.Value) > 1e-9 || c.Count != o.Count || c.Of != o.Of || !c.Newest.Equal(o.Newest) {
			t.Errorf("%+v: combined %+v, whole %+v", k, c, o)
		}
	}
}
