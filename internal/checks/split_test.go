package checks

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/warehouse"
)

// checkStatements is how many statements an unbucketed DuckDB scan of a
// report's checks takes: one per check (scanGroups), the checks read from
// the report's results.
func checkStatements(rep *Report) int {
	seen := map[string]bool{}
	for _, r := range rep.Results {
		seen[r.Check] = true
	}
	return len(seen)
}

// An unbucketed plan on DuckDB is split a check at a time, each aggregate
// computed once, and reads exactly what the same aggregates in one
// statement read; on BigQuery and Snowflake, and bucketed on DuckDB, it
// stays one scan.
func TestWholeTablePlanSplitsPerCheckOnDuckDB(t *testing.T) {
	wh := openFixture(t)
	tab := resolve(t, wh, "events")
	plan, err := Plan(tab, wh.Dialect(), allSpecs(), Window{})
	if err != nil {
		t.Fatal(err)
	}
	owner := map[int]int{}
	for ci, pc := range plan.Checks {
		for _, a := range pc.inputs {
			if o, ok := owner[a]; !ok || ci < o {
				owner[a] = ci
			}
		}
	}
	computed := map[int]int{}
	var scans []Statement
	for _, st := range plan.Statements {
		if st.whole {
			continue // an anti-join
		}
		scans = append(scans, st)
		for _, a := range st.aggs {
			computed[a]++
			if owner[a] != owner[st.aggs[0]] {
				t.Errorf("statement %q mixes the aggregates of checks %d and %d", st.SQL, owner[st.aggs[0]], owner[a])
			}
		}
	}
	if len(scans) < 2 {
		t.Fatalf("%d scan statements for %d checks, want one per check", len(scans), len(plan.Checks))
	}
	for a := range plan.aggs {
		if plan.aggs[a].combine != combineJoin && computed[a] != 1 {
			t.Errorf("aggregate %s computed %d times, want once", plan.aggs[a].sql, computed[a])
		}
	}
	// The same aggregates in one statement read the same values.
	var sel []string
	var all []int
	for a, agg := range plan.aggs {
		if agg.combine != combineJoin {
			sel = append(sel, agg.sql+" AS m"+strconv.Itoa(a))
			all = append(all, a)
		}
	}
	one := *plan
	one.Statements = []Statement{{SQL: "SELECT " + strings.Join(sel, ", ") + " FROM " + wh.Dialect().Table(tab.Ref), aggs: all}}
	for _, st := range plan.Statements {
		if st.whole {
			one.Statements = append(one.Statements, st)
		}
	}
	now := fixedClock{day.Add(6 * time.Hour)}
	split, err := Run(context.Background(), wh, plan, RunOptions{Clock: now})
	if err != nil {
		t.Fatalf("%v\n%s", err, plan.SQL())
	}
	whole, err := Run(context.Background(), wh, &one, RunOptions{Clock: now})
	if err != nil {
		t.Fatalf("%v\n%s", err, one.SQL())
	}
	if len(split.Observations) == 0 || !reflect.DeepEqual(split.Observations, whole.Observations) {
		t.Fatalf("split and one-statement scans differ:\n%+v\n%+v", split.Observations, whole.Observations)
	}
	// One scan where scans cost, or where a split would group again.
	for _, d := range []warehouse.Dialect{warehouse.BigQuery{}, warehouse.Snowflake{}} {
		p, err := Plan(tab, d, allSpecs(), Window{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, st := range p.Statements {
			if !st.whole {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d scan statements, want one", d.Name(), n)
		}
	}
	hourly, err := Plan(tab, wh.Dialect(), allSpecs(), Window{Column: "event_time", Start: day, End: day.Add(24 * time.Hour), Grain: Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(hourly.Statements) != 1 {
		t.Errorf("bucketed on DuckDB: %d statements, want one", len(hourly.Statements))
	}
}
