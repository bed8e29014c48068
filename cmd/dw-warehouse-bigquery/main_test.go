package main

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/bigquery/bigquerytest"
	"github.com/dataworkers/dw/internal/warehouseproc/childtest"
)

func TestMain(m *testing.M) { childtest.Main(m, main) }

// TestServesTheConfiguredWarehouse: the child opens the BigQuery section
// the agent sends (project, dataset, location, the endpoint that turns
// authentication off, the byte budgets) and answers through the real
// client: the tables listed, a statement dry-run, then run with the
// section's budget as its byte cap, and a statement over the session's
// budget refused before it runs.
func TestServesTheConfiguredWarehouse(t *testing.T) {
	f := bigquerytest.New(t)
	f.Estimate, f.Billed = 100, 100
	f.Results["INFORMATION_SCHEMA.TABLES"] = bigquerytest.Result{
		Fields: []map[string]any{bigquerytest.Field("table_catalog", "STRING"), bigquerytest.Field("table_schema", "STRING"), bigquerytest.Field("table_name", "STRING")},
		Rows:   [][]any{{"acme-prod", "loyalty", "members"}},
	}
	f.Results["SELECT 42"] = bigquerytest.Result{Fields: []map[string]any{bigquerytest.Field("n", "INTEGER")}, Rows: [][]any{{"42"}}}
	dir := t.TempDir()
	cfg := &config.Config{Source: filepath.Join(dir, "dw.yaml"), Home: dir}
	wc := &config.Warehouse{Name: "bq", Kind: "bigquery", Project: "acme-prod", Dataset: "loyalty", Location: "US", Endpoint: f.URL(),
		MaxBytesPerQuery: 150, MaxBytesPerSession: 250, Timeout: 10 * time.Second}
	w := childtest.Open(t, cfg, wc)
	ctx := context.Background()
	tables, err := w.ListTables(ctx)
	if err != nil || len(tables) != 1 || tables[0].Schema != "loyalty" || tables[0].Name != "members" {
		t.Fatalf("ListTables = %+v, %v; want loyalty.members", tables, err)
	}
	res, err := w.Query(ctx, warehouse.Query{SQL: "SELECT 42 AS n", Agent: "dw-quality", Tool: "t"})
	if err != nil || len(res.Rows) != 1 || res.Rows[0][0] != int64(42) {
		t.Fatalf("Query = %+v, %v; want one row of 42", res, err)
	}
	var capped bool
	for _, ins := range f.Inserts() {
		conf, _ := ins["configuration"].(map[string]any)
		q, _ := conf["query"].(map[string]any)
		if dry, _ := conf["dryRun"].(bool); !dry && q["maximumBytesBilled"] == "150" {
			capped = true
		}
	}
	if !capped {
		t.Fatalf("no job ran with the section's max_bytes_per_query (150) as its cap: %v", f.Inserts())
	}
	// 200 bytes scanned of the session's 250: the next estimate of 100
	// would pass it, so the child refuses it without running it.
	_, runs, _ := f.Counts()
	if _, err := w.Query(ctx, warehouse.Query{SQL: "SELECT 42 AS n", Agent: "dw-quality", Tool: "t"}); err == nil {
		t.Fatal("a statement over the session's budget ran; want it refused")
	}
	if _, after, _ := f.Counts(); after != runs {
		t.Fatalf("%d jobs ran after the session's budget was spent; want none", after-runs)
	}
	if !slices.ContainsFunc(f.Requests(), func(r string) bool {
		return r == "POST /bigquery/v2/projects/acme-prod/jobs" || r == "POST /projects/acme-prod/jobs"
	}) {
		t.Fatalf("no job was inserted in the section's project: %v", f.Requests())
	}
}

// TestArgumentsAreAUsageError: the child takes no arguments.
func TestArgumentsAreAUsageError(t *testing.T) { childtest.Usage(t, "bigquery") }

// TestRefusesOtherKinds: handed a DuckDB or Snowflake warehouse, the
// BigQuery child says so and opens nothing.
func TestRefusesOtherKinds(t *testing.T) { childtest.RefusesOtherKinds(t, "bigquery") }
