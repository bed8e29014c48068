package checks

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// deadLetters is a fixture warehouse whose shop.dead_letters holds rows
// rows (a dead-letter table a pipeline writes to when a record fails).
func deadLetters(rows int) string {
	return `CREATE TABLE shop.dead_letters AS SELECT range AS id, TIMESTAMP '2025-03-11 02:00:00' + to_seconds(range) AS failed_at,
		'schema mismatch' AS reason FROM range(` + strconv.Itoa(rows) + `)`
}

// A dead-letter table that should stay empty: 28 days of checks saw 0
// rows, now it holds 18,940. The check fails and says so in numbers; once
// declared "no new rows", it passes while the table stops growing and fails
// when it grows again, so "stopped growing since the fix" can be checked.
func TestDeadLetterTableShouldStayEmpty(t *testing.T) {
	before := openFixture(t, deadLetters(18940))
	after := openFixture(t, deadLetters(19060))
	const asset = "duckdb://shop.dead_letters"
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		now := day.Add(15 * time.Hour)
		clk := clock.NewFake(now)
		env := Env{DB: db, Warehouse: before, Clock: clk, Agent: "dw-quality", Tool: "run_quality_check"}
		var samples []baseline.Sample
		for h := 28 * 24; h > 0; h-- {
			samples = append(samples, baseline.Sample{Series: baseline.Series{Asset: asset, Metric: MetricRowCount},
				Point: baseline.Point{At: now.Add(-time.Duration(h) * time.Hour), Value: 0}})
		}
		if err := baseline.Record(ctx, db, now, samples...); err != nil {
			t.Fatal(err)
		}

		for _, bad := range []Expectations{{StayEmpty: "sometimes"}, {StayEmpty: StayAlways, MinRows: f64(5)}} {
			_, err := SetExpectations(ctx, env, ExpectationsRequest{Table: "dead_letters", Expectations: bad})
			if err == nil || !strings.Contains(err.Error(), "stay_empty") {
				t.Errorf("expectations %+v: err %v, want a stay_empty error", bad, err)
			}
		}
		if e, _, err := LoadExpectations(ctx, db, "test", resolve(t, before, "dead_letters").Ref); err != nil || e != nil {
			t.Fatalf("refused expectations were stored: %+v %v", e, err)
		}

		if _, err := SetExpectations(ctx, env, ExpectationsRequest{Table: "dead_letters", Expectations: Expectations{StayEmpty: StayAlways}}); err != nil {
			t.Fatal(err)
		}
		rep, err := RunCheck(ctx, env, CheckRequest{Table: "dead_letters"})
		if err != nil {
			t.Fatal(err)
		}
		rc := resultFor(t, rep, "row_count", MetricRowCount)
		if rc.Status != Fail || rc.Observed == nil || *rc.Observed != 18940 || rep.Status != Fail {
			t.Fatalf("18,940 rows in a table that should stay empty: %s %v (%s)", rc.Status, rc.Observed, rc.Message)
		}
		if want := "0 rows in every check for 28 days (672 checks), 18,940 now; the table should stay empty"; rc.Message != want {
			t.Errorf("message %q, want %q", rc.Message, want)
		}

		// After the fix the rows stay, but none arrive.
		if _, err := SetExpectations(ctx, env, ExpectationsRequest{Table: "dead_letters", Expectations: Expectations{StayEmpty: StayNoNewRows}}); err != nil {
			t.Fatal(err)
		}
		clk.Set(now.Add(time.Hour))
		rep, err = RunCheck(ctx, env, CheckRequest{Table: "dead_letters"})
		if err != nil {
			t.Fatal(err)
		}
		if rc := resultFor(t, rep, "row_count", MetricRowCount); rc.Status != Pass || !strings.Contains(rc.Expectation, "no new rows") ||
			rc.Message != "18,940 rows; no new rows (the table should stop growing); not grown since the previous check (2025-03-11 15:00 UTC)" {
			t.Errorf("no growth since the previous check: %s %q (%s)", rc.Status, rc.Expectation, rc.Message)
		}
		// It grows again: 120 more rows.
		clk.Set(now.Add(2 * time.Hour))
		env.Warehouse = after
		rep, err = RunCheck(ctx, env, CheckRequest{Table: "dead_letters"})
		if err != nil {
			t.Fatal(err)
		}
		rc = resultFor(t, rep, "row_count", MetricRowCount)
		if rc.Status != Fail || !strings.HasPrefix(rc.Message, "19,060 rows, 120 more than at the previous check (2025-03-11 16:00 UTC)") {
			t.Errorf("growth after the fix: %s %s", rc.Status, rc.Message)
		}
	})
}
