package benchmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// backfillRows and backfillDays are issue 18's history row: a 10M-row
// table whose rows spread over 28 days, recorded hour by hour.
const (
	backfillRows = 10_000_000
	backfillDays = 28
)

var backfillStart = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

// backfillTable writes the table into a DuckDB file with DuckDB's own
// range(), so no row crosses the Go boundary: the 12 columns of the
// in-process check benchmarks (internal/checks), 10M rows evenly over 28
// days (241,920 µs apart), nulls in several columns.
func backfillTable(b *testing.B, path string) {
	ctx := context.Background()
	db, err := duckdb.OpenWrite(ctx, path, 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	step := int64(backfillDays*24*time.Hour/time.Microsecond) / backfillRows
	_, err = db.ExecContext(ctx, fmt.Sprintf(`CREATE TABLE events AS SELECT
		i AS id,
		i %% 50000 AS account_id,
		TIMESTAMP '%s' + to_microseconds(i * %d) AS event_time,
		TIMESTAMP '%s' + to_microseconds(i * %d + (i %% 300) * 1000000) AS loaded_at,
		CASE WHEN i %% 100 = 0 THEN NULL ELSE (i %% 1000) * 0.5 END::DOUBLE AS amount,
		CASE WHEN i %% 7 = 0 THEN NULL ELSE ['ok', 'retry', 'fail'][i %% 3 + 1] END AS status,
		CASE WHEN i %% 3 = 0 THEN NULL ELSE i %% 17 END AS quantity,
		CAST(i %% 13 AS VARCHAR) AS region,
		i * 2 AS bytes,
		CASE WHEN i %% 11 = 0 THEN NULL ELSE i %% 5 END AS priority,
		i %% 2 = 0 AS is_test,
		CASE WHEN i %% 1000 = 0 THEN NULL ELSE 'sku-' || (i %% 97) END AS sku
		FROM range(%d) t(i)`, backfillStart.Format("2006-01-02 15:04:05"), step, backfillStart.Format("2006-01-02 15:04:05"), step, backfillRows))
	if err == nil {
		_, err = db.ExecContext(ctx, "CHECKPOINT")
	}
	if err != nil {
		b.Fatal(err)
	}
}

// eventsTable returns the path of the DuckDB file holding the 10M-row
// table, written into the benchmark's temporary directory. Writing it
// takes a minute or two on a loaded machine: DW_BENCH_BACKFILL_DUCKDB names
// a file to keep it in between runs (written when missing), which the
// quality-check rows share.
func eventsTable(b *testing.B) string {
	b.Helper()
	path := os.Getenv("DW_BENCH_BACKFILL_DUCKDB")
	if path == "" {
		path = filepath.Join(b.TempDir(), "bench.duckdb")
	}
	if _, err := os.Stat(path); err != nil {
		t0 := time.Now()
		backfillTable(b, path)
		b.Logf("bench table: %d rows over %d days, written in %s", backfillRows, backfillDays, time.Since(t0).Round(time.Millisecond))
	}
	return path
}

// startWatched starts an agent like Start, with a client that counts the
// progress notifications it receives.
func startWatched(b *testing.B, name string, progress func(*mcp.ProgressNotificationParams), env ...string) *Agent {
	b.Helper()
	cmd := exec.Command(filepath.Join(BinDir(b), name))
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = io.Discard
	if os.Getenv("DW_BENCH_STDERR") != "" {
		cmd.Stderr = os.Stderr
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "dw-benchmcp", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { progress(r.Params) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatalf("start %s: %v", name, err)
	}
	a := &Agent{Name: name, cmd: cmd, session: cs}
	b.Cleanup(func() { a.session.Close() })
	return a
}

// BenchmarkE2EHistoryBackfill is issue 18's "28 days of hourly history"
// row: run_quality_check over 28 days by hour on a 10M-row table with no
// history yet (the backfill the agent's instructions ask for before a
// first check), on a warm dw-quality over stdio with a progress token,
// against one hand-written GROUP BY scan of the same window computing the
// same profile in this process, in the same run. Each backfill starts
// from an empty store, as a first one does.
func BenchmarkE2EHistoryBackfill(b *testing.B) {
	dir := b.TempDir()
	path := eventsTable(b)
	until := backfillStart.Add(backfillDays * 24 * time.Hour)
	args := map[string]any{"table": "events", "since": backfillStart.Format(time.RFC3339), "until": until.Format(time.RFC3339),
		"bucket": "hour", "no_incident": true}

	wh, err := duckdb.Open("bench", path, 10*time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	defer wh.Close()
	checkFloorMatches(b, wh)
	floor := backfillFloorSQL()
	// The slowest chunk of each side: for the product, the longest gap
	// between two of the backfill's progress reports (one statement and
	// the recording of its buckets; the plan is reported first); for the
	// floor, its slowest statement.
	var slowest, floorSlowest time.Duration

	row := Row{Key: "backfill", What: fmt.Sprintf("28 days of hourly history, %dM rows × 12 columns (run_quality_check since/until, bucket hour), from an empty store", backfillRows/1_000_000)}
	var notes []string
	runs := 2
	if n, err := strconv.Atoi(os.Getenv("DW_BENCH_BACKFILL_RUNS")); err == nil && n > 0 {
		runs = n
	}
	for i := 0; i < b.N; i++ {
		for r := 0; r < runs; r++ {
			// A fresh store per run: a backfill is a table's first check.
			home := filepath.Join(dir, fmt.Sprintf("home-%d-%d", i, r))
			if err := os.MkdirAll(home, 0o700); err != nil {
				b.Fatal(err)
			}
			conf := filepath.Join(home, "dw.yaml")
			// A statement timeout well past the 60 s default, so a slow
			// run is measured rather than cut off; the row says whether
			// it finished inside the default.
			yaml := fmt.Sprintf("home: %s\nwarehouses:\n  - name: bench\n    kind: duckdb\n    path: %s\n    timeout: 30m\n", home, path)
			if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
				b.Fatal(err)
			}
			var mu sync.Mutex
			var events []string
			var reported []time.Time // when each report with a total arrived
			agent := startWatched(b, "dw-quality", func(p *mcp.ProgressNotificationParams) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, fmt.Sprintf("%.0f/%.0f %s", p.Progress, p.Total, p.Message))
				if p.Total > 0 {
					reported = append(reported, time.Now())
				}
			}, "DW_CONFIG="+conf, "DW_HOME="+home)
			// Warm: the agent has opened its store and started its
			// warehouse child before the measured call.
			agent.Call(b, "list_tables", map[string]any{}, nil)

			peak := PeakRSS(b, agent.Pid())
			t := time.Now()
			res := backfillCall(b, agent, args)
			row.Product = append(row.Product, time.Since(t))
			row.RSSMiB = max(row.RSSMiB, peak())
			// One statement per chunk (the table's key is inferred, so no
			// window-wide distinct count runs).
			if res.Statements != len(floor) || res.Buckets != backfillDays*24 {
				b.Fatalf("the backfill ran %d statements over %d buckets; want one per chunk (%d) over %d hourly buckets", res.Statements, res.Buckets, len(floor), backfillDays*24)
			}
			var took time.Duration
			for _, st := range floor {
				d := runFloor(b, wh, []floorStatement{st})
				took += d
				floorSlowest = max(floorSlowest, d)
			}
			row.Floor = append(row.Floor, took)
			mu.Lock()
			if real := counted(events); real < len(floor) {
				b.Fatalf("%d progress notifications with a total during the backfill, want one per chunk (%d): %q", real, len(floor), events)
			}
			for k := 1; k < len(reported); k++ {
				slowest = max(slowest, reported[k].Sub(reported[k-1]))
			}
			if r == 0 {
				shown := events
				if len(shown) > 3 {
					shown = append(shown[:2:2], "…", shown[len(shown)-1])
				}
				notes = append(notes, fmt.Sprintf("%d metric results; %d progress notifications during the call (%s)", res.Results, len(events), strings.Join(shown, "; ")))
			}
			mu.Unlock()
			agent.session.Close()
		}
	}
	// Judged on the whole call inside the 60 s default statement timeout,
	// which holds every statement inside it too; the slowest chunk says
	// by how much.
	inside := med(row.Product) < 60*time.Second
	row.Met = &inside
	row.Note = strings.Join(notes, "; ") + fmt.Sprintf("; one statement per %d hours (GROUP BY hour), the floor chunked the same; median %s against the 60 s default statement timeout; slowest chunk %s (%.0f%% of that timeout; one statement and its recording, the longest gap between two progress reports), the floor's slowest statement %s",
		int(checks.ChunkSpan(checks.Hour)/time.Hour), med(row.Product).Round(time.Millisecond), slowest.Round(time.Millisecond), 100*slowest.Seconds()/60, floorSlowest.Round(time.Millisecond))
	b.ReportMetric(float64(slowest.Microseconds())/1000, "slowest-chunk-ms")
	row.Report(b)
}

// backfillResult is what the benchmark reads of the check's report.
type backfillResult struct {
	Statements int
	Buckets    int
	Results    int
}

func backfillCall(b *testing.B, a *Agent, args map[string]any) backfillResult {
	b.Helper()
	params := &mcp.CallToolParams{Name: "run_quality_check", Arguments: args}
	params.SetProgressToken("backfill")
	res, err := a.session.CallTool(context.Background(), params)
	if err != nil {
		b.Fatalf("run_quality_check: %v", err)
	}
	if res.IsError {
		var msg strings.Builder
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				msg.WriteString(t.Text)
			}
		}
		b.Fatalf("run_quality_check answered an error: %s", msg.String())
	}
	var out struct {
		Statements int `json:"statements"`
		Window     struct {
			Start time.Time `json:"start"`
			End   time.Time `json:"end"`
			Grain string    `json:"grain"`
		} `json:"window"`
		Results []json.RawMessage `json:"results"`
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(raw, &out)
	}
	if err != nil {
		b.Fatalf("run_quality_check: structured answer: %v", err)
	}
	r := backfillResult{Statements: out.Statements, Results: len(out.Results)}
	if out.Window.Grain == "hour" {
		r.Buckets = int(out.Window.End.Sub(out.Window.Start) / time.Hour)
	}
	return r
}

// counted is how many progress notifications carried a total: the
// backfill's own reports, not the heartbeat.
func counted(events []string) int {
	n := 0
	for _, e := range events {
		if !strings.Contains(strings.Fields(e)[0], "/0") {
			n++
		}
	}
	return n
}

// backfillFloorSQL is the scan an engineer would write by hand for the
// profile the check infers for this table (eventsChecks), chunked as the
// backfill is: a statement per chunk, so each stays inside a statement
// timeout, each computing every check's aggregates per hour.
func backfillFloorSQL() []floorStatement {
	var out []floorStatement
	end := backfillStart.Add(backfillDays * 24 * time.Hour)
	for from := backfillStart; from.Before(end); from = from.Add(checks.ChunkSpan(checks.Hour)) {
		to := from.Add(checks.ChunkSpan(checks.Hour))
		if to.After(end) {
			to = end
		}
		out = append(out, floorSQL(eventsChecks(), from, to, true, false))
	}
	return out
}
