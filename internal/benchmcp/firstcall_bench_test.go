package benchmcp

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// BenchmarkE2EFirstWarehouseCall is issue 18's "first warehouse call after
// start" row: a dw-quality just started on the embedded default (the demo
// already seeded), its first call list_tables, which starts the warehouse
// child (`dw-warehouse-duckdb`), opens the DuckDB file in it, counts and
// describes the demo's tables; against the same work by the DuckDB driver
// in this process on a freshly opened file (the lighter path: an agent
// linking the driver). Memory: the agent and its child after that call.
func BenchmarkE2EFirstWarehouseCall(b *testing.B) {
	ctx := context.Background()
	home := b.TempDir()
	env := []string{"DW_HOME=" + home, "DW_CONFIG="}
	// Seed once, outside the measurement, as a machine that ran the
	// agents before has it.
	seed := exec.Command(filepath.Join(BinDir(b), "dw"), "demo", "seed")
	seed.Env = append(os.Environ(), env...)
	if out, err := seed.CombinedOutput(); err != nil {
		b.Fatalf("dw demo seed: %v\n%s", err, out)
	}
	path := filepath.Join(home, "demo.duckdb")
	row := Row{Key: "warehouse-first", What: "first warehouse call after start (list_tables on the demo: count and describe 8 tables)"}
	agentMem, childMem, rest := firstCalls(b, &row, env, func() int { return firstCallInProcess(b, ctx, path) }, nil)
	// What an agent linking the driver would hold: this benchmark's own
	// process has the driver in it and did the floor's work; its figure
	// includes the test binary, so it is an upper bound.
	inProcMem := ProcMem(os.Getpid())
	b.ReportMetric(agentMem.RSSMiB, "MiB-rss-agent")
	b.ReportMetric(childMem.RSSMiB, "MiB-rss-child")
	row.RSSMiB = agentMem.RSSMiB + childMem.RSSMiB
	row.Note = fmt.Sprintf("after the first call: agent %s, warehouse child %s; the second call (child up): %.1f ms median; this benchmark process, which links the driver: %s",
		agentMem, childMem, float64(med(rest).Microseconds())/1000, inProcMem)
	row.Report(b)
}

// firstCallInProcess is list_tables' warehouse work done by the driver in
// this process on a newly opened file: list, count every table in one
// statement, describe each. It returns the number of tables.
func firstCallInProcess(b *testing.B, ctx context.Context, path string) int {
	b.Helper()
	w, err := duckdb.Open("demo", path, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	return listTablesWork(b, ctx, w)
}

// listTablesWork is list_tables' warehouse work on an open warehouse:
// list, count every table in one statement, describe each. It returns
// the number of tables.
func listTablesWork(b *testing.B, ctx context.Context, w warehouse.Warehouse) int {
	b.Helper()
	refs, err := w.ListTables(ctx)
	if err != nil {
		b.Fatal(err)
	}
	d := w.Dialect()
	parts := make([]string, len(refs))
	for i, r := range refs {
		parts[i] = fmt.Sprintf("SELECT %d AS i, COUNT(*) AS n FROM %s", i, d.Table(r))
	}
	if _, err := w.Query(ctx, warehouse.Query{SQL: strings.Join(parts, " UNION ALL "), Agent: "bench", Tool: "list_tables"}); err != nil {
		b.Fatal(err)
	}
	for _, r := range refs {
		if _, err := w.Describe(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	return len(refs)
}

// firstCalls is the loop of the first-warehouse-call rows: seven times,
// the floor (which returns how many tables the warehouse has), then a
// dw-quality started with env and its first list_tables, timed into row,
// its answer held to the floor's table count (and to check, when given,
// on the tables' row counts), then a second call with the child up. It
// returns the agent's and its child's memory after the last start's
// calls, and the second calls' times.
func firstCalls(b *testing.B, row *Row, env []string, floor func() int, check func(rowCounts []int64) error) (agentMem, childMem Mem, rest []time.Duration) {
	b.Helper()
	const starts = 7
	for i := 0; i < b.N; i++ {
		for s := 0; s < starts; s++ {
			t := time.Now()
			n := floor()
			row.Floor = append(row.Floor, time.Since(t))

			agent := Start(b, "dw-quality", env...)
			var out struct {
				Tables []struct {
					RowCount int64 `json:"row_count"`
				} `json:"tables"`
			}
			row.Product = append(row.Product, agent.Call(b, "list_tables", map[string]any{}, &out))
			if len(out.Tables) != n {
				b.Fatalf("list_tables listed %d tables; the driver found %d", len(out.Tables), n)
			}
			if check != nil {
				counts := make([]int64, len(out.Tables))
				for i, t := range out.Tables {
					counts[i] = t.RowCount
				}
				if err := check(counts); err != nil {
					b.Fatalf("list_tables: %v", err)
				}
			}
			rest = append(rest, agent.Call(b, "list_tables", map[string]any{}, nil))
			agentMem = ProcMem(agent.Pid())
			childMem = Mem{}
			for _, c := range Descendants(agent.Pid()) {
				childMem = childMem.Add(ProcMem(c))
			}
			agent.session.Close()
		}
	}
	return agentMem, childMem, rest
}
