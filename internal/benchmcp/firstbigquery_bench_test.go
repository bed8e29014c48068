package benchmcp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse/bigquery"
	"github.com/dataworkers/dw/internal/warehouse/bigquery/bigquerytest"
)

// BenchmarkE2EFirstBigQueryCall is the first warehouse call after start
// on a BigQuery warehouse: a dw-quality just started, its first call
// list_tables, which starts the BigQuery warehouse child, opens a client
// in it, lists the dataset's tables, counts them in one job and describes
// each, against BigQuery's REST API served on loopback (bigquerytest,
// whose answers are the API reference's whole objects); against the same
// work by the driver in this process with a newly made client (the
// lighter path on paper: an agent linking the driver). Memory: the agent
// and its child after that call. DW_BENCH_BIN_DIR naming binaries from
// before the per-kind children gives the "before" figures (their child
// was `dw warehouse serve`).
func BenchmarkE2EFirstBigQueryCall(b *testing.B) {
	ctx := context.Background()
	f := bigquerytest.New(b)
	f.Estimate, f.Billed = 10<<20, 10<<20
	tables := []string{"member_balances", "members", "points_ledger", "redemptions"}
	var rows [][]any
	for _, t := range tables {
		rows = append(rows, []any{"acme-prod", "loyalty", t})
	}
	f.Results["INFORMATION_SCHEMA.TABLES"] = bigquerytest.Result{
		Fields: []map[string]any{bigquerytest.Field("table_catalog", "STRING"), bigquerytest.Field("table_schema", "STRING"), bigquerytest.Field("table_name", "STRING")},
		Rows:   rows,
	}
	var counts [][]any
	for i := range tables {
		counts = append(counts, []any{fmt.Sprint(i), fmt.Sprint(1000 * (i + 1))})
	}
	f.Results["COUNT(*) AS n"] = bigquerytest.Result{Fields: []map[string]any{bigquerytest.Field("i", "INTEGER"), bigquerytest.Field("n", "INTEGER")}, Rows: counts}
	f.Results["INFORMATION_SCHEMA.COLUMNS"] = bigquerytest.Result{
		Fields: []map[string]any{bigquerytest.Field("column_name", "STRING"), bigquerytest.Field("data_type", "STRING"), bigquerytest.Field("n", "BOOLEAN"), bigquerytest.Field("ordinal_position", "INTEGER")},
		Rows:   [][]any{{"member_id", "INT64", "false", "1"}, {"balance", "INT64", "true", "2"}, {"event_time", "TIMESTAMP", "true", "3"}},
	}
	home := b.TempDir()
	conf := filepath.Join(home, "dw.yaml")
	section := config.Warehouse{Name: "bq", Kind: "bigquery", Project: "acme-prod", Dataset: "loyalty", Location: "US", Endpoint: f.URL()}
	yaml := fmt.Sprintf("home: %s\nwarehouses:\n  - {name: %s, kind: bigquery, project: %s, dataset: %s, location: %s, endpoint: %q}\n",
		home, section.Name, section.Project, section.Dataset, section.Location, section.Endpoint)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	env := []string{"DW_HOME=" + home, "DW_CONFIG=" + conf}
	row := Row{Key: "warehouse-first", What: fmt.Sprintf("first BigQuery call after start (list_tables: list, count and describe %d tables, REST API on loopback)", len(tables))}
	remoteFirstCalls(b, &row, env, len(tables), func() int { return firstBigQueryCallInProcess(b, ctx, &section) })
}

// remoteFirstCalls is the first-call loop of a remote warehouse row whose
// fake answers len(tables) tables, table i holding 1000*(i+1) rows, with
// floor doing the same work in this process; it reports the row with the
// agent's and its child's memory after the last first call.
func remoteFirstCalls(b *testing.B, row *Row, env []string, tables int, floor func() int) {
	b.Helper()
	agentMem, childMem, rest := firstCalls(b, row, env, func() int {
		if n := floor(); n != tables {
			b.Fatalf("in process: %d tables; the service lists %d", n, tables)
		}
		return tables
	}, func(counts []int64) error {
		for i, n := range counts {
			if n != int64(1000*(i+1)) {
				return fmt.Errorf("table %d has %d rows; the service answered %d", i, n, 1000*(i+1))
			}
		}
		return nil
	})
	b.ReportMetric(childMem.PSSMiB, "MiB-pss-child")
	row.RSSMiB = agentMem.RSSMiB + childMem.RSSMiB
	row.Note = fmt.Sprintf("after the first call: agent %s, warehouse child %s; the second call (child up): %.1f ms median",
		agentMem, childMem, float64(med(rest).Microseconds())/1000)
	row.Report(b)
}

// firstBigQueryCallInProcess is list_tables' warehouse work done by the
// driver in this process with a new client: list, count every table in
// one job, describe each. It returns the number of tables.
func firstBigQueryCallInProcess(b *testing.B, ctx context.Context, section *config.Warehouse) int {
	b.Helper()
	w, err := bigquery.OpenSection(ctx, section)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	return listTablesWork(b, ctx, w)
}
