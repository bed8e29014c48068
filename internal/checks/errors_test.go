package checks

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/warehouse"
)

// countingWarehouse counts statements, to prove bad input runs nothing.
type countingWarehouse struct {
	warehouse.Warehouse
	queries atomic.Int64
}

func (c *countingWarehouse) Query(ctx context.Context, q warehouse.Query) (*warehouse.Result, error) {
	c.queries.Add(1)
	return c.Warehouse.Query(ctx, q)
}

func TestPredicateValidation(t *testing.T) {
	wh := openFixture(t)
	tab := resolve(t, wh, "events")
	d := wh.Dialect()
	bad := []struct{ sql, want string }{
		{"amount >= 0; DROP TABLE shop.events", "semicolon"},
		{"amount >= 0 -- sneaky", "comment"},
		{"amount >= 0 /* x */", "comment"},
		{"amount IN (SELECT 1)", "literals only"},
		{"(SELECT COUNT(*) FROM shop.events) > 0", "subquer"},
		{"EXISTS (SELECT 1)", "subqueries are not allowed"},
		{"read_csv('x') IS NULL", "only these functions are allowed"},
		{"amout >= 0", `no column "amout"; closest: amount`},
		{`"amount" >= 0`, "quotes an identifier"},
		{"amount + 1", "not a boolean expression"},
		{"amount", "not a boolean expression"},
		{"amount >= 0 status = 'ok'", "unexpected"},
		{"status = 'ok", "not closed"},
		{"status = 'a\\b'", "backslash"},
		{"", "empty"},
		{"CASE WHEN amount > 0 THEN TRUE END", "CASE is not supported"},
		{"amount >= ", "ends early"},
		{strings.Repeat("(", 70) + "amount > 0" + strings.Repeat(")", 70), "nests deeper"},
	}
	for _, c := range bad {
		_, _, err := parsePredicate(c.sql, tab, d)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("predicate %q: error %v, want one mentioning %q", c.sql, err, c.want)
		}
	}
	good := map[string]string{
		"amount >= 0": `("amount" >= 0)`,
		"NOT is_test AND status IN ('ok', 'retry')":  `((NOT "is_test") AND ("status" IN ('ok', 'retry')))`,
		"coalesce(amount, 0) BETWEEN -1 AND 1e3":     `(COALESCE("amount", 0) BETWEEN (-1) AND 1e3)`,
		"status NOT LIKE 'x%' OR account_id IS NULL": `(("status" NOT LIKE 'x%') OR ("account_id" IS NULL))`,
		"EVENT_TIME <= loaded_at":                    `("event_time" <= "loaded_at")`,
		"is_test":                                    `"is_test"`,
		"status != 'it''s'":                          `("status" <> 'it''s')`,
	}
	for src, want := range good {
		e, _, err := parsePredicate(src, tab, d)
		if err != nil {
			t.Errorf("predicate %q: %v", src, err)
			continue
		}
		sp, _ := spellingFor(d)
		got, err := e.render(sp)
		if err != nil || got != want {
			t.Errorf("predicate %q rendered %q (%v), want %q", src, got, err, want)
		}
	}
}

func TestBadInputIsRefusedBeforeAnyQuery(t *testing.T) {
	wh := &countingWarehouse{Warehouse: openFixture(t)}
	db := storetest.SQLite(t)
	env := Env{DB: db, Warehouse: wh, Clock: clock.NewFake(day.Add(5 * time.Hour))}
	ctx := context.Background()
	cases := []struct {
		name string
		req  CheckRequest
		want string
	}{
		{"unknown table", CheckRequest{Table: "shop.evnts"}, `no table "shop.evnts" in warehouse test; closest: shop.events`},
		{"invalid table name", CheckRequest{Table: "events; DROP TABLE x"}, "not a valid identifier"},
		{"unknown column", CheckRequest{Table: "events", Checks: []Spec{{Kind: KindNullRate, Column: "acount_id"}}}, `no column "acount_id"; closest: account_id`},
		{"invalid column", CheckRequest{Table: "events", Checks: []Spec{{Kind: KindNullRate, Column: `amount" OR 1=1 --`}}}, "not a valid identifier"},
		{"window backwards", CheckRequest{Table: "events", Since: "2025-03-11T10:00:00Z", Until: "2025-03-11T09:00:00Z"}, "ends (2025-03-11T09:00:00Z) before it starts (2025-03-11T10:00:00Z)"},
		{"bucket on a non-time column", CheckRequest{Table: "events", Period: "today", Bucket: "hour", TimeColumn: "amount"}, "cannot bucket or window on amount: it is DOUBLE"},
		{"unknown bucket", CheckRequest{Table: "events", Bucket: "minute"}, `unknown bucket "minute"`},
		{"unknown period", CheckRequest{Table: "events", Period: "forever"}, `unknown period "forever"`},
		{"period and since", CheckRequest{Table: "events", Period: "today", Since: "2025-03-10"}, "not both"},
		{"bad since", CheckRequest{Table: "events", Since: "yesterday-ish"}, "is not a time"},
		{"unknown kind", CheckRequest{Table: "events", Checks: []Spec{{Kind: "vibes"}}}, `unknown check kind "vibes"`},
		{"freshness on text", CheckRequest{Table: "events", Checks: []Spec{{Kind: KindFreshness, Column: "status"}}}, "freshness needs a date or timestamp column"},
		{"rate above one", CheckRequest{Table: "events", Checks: []Spec{{Kind: KindNullRate, Column: "amount", MaxRate: f64(5)}}}, "not a rate"},
		{"text value for a number", CheckRequest{Table: "events", Checks: []Spec{{Kind: KindAcceptedValues, Column: "amount", Values: []string{"lots"}}}}, "not a number"},
		{"control character", CheckRequest{Table: "events", Checks: []Spec{{Kind: KindAcceptedValues, Column: "status", Values: []string{"a\x00b"}}}}, "control character"},
		{"range without bounds", CheckRequest{Table: "events", Checks: []Spec{{Kind: KindRange, Column: "amount"}}}, "give min, max or both"},
		{"range upside down", CheckRequest{Table: "events", Checks: []Spec{{Kind: KindRange, Column: "amount", Min: f64(5), Max: f64(1)}}}, "min 5 is above max 1"},
		{"bad max_age", CheckRequest{Table: "events", Checks: []Spec{{Kind: KindFreshness, Column: "event_time", MaxAge: "soon"}}}, "not a positive duration"},
		{"bad predicate", CheckRequest{Table: "events", Checks: []Spec{{Kind: KindPredicate, Name: "p", SQL: "amount > 0; SELECT 1"}}}, "semicolon"},
		{"hours on a date", CheckRequest{Table: "events", Checks: []Spec{{Kind: KindRowCount}}, Bucket: "hour", TimeColumn: "amount"}, "cannot bucket"},
	}
	for _, c := range cases {
		_, err := RunCheck(ctx, env, c.req)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	if n := wh.queries.Load(); n != 0 {
		t.Errorf("%d statements ran for bad input; none should", n)
	}
	// And nothing was stored.
	var points int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM metric_points").Scan(&points); err != nil || points != 0 {
		t.Errorf("%d metric points stored for bad input (%v)", points, err)
	}
}

func TestBucketOnADateColumnNeedsDays(t *testing.T) {
	wh := openFixture(t, `CREATE TABLE shop.daily (d DATE, n BIGINT)`)
	tab := resolve(t, wh, "daily")
	_, err := Plan(tab, wh.Dialect(), []Spec{{Kind: KindRowCount}}, Window{Column: "d", Start: day, End: day.AddDate(0, 0, 1), Grain: Hour})
	if err == nil || !strings.Contains(err.Error(), "bucket it by day") {
		t.Errorf("hour buckets on a DATE: %v", err)
	}
	_, err = Plan(tab, wh.Dialect(), []Spec{{Kind: KindRowCount}}, Window{Column: "d", Start: day.AddDate(-1, 0, 0), End: day, Grain: Day})
	if err != nil {
		t.Errorf("day buckets on a DATE: %v", err)
	}
	_, err = Plan(tab, wh.Dialect(), []Spec{{Kind: KindRowCount}}, Window{Column: "d", Start: day.AddDate(-1, 0, 0), End: day, Grain: Hour})
	if err == nil {
		t.Errorf("a year of hours on a DATE column should be refused")
	}
}

func TestExpectationsAreValidatedBeforeStoring(t *testing.T) {
	wh := openFixture(t)
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		env := Env{DB: db, Warehouse: wh, Clock: clock.NewFake(day)}
		bad := []struct {
			e    Expectations
			want string
		}{
			{Expectations{Key: []string{"evnt_id"}}, `no column "evnt_id"; closest: event_id`},
			{Expectations{MaxNullRate: map[string]float64{"amount": 2}}, "not a rate"},
			{Expectations{EventTime: "status"}, "freshness needs a date or timestamp column"},
			{Expectations{Predicates: []PredicateRule{{Name: "p", SQL: "amount > 0 --"}}}, "comment"},
			{Expectations{Predicates: []PredicateRule{{Name: "p", SQL: "amount > 0"}, {Name: "p", SQL: "amount < 9"}}}, "two predicates"},
			{Expectations{MaxStaleness: "2 hours", EventTime: "event_time"}, "not a positive duration"},
			{Expectations{MaxLoadLag: "5m", EventTime: "event_time"}, "needs both"},
			{Expectations{Ranges: []ValueRange{{Column: "status", Min: f64(1)}}}, "range applies to numeric columns"},
		}
		for _, c := range bad {
			_, err := SetExpectations(ctx, env, ExpectationsRequest{Table: "events", Expectations: c.e})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%+v: error %v, want %q", c.e, err, c.want)
			}
		}
		got, _, err := LoadExpectations(ctx, db, "test", warehouse.TableRef{Schema: "shop", Name: "events"})
		if err != nil || got != nil {
			t.Errorf("invalid expectations were stored: %+v %v", got, err)
		}
	})
}
