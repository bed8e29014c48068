package checks

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/warehouse"
)

// ImportDBT puts the project in the graph and its tests in the
// expectations in one call; the same manifest again changes nothing, and
// a manifest that cannot be read writes neither.
func TestImportDBTImportsGraphAndTests(t *testing.T) {
	data, err := os.ReadFile("../lineage/ingest/testdata/dbt/dbt-bouncer__dbt_16__manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := clock.NewFake(day)
		g := lineage.New(db, clk)
		whs := map[string][]string{"duckdb": {"demo"}}
		orders := warehouse.TableRef{Schema: "main", Name: "orders"}

		// Refused whole: nothing in the graph, nothing expected.
		if _, err := ImportDBT(ctx, g, []byte(`{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json"},"nodes":[`), ingest.DBTOptions{}, whs, clk); err == nil {
			t.Fatal("a truncated manifest was accepted")
		}
		if got, _, err := LoadExpectations(ctx, db, "demo", orders); err != nil || got != nil {
			t.Fatalf("a refused import recorded expectations: %+v %v", got, err)
		}
		if _, err := g.Resolve(ctx, "dbt://model.dbt_bouncer_test_project.orders"); err == nil {
			t.Fatal("a refused import wrote the graph")
		}

		imp, err := ImportDBT(ctx, g, data, ingest.DBTOptions{Owner: "analytics"}, whs, clk)
		if err != nil {
			t.Fatal(err)
		}
		if imp.Project != "dbt_bouncer_test_project" || imp.AssetsCreated == 0 || imp.Counts["model"] == 0 {
			t.Errorf("graph import: %+v", imp.DBTImportResult)
		}
		e := imp.Expectations
		if e.Recorded != 44 || e.ByTest["relationships"] != 1 || !slices.Equal(e.Warehouses, []string{"demo"}) {
			t.Errorf("expectations: %+v", e)
		}
		if _, err := g.Resolve(ctx, "dbt://model.dbt_bouncer_test_project.orders"); err != nil {
			t.Errorf("the imported model is not in the graph: %v", err)
		}
		got, _, err := LoadExpectations(ctx, db, "demo", orders)
		if err != nil || got == nil || !slices.Equal(got.Key, []string{"order_id"}) {
			t.Fatalf("orders' expectations: %+v %v", got, err)
		}

		again, err := ImportDBT(ctx, g, data, ingest.DBTOptions{Owner: "analytics"}, whs, clk)
		if err != nil {
			t.Fatal(err)
		}
		if !again.Unchanged || again.GraphVersion != imp.GraphVersion || again.Expectations.Recorded != 44 {
			t.Errorf("re-import: unchanged=%v version %d->%d recorded %d", again.Unchanged, imp.GraphVersion, again.GraphVersion, again.Expectations.Recorded)
		}

		// No warehouse of the adapter's platform: the graph is imported
		// and the answer says why no expectation was.
		none, err := ImportDBT(ctx, g, data, ingest.DBTOptions{}, map[string][]string{"bigquery": {"bq"}}, clk)
		if err != nil || none.Expectations.Recorded != 0 || len(none.Expectations.Notes) == 0 || none.Counts == nil {
			t.Errorf("no duckdb warehouse: %+v %v", none, err)
		}
	})
}
