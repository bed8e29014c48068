package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb/duckdbtest"
	"github.com/dataworkers/dw/internal/warehouseproc"
	"github.com/dataworkers/dw/internal/warehouseproc/childtest"
)

func TestMain(m *testing.M) { childtest.Main(m, main) }

// childOf is the proxy for the warehouse wc of cfg, served by this test
// binary as the child.
func childOf(t *testing.T, cfg *config.Config, wc *config.Warehouse) warehouse.Warehouse {
	t.Helper()
	return childtest.Open(t, cfg, wc)
}

func count(t *testing.T, w warehouse.Warehouse, sql string) (int64, error) {
	t.Helper()
	res, err := w.Query(context.Background(), warehouse.Query{SQL: sql, Agent: "test", Tool: "t"})
	if err != nil {
		return 0, err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		t.Fatalf("%s: %d rows, want one count", sql, len(res.Rows))
	}
	n, ok := res.Rows[0][0].(int64)
	if !ok {
		t.Fatalf("%s: %T, want a count", sql, res.Rows[0][0])
	}
	return n, nil
}

// TestServesTheConfiguredFile: the child opens the DuckDB file of the
// agent's configuration and answers its queries; a file that is not there
// is an error naming the warehouse and the file, on every call.
func TestServesTheConfiguredFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DW_HOME", dir)
	path := filepath.Join(dir, "wh.duckdb")
	duckdbtest.File(t, path, `CREATE SCHEMA s`, `CREATE TABLE s.t AS SELECT range AS id FROM range(3)`)
	cfgPath := filepath.Join(dir, "dw.yaml")
	yaml := "warehouses:\n  - {name: wh, kind: duckdb, path: " + path + "}\n  - {name: gone, kind: duckdb, path: " + filepath.Join(dir, "missing.duckdb") + "}\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DW_CONFIG", cfgPath)
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	wc, err := cfg.Warehouse("wh")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := count(t, childOf(t, cfg, wc), "SELECT count(*) FROM s.t"); err != nil || n != 3 {
		t.Fatalf("count = %d, %v; want the 3 rows of the configured file", n, err)
	}
	gone, err := cfg.Warehouse("gone")
	if err != nil {
		t.Fatal(err)
	}
	w := childOf(t, cfg, gone)
	for i := 0; i < 2; i++ {
		if _, err := count(t, w, "SELECT 1"); err == nil || !strings.Contains(err.Error(), "gone") || !strings.Contains(err.Error(), "no such file") {
			t.Fatalf("call %d on a missing file: %v; want an error naming the warehouse and the missing file", i, err)
		}
	}
}

// TestSeedsTheEmbeddedDefault: with no dw.yaml, the first call creates
// and seeds the demo warehouse in DW_HOME as of the demo's clock, as dw's
// own commands do.
func TestSeedsTheEmbeddedDefault(t *testing.T) {
	home := t.TempDir()
	t.Setenv("DW_HOME", home)
	t.Setenv("DW_CONFIG", "")
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.EmbeddedDefault() || len(cfg.Warehouses) == 0 || cfg.Warehouses[0].Kind != "duckdb" {
		t.Fatalf("no dw.yaml gave %+v; want the embedded default's DuckDB warehouse", cfg.Warehouses)
	}
	w := childOf(t, cfg, &cfg.Warehouses[0])
	n, err := count(t, w, "SELECT count(*) FROM information_schema.tables WHERE table_schema NOT IN ('information_schema', 'pg_catalog')")
	if err != nil || n == 0 {
		t.Fatalf("the seeded demo has %d tables (%v); want the scenario packs' tables", n, err)
	}
	if _, err := os.Stat(cfg.Warehouses[0].Path); err != nil {
		t.Fatalf("the demo warehouse is not at %s: %v", cfg.Warehouses[0].Path, err)
	}
	// Seeded as of the demo's clock (config.DemoClockFor), which anchors
	// itself in DW_HOME so that every process of the demo shares it.
	if _, err := os.Stat(filepath.Join(home, "demo-clock")); err != nil {
		t.Fatalf("the child seeded the demo without the demo's clock (no anchor in DW_HOME): %v", err)
	}
}

// TestArgumentsAreAUsageError: the child takes no arguments; given one it
// exits 2 with a usage line on stderr and nothing on stdout (the agent's
// protocol stream).
func TestArgumentsAreAUsageError(t *testing.T) { childtest.Usage(t, "duckdb") }

// TestRefusesOtherKinds: handed a BigQuery or Snowflake warehouse, the
// DuckDB child says so and opens nothing.
func TestRefusesOtherKinds(t *testing.T) { childtest.RefusesOtherKinds(t, "duckdb") }

// TestServesTheAgentsConfigAfterAnIdleExit: the child opens the warehouse
// the agent's configuration names, not whatever dw.yaml says when it
// starts. The agent loads dw.yaml once; its child idles out; the file is
// edited to point the warehouse elsewhere; the next call starts a new
// child, which still serves the warehouse the agent loaded.
func TestServesTheAgentsConfigAfterAnIdleExit(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DW_HOME", dir)
	t.Setenv(warehouseproc.IdleEnv, "200ms")
	pidFile := filepath.Join(dir, "pids")
	t.Setenv(childtest.Pids, pidFile)
	paths := map[int]string{}
	for _, rows := range []int{3, 5} {
		path := filepath.Join(dir, fmt.Sprintf("rows%d.duckdb", rows))
		duckdbtest.File(t, path, `CREATE SCHEMA s`, fmt.Sprintf(`CREATE TABLE s.t AS SELECT range AS id FROM range(%d)`, rows))
		paths[rows] = path
	}
	cfgPath := filepath.Join(dir, "dw.yaml")
	point := func(path string) {
		if err := os.WriteFile(cfgPath, []byte("warehouses:\n  - {name: wh, kind: duckdb, path: "+path+"}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	point(paths[3])
	t.Setenv("DW_CONFIG", cfgPath)

	// The agent's side: configuration loaded once, the proxy over it.
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	wc, err := cfg.Warehouse("wh")
	if err != nil {
		t.Fatal(err)
	}
	w := childOf(t, cfg, wc)
	children := func() []int {
		t.Helper()
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		var pids []int
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			pids = append(pids, pid)
		}
		return pids
	}

	if n, err := count(t, w, "SELECT count(*) FROM s.t"); err != nil || n != 3 {
		t.Fatalf("first call counts %d rows (%v), want the 3 of the warehouse dw.yaml named", n, err)
	}
	first := children()
	if len(first) != 1 {
		t.Fatalf("%d children started for one call", len(first))
	}
	// The child idles out: it has exited and been reaped.
	for deadline := time.Now().Add(30 * time.Second); !errors.Is(syscall.Kill(first[0], 0), syscall.ESRCH); {
		if time.Now().After(deadline) {
			t.Fatal("the warehouse child was still running 30 s after its idle period")
		}
		time.Sleep(20 * time.Millisecond)
	}

	point(paths[5])
	if n, err := count(t, w, "SELECT count(*) FROM s.t"); err != nil || n != 3 {
		t.Fatalf("after dw.yaml was edited, the restarted child counts %d rows (%v); want the 3 of the warehouse the agent loaded", n, err)
	}
	if got := children(); len(got) != 2 {
		t.Fatalf("%d children started; want 2 (one idle exit)", len(got))
	}
}
