package checks

import (
	"context"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
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
		{Name: "relationships", Asset: asset, Column: "account_id", To: "duckdb://shop.accounts", Field: "id"},
		{Name: "relationships", Asset: "duckdb://shop.other", Column: "x", To: asset, Field: "event_id"},
	}
	byAsset, notes := FromDBTTests(tests)
	e := byAsset[asset]
	if len(byAsset) != 1 || e == nil {
		t.Fatalf("expectations for %v, want only %s (a table with only a relationships test has none)", keysOf(byAsset), asset)
	}
	if !slices.Equal(e.Key, []string{"event_id"}) || e.MaxNullRate["account_id"] != 0 || len(e.MaxNullRate) != 1 ||
		len(e.AcceptedValues) != 1 || !slices.Equal(e.AcceptedValues[0].Values, []string{"ok", "retry"}) {
		t.Errorf("expectations %+v", e)
	}
	if len(notes) != 3 || !strings.Contains(strings.Join(notes, "\n"), "unique on account_id is not checked") {
		t.Errorf("notes %q: want the second unique and both relationships tests named", notes)
	}

	wh := openFixture(t)
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		env := Env{DB: db, Warehouse: wh, Clock: clock.NewFake(day.Add(6 * time.Hour)), Agent: "dw-quality", Tool: "set_quality_expectations"}
		if _, err := SetExpectations(ctx, env, ExpectationsRequest{Table: "shop.events", Expectations: *e}); err != nil {
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

	// The real manifest's tests map without error, one expectation set
	// per tested table.
	f, err := os.Open("../lineage/ingest/testdata/dbt/dbt-bouncer__dbt_16__manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	real, _, err := ingest.ReadDBTTests(f)
	if err != nil {
		t.Fatal(err)
	}
	byAsset, _ = FromDBTTests(real)
	if o := byAsset["duckdb://dbt.main.orders"]; o == nil || !slices.Equal(o.Key, []string{"order_id"}) || len(o.AcceptedValues) != 1 {
		t.Errorf("orders from the real manifest: %+v", o)
	}
}

func keysOf(m map[string]*Expectations) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
