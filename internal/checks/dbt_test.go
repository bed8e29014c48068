package checks

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// dbt's tests on the fixture's shop.events become its expectations: the
// key dbt declares unique is checked (and fails on the fixture's repeated
// event_id) without repeating it in set_quality_expectations.
func TestDBTTestsBecomeExpectations(t *testing.T) {
	const asset = "duckdb://shop.events"
	tests := []ingest.DBTTest{
		{Name: "unique", Asset: asset, Column: "event_id"},
		{Name: "unique", Asset: asset, Column: "account_id"},
		{Name: "not_null", Asset: asset, Column: "account_id"},
		{Name: "accepted_values", Asset: asset, Column: "status", Values: []string{"ok", "retry"}},
		{Name: "relationships", Asset: asset, Column: "account_id", To: "duckdb://db.shop.accounts", Field: "id"},
		{Name: "relationships", Asset: "duckdb://shop.other", Column: "x", To: asset, Field: "event_id"},
		{Name: "relationships", Asset: "duckdb://shop.other", Column: "y"}, // no referenced table
	}
	byAsset, recorded, notes := FromDBTTests(tests)
	e := byAsset[asset]
	if len(byAsset) != 2 || e == nil {
		t.Fatalf("expectations for %v, want %s and shop.other", keysOf(byAsset), asset)
	}
	if !slices.Equal(e.Key, []string{"event_id"}) || e.MaxNullRate["account_id"] != 0 || len(e.MaxNullRate) != 1 ||
		len(e.AcceptedValues) != 1 || !slices.Equal(e.AcceptedValues[0].Values, []string{"ok", "retry"}) ||
		!slices.Equal(e.Relationships, []Relationship{{Column: "account_id", To: "shop.accounts", Field: "id"}}) {
		t.Errorf("expectations %+v", e)
	}
	if want := map[string]int{"unique": 1, "not_null": 1, "accepted_values": 1, "relationships": 2}; !mapsEqual(recorded, want) {
		t.Errorf("recorded %v, want %v", recorded, want)
	}
	if len(notes) != 2 || !strings.Contains(strings.Join(notes, "\n"), "unique on account_id is not checked") {
		t.Errorf("notes %q: want the second unique and the relationships test without a table named", notes)
	}

	wh := openFixture(t)
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		env := Env{DB: db, Warehouse: wh, Clock: clock.NewFake(day.Add(6 * time.Hour)), Agent: "dw-quality", Tool: "set_quality_expectations"}
		e := *e
		e.Relationships = nil // shop.accounts is not in the fixture
		if _, err := SetExpectations(ctx, env, ExpectationsRequest{Table: "shop.events", Expectations: e}); err != nil {
			t.Fatal(err)
		}
		rep, err := RunCheck(ctx, env, CheckRequest{Table: "shop.events"})
		if err != nil {
			t.Fatal(err)
		}
		u := resultFor(t, rep, "uniqueness(event_id)", MetricDuplicateRate)
		if u.Status != Fail || u.Inferred || u.Expectation != "key must be unique" {
			t.Errorf("dbt's unique key: %s inferred=%v %q (%s)", u.Status, u.Inferred, u.Expectation, u.Message)
		}
		if n := resultFor(t, rep, "null_rate(account_id)", MetricNullRate); n.Status != Fail {
			t.Errorf("dbt's not_null on account_id (3 nulls in the fixture): %s (%s)", n.Status, n.Message)
		}
		if a := resultFor(t, rep, "accepted_values(status)", MetricRejectedRate); a.Status != Fail {
			t.Errorf("dbt's accepted_values (one 'bogus' status): %s (%s)", a.Status, a.Message)
		}
	})
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func keysOf(m map[string]*Expectations) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func readManifestTests(t *testing.T, name string) []ingest.DBTTest {
	t.Helper()
	f, err := os.Open("../lineage/ingest/testdata/dbt/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tests, _, err := ingest.ReadDBTTests(f)
	if err != nil {
		t.Fatal(err)
	}
	return tests
}

// jaffleShop is the tables the real dbt-bouncer manifest tests, as a
// warehouse built from it might hold them: 7 of 400 orders name a customer
// that does not exist (orphans), one order is 'cancelled' (not in dbt's
// accepted list), and gift_card_amount was renamed since the manifest.
func jaffleShop(orphans int) []string {
	return []string{
		`CREATE TABLE main.customers AS SELECT range AS customer_id, 'c' || range AS first_name, range % 3 = 0 AS is_recurring_customer FROM range(1, 101)`,
		`CREATE TABLE main.orders AS SELECT range AS order_id,
			CASE WHEN range < ` + strconv.Itoa(orphans) + ` THEN 9000 + range ELSE 1 + range % 100 END AS customer_id,
			DATE '2025-03-01' + CAST(range % 10 AS INTEGER) AS order_date,
			CASE WHEN range = 399 THEN 'cancelled' WHEN range % 2 = 0 THEN 'completed' ELSE 'shipped' END AS status,
			10.0 + range % 7 AS amount, 10.0 + range % 7 AS credit_card_amount, 0.0 AS coupon_amount, 0.0 AS bank_transfer_amount,
			0.0 AS gift_card_value
		FROM range(400)`,
	}
}

// The real manifest's tests are recorded as expectations (source dbt) and
// a relationships test catches orders whose customer does not exist; the
// team's own expectation for a column wins over dbt's, and an import never
// overwrites it.
func TestDBTManifestTestsCheckedOnTheWarehouse(t *testing.T) {
	tests := readManifestTests(t, "dbt-bouncer__dbt_16__manifest.json")
	broken := openFixture(t, jaffleShop(7)...)
	healthy := openFixture(t, jaffleShop(0)...)
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := clock.NewFake(day.Add(6 * time.Hour))
		rec, err := RecordDBTTests(ctx, db, "dbt_bouncer_test_project", map[string][]string{"duckdb": {"test"}}, tests, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		if rec.Recorded != 44 || rec.ByTest["relationships"] != 1 || rec.ByTest["unique"] != 6 || rec.ByTest["not_null"] != 34 ||
			rec.ByTest["accepted_values"] != 3 || !slices.Equal(rec.Warehouses, []string{"test"}) || rec.Tables < 10 {
			t.Fatalf("recorded %+v", rec)
		}
		env := Env{DB: db, Warehouse: broken, Clock: clk, Agent: "dw-quality", Tool: "run_quality_check"}
		rep, err := RunCheck(ctx, env, CheckRequest{Table: "main.orders"})
		if err != nil {
			t.Fatal(err)
		}
		rel := resultFor(t, rep, "relationships(customer_id -> main.customers.customer_id)", MetricOrphanRate)
		if rel.Status != Fail || rel.Source != SourceDBT || rel.Observed == nil || *rel.Observed != 7.0/400 {
			t.Fatalf("orphan orders: %s source %q observed %v (%s)", rel.Status, rel.Source, deref(rel.Observed), rel.Message)
		}
		if !strings.Contains(rel.Message, "7 of 400 values") || !strings.Contains(rel.Message, "e.g. '9000'") {
			t.Errorf("orphan message %q should give the count and an example", rel.Message)
		}
		// On DuckDB the table is read a check at a time (scanGroups); the
		// relationships check's counts are the null check's, so its one
		// statement is the anti-join.
		if want := checkStatements(rep); rep.Statements != want {
			t.Errorf("%d statements: want one per check, the relationships check's the anti-join (%d)", rep.Statements, want)
		}
		if u := resultFor(t, rep, "uniqueness(order_id)", MetricDuplicateRate); u.Status != Pass || u.Source != SourceDBT || u.Inferred {
			t.Errorf("dbt's unique order_id: %s source %q inferred %v", u.Status, u.Source, u.Inferred)
		}
		a := resultFor(t, rep, "accepted_values(status)", MetricRejectedRate)
		if a.Status != Fail || a.Source != SourceDBT {
			t.Errorf("dbt's accepted status list against 'cancelled': %s source %q (%s)", a.Status, a.Source, a.Message)
		}
		if n := resultFor(t, rep, "null_rate(customer_id)", MetricNullRate); n.Source != SourceDBT || n.Expectation == "" {
			t.Errorf("dbt's not_null on customer_id: source %q expectation %q", n.Source, n.Expectation)
		}
		// A test on a column the warehouse no longer has is named, not fatal.
		if notes := strings.Join(rep.Inferred, "\n"); !strings.Contains(notes, "gift_card_amount") {
			t.Errorf("notes %q should name the dbt test on the missing gift_card_amount", notes)
		}

		// The team allows 'cancelled': its list wins over dbt's, the rest
		// of dbt's expectations still hold.
		team := Expectations{AcceptedValues: []AcceptedValues{{Column: "status", Values: []string{"placed", "shipped", "completed", "return_pending", "returned", "cancelled"}}}}
		set, err := SetExpectations(ctx, env, ExpectationsRequest{Table: "main.orders", Expectations: team})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(set.FromDBT, "uniqueness(order_id)") || !slices.Contains(set.FromDBT, "relationships(customer_id -> main.customers.customer_id)") ||
			slices.Contains(set.FromDBT, "accepted_values(status)") || !slices.Contains(set.Checks, "accepted_values(status)") {
			t.Errorf("set_quality_expectations' answer: checks %v, from dbt %v", set.Checks, set.FromDBT)
		}
		// Importing the manifest again changes nothing the team set.
		if _, err := RecordDBTTests(ctx, db, "dbt_bouncer_test_project", map[string][]string{"duckdb": {"test"}}, tests, clk.Now()); err != nil {
			t.Fatal(err)
		}
		stored, _, err := loadTeam(ctx, db, "test", resolve(t, broken, "main.orders").Ref)
		if err != nil || stored == nil || len(stored.AcceptedValues) != 1 || len(stored.AcceptedValues[0].Values) != 6 || len(stored.Key) != 0 {
			t.Fatalf("team expectations after a re-import: %+v %v", stored, err)
		}
		rep, err = RunCheck(ctx, env, CheckRequest{Table: "main.orders"})
		if err != nil {
			t.Fatal(err)
		}
		if a := resultFor(t, rep, "accepted_values(status)", MetricRejectedRate); a.Status != Pass || a.Source != SourceTeam {
			t.Errorf("team's status list: %s source %q (%s)", a.Status, a.Source, a.Message)
		}
		if u := resultFor(t, rep, "uniqueness(order_id)", MetricDuplicateRate); u.Source != SourceDBT {
			t.Errorf("dbt's key after the team set values: source %q", u.Source)
		}
		if r := resultFor(t, rep, "relationships(customer_id -> main.customers.customer_id)", MetricOrphanRate); r.Status != Fail {
			t.Errorf("orphans after the team set values: %s", r.Status)
		}

		// The same tests on a warehouse without orphans pass.
		env.Warehouse = healthy
		rep, err = RunCheck(ctx, env, CheckRequest{Table: "main.orders"})
		if err != nil {
			t.Fatal(err)
		}
		if r := resultFor(t, rep, "relationships(customer_id -> main.customers.customer_id)", MetricOrphanRate); r.Status == Fail || *r.Observed != 0 {
			t.Errorf("no orphans: %s %v (%s)", r.Status, deref(r.Observed), r.Message)
		}
	})
}

// The BigQuery manifest's tests are recorded for a configured BigQuery
// warehouse only; without one, the answer says why none were.
func TestDBTTestsRecordedForWarehousesOfTheirPlatform(t *testing.T) {
	tests := readManifestTests(t, "whyline-denver__manifest.json")
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		rec, err := RecordDBTTests(ctx, db, "whyline_denver_dbt", map[string][]string{"duckdb": {"demo"}}, tests, day)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Recorded != 0 || rec.Tables != 0 || len(rec.Notes) != 1 || !strings.Contains(rec.Notes[0], "no configured warehouse is bigquery") {
			t.Fatalf("no bigquery warehouse: %+v", rec)
		}
		rec, err = RecordDBTTests(ctx, db, "whyline_denver_dbt", map[string][]string{"bigquery": {"bq"}}, tests, day)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Recorded != 54 || rec.ByTest["relationships"] != 9 || !slices.Equal(rec.Warehouses, []string{"bq"}) {
			t.Fatalf("bigquery warehouse: %+v", rec)
		}
	})
}

// A manifest is outside input: test columns and referenced tables that
// are no names in the warehouse (or try to be SQL) are left out with a
// note naming them, the table's other checks still run, and nothing is
// built from their text.
func TestHostileDBTTestsAreNotedNotRun(t *testing.T) {
	wh := openFixture(t, jaffleShop(3)...)
	const asset = "duckdb://dbt.main.orders"
	tests := []ingest.DBTTest{
		{Name: "unique", Asset: asset, Column: "order_id"},
		{Name: "not_null", Asset: asset, Column: `x"; DROP TABLE main.orders; --`},
		{Name: "accepted_values", Asset: asset, Column: "status' OR 1=1", Values: []string{"a"}},
		{Name: "relationships", Asset: asset, Column: "customer_id", To: "duckdb://dbt.main.customers; DROP TABLE main.orders", Field: "customer_id"},
		{Name: "relationships", Asset: asset, Column: "customer_id", To: "duckdb://dbt.main.customers", Field: `customer_id" OR 1=1 --`},
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := clock.NewFake(day)
		if _, err := RecordDBTTests(ctx, db, "p", map[string][]string{"duckdb": {"test"}}, tests, clk.Now()); err != nil {
			t.Fatal(err)
		}
		rep, err := RunCheck(ctx, Env{DB: db, Warehouse: wh, Clock: clk}, CheckRequest{Table: "main.orders"})
		if err != nil {
			t.Fatal(err)
		}
		if u := resultFor(t, rep, "uniqueness(order_id)", MetricDuplicateRate); u.Source != SourceDBT || u.Status != Pass {
			t.Errorf("the sound test still runs: %s %q", u.Status, u.Source)
		}
		notes := strings.Join(rep.Inferred, "\n")
		for _, want := range []string{"not_null on x\"; DROP", "accepted_values(status' OR 1=1)", "customers; DROP TABLE", `customer_id" OR 1=1`} {
			if !strings.Contains(notes, want) {
				t.Errorf("notes lack %q:\n%s", want, notes)
			}
		}
		for _, r := range rep.Results {
			if r.Metric == MetricOrphanRate {
				t.Errorf("a relationships check ran from a hostile test: %+v", r)
			}
		}
		rows := resultFor(t, rep, "row_count", MetricRowCount)
		if rows.Observed == nil || *rows.Observed != 400 {
			t.Errorf("orders after the check: %v rows", deref(rows.Observed))
		}
	})
}
