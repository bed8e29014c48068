package catalog

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/warehouse"
)

func importOut(t *testing.T, cs *mcp.ClientSession, path string) ImportDBTOut {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "import_dbt_manifest", Arguments: map[string]any{"path": path}})
	if err != nil || res.IsError {
		t.Fatalf("import: %v %s", err, text(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out ImportDBTOut
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Importing the real dbt-bouncer manifest (duckdb adapter) records its 44
// unique, not_null, accepted_values and relationships tests as
// expectations of the configured DuckDB warehouse; a re-import leaves a
// team's own expectations alone. The BigQuery manifest records none where
// no BigQuery warehouse is configured, and says so.
func TestImportRecordsDBTTestsAsExpectations(t *testing.T) {
	d := testDeps(t)
	cs := connect(t, d)
	ctx := context.Background()
	bouncer, _ := filepath.Abs("../../internal/lineage/ingest/testdata/dbt/dbt-bouncer__dbt_16__manifest.json")
	out := importOut(t, cs, bouncer)
	e := out.Expectations
	if e.Recorded != 44 || e.ByTest["relationships"] != 1 || !slices.Equal(e.Warehouses, []string{"demo"}) || out.Project != "dbt_bouncer_test_project" {
		t.Fatalf("expectations from the manifest: %+v", e)
	}
	db, err := d.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	orders := warehouse.TableRef{Schema: "main", Name: "orders"}
	got, _, err := checks.LoadExpectations(ctx, db, "demo", orders)
	if err != nil || got == nil || !slices.Equal(got.Key, []string{"order_id"}) ||
		!slices.Equal(got.Relationships, []checks.Relationship{{Column: "customer_id", To: "main.customers", Field: "customer_id"}}) {
		t.Fatalf("orders' expectations: %+v %v", got, err)
	}

	// The team declares another key; importing again does not touch it,
	// and the team's key is the one checked.
	team := checks.Expectations{Key: []string{"order_id", "customer_id"}}
	if err := checks.SaveExpectations(ctx, db, "demo", orders, team, time.Now()); err != nil {
		t.Fatal(err)
	}
	if again := importOut(t, cs, bouncer); again.Expectations.Recorded != 44 {
		t.Fatalf("re-import: %+v", again.Expectations)
	}
	got, _, err = checks.LoadExpectations(ctx, db, "demo", orders)
	if err != nil || !slices.Equal(got.Key, team.Key) || len(got.Relationships) != 1 {
		t.Fatalf("after re-import: %+v %v", got, err)
	}

	denver, _ := filepath.Abs("../../internal/lineage/ingest/testdata/dbt/whyline-denver__manifest.json")
	out = importOut(t, cs, denver)
	if out.Expectations.Recorded != 0 || !strings.Contains(strings.Join(out.Expectations.Notes, "\n"), "no configured warehouse is bigquery") {
		t.Fatalf("bigquery manifest without a bigquery warehouse: %+v", out.Expectations)
	}
}
