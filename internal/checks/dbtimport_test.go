package checks

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
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

// testManifest is a dbt project of n models in a chain (each reads up to
// three earlier ones) with a not_null test on the id of its first three
// models, and with unique too when unique is set.
func testManifest(n int, unique bool) []byte {
	var b strings.Builder
	b.WriteString(`{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json", "adapter_type": "duckdb", "project_name": "p"}, "sources": {}, "nodes": {`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		var dep []string
		for _, d := range []int{1, 7, 31} {
			if i-d >= 0 {
				dep = append(dep, fmt.Sprintf(`"model.p.m%d"`, i-d))
			}
		}
		fmt.Fprintf(&b, `"model.p.m%d": {"unique_id": "model.p.m%d", "resource_type": "model", "name": "m%d", "database": "db", "schema": "s", "alias": "m%d", "depends_on": {"nodes": [%s]}}`,
			i, i, i, i, strings.Join(dep, ","))
	}
	tests := []string{"not_null"}
	if unique {
		tests = append(tests, "unique")
	}
	for i := range min(n, 3) {
		for _, name := range tests {
			fmt.Fprintf(&b, `, "test.p.%s_m%d_id": {"unique_id": "test.p.%s_m%d_id", "resource_type": "test", "column_name": "id", "attached_node": "model.p.m%d",
				"test_metadata": {"name": %q, "kwargs": {"column_name": "id"}}, "depends_on": {"nodes": ["model.p.m%d"]}, "config": {"enabled": true}}`,
				name, i, name, i, i, name, i)
		}
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// importState is what a reader sees of the graph and the expectations.
type importState struct {
	Version       int64
	Assets, Edges int
	Expectations  []string // warehouse, table and spec of every row
	StagingTables int
}

func readImportState(t *testing.T, db *store.DB) importState {
	t.Helper()
	ctx := context.Background()
	var s importState
	for q, dst := range map[string]any{
		"SELECT version FROM lineage_version WHERE id = 1": &s.Version,
		"SELECT COUNT(*) FROM lineage_assets":              &s.Assets,
		"SELECT COUNT(*) FROM lineage_edges":               &s.Edges,
	} {
		if err := db.QueryRowContext(ctx, q).Scan(dst); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	staging := "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'lineage_stage_%'"
	if db.Dialect() == store.Postgres {
		staging = "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'lineage_stage_%'"
	}
	if err := db.QueryRowContext(ctx, staging).Scan(&s.StagingTables); err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(ctx, "SELECT warehouse, table_ref, spec FROM quality_expectations ORDER BY warehouse, table_ref")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var w, ref, spec string
		if err := rows.Scan(&w, &ref, &spec); err != nil {
			t.Fatal(err)
		}
		s.Expectations = append(s.Expectations, w+" "+ref+" "+spec)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

// refuseExpectationWrites injects a fault: every insert into
// quality_expectations fails, inside whatever transaction makes it. The
// returned func takes the fault away.
func refuseExpectationWrites(t *testing.T, db *store.DB) func() {
	t.Helper()
	ctx := context.Background()
	stmts := []string{`CREATE TRIGGER refuse_expectations BEFORE INSERT ON quality_expectations BEGIN SELECT RAISE(ABORT, 'injected fault: expectations refused'); END`}
	undo := []string{`DROP TRIGGER refuse_expectations`}
	if db.Dialect() == store.Postgres {
		stmts = []string{
			`CREATE FUNCTION refuse_expectations() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected fault: expectations refused'; END $$`,
			`CREATE TRIGGER refuse_expectations BEFORE INSERT ON quality_expectations FOR EACH ROW EXECUTE FUNCTION refuse_expectations()`,
		}
		undo = []string{`DROP TRIGGER refuse_expectations ON quality_expectations`, `DROP FUNCTION refuse_expectations()`}
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("inject the fault: %v", err)
		}
	}
	return func() {
		for _, q := range undo {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("take the fault away: %v", err)
			}
		}
	}
}

// TestImportDBTIsOneTransaction: the expectations from a manifest's tests
// are written in the transaction that makes its graph import visible, so
// when that write fails the graph import is rolled back with it: the old
// graph and the old expectations both read exactly as before, and no
// staging table is left. Proven for a small manifest (one transaction)
// and a large one (staged, then swapped in), on both stores; once the
// fault is gone the same import changes both.
func TestImportDBTIsOneTransaction(t *testing.T) {
	// 5,200 models and their edges are over lineage's staging threshold
	// (20,000 rows), as in ingest's staged-import tests.
	for name, models := range map[string]int{"one-transaction": 40, "staged": 5_200} {
		t.Run(name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				clk := clock.NewFake(day)
				g := lineage.New(db, clk)
				whs := map[string][]string{"duckdb": {"demo"}}
				first, err := ImportDBT(ctx, g, testManifest(models, false), ingest.DBTOptions{}, whs, clk)
				if err != nil {
					t.Fatal(err)
				}
				if first.Expectations.Recorded != 3 || first.AssetsCreated != models {
					t.Fatalf("first import: %d assets, %+v", first.AssetsCreated, first.Expectations)
				}
				if db.Dialect() == store.SQLite {
					// A staged import takes the staging lock beside the file.
					_, err := os.Stat(db.Source() + ".import-lock")
					if staged := err == nil; staged != (name == "staged") {
						t.Fatalf("staged = %v for %d models", staged, models)
					}
				}
				before := readImportState(t, db)

				grown := testManifest(models+1, true)
				restore := refuseExpectationWrites(t, db)
				_, err = ImportDBT(ctx, g, grown, ingest.DBTOptions{}, whs, clk)
				if err == nil || !strings.Contains(err.Error(), "injected fault") {
					t.Fatalf("import with the expectations refused: %v, want the injected fault", err)
				}
				if got := readImportState(t, db); !reflect.DeepEqual(got, before) {
					t.Fatalf("after the failed import:\n%+v\nwant the state before it:\n%+v", got, before)
				}
				if _, err := g.Resolve(ctx, fmt.Sprintf("dbt://model.p.m%d", models)); err == nil {
					t.Fatal("the failed import's new model is in the graph")
				}

				restore()
				again, err := ImportDBT(ctx, g, grown, ingest.DBTOptions{}, whs, clk)
				if err != nil {
					t.Fatal(err)
				}
				after := readImportState(t, db)
				if again.AssetsCreated != 1 || after.Version != before.Version+1 || again.Expectations.Recorded != 6 ||
					reflect.DeepEqual(after.Expectations, before.Expectations) {
					t.Fatalf("the import without the fault: %d assets, version %d -> %d, %+v", again.AssetsCreated, before.Version, after.Version, again.Expectations)
				}
			})
		})
	}
}
