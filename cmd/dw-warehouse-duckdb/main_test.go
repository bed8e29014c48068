package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb/duckdbtest"
	"github.com/dataworkers/dw/internal/warehouseproc"
)

// asChild makes this test binary the child itself (TestMain), so a test
// starts it as an agent does.
const asChild = "DW_TEST_AS_DUCKDB_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(asChild) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childOf points the agents' Command at this test binary as the child and
// returns the proxy for the warehouse wc of cfg.
func childOf(t *testing.T, cfg *config.Config, wc *config.Warehouse) warehouse.Warehouse {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	old := warehouseproc.Command
	warehouseproc.Command = func(_, kind string) (*exec.Cmd, error) {
		if kind != "duckdb" {
			t.Errorf("the DuckDB child was started for a warehouse of kind %q", kind)
		}
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), asChild+"=1")
		return cmd, nil
	}
	t.Cleanup(func() { warehouseproc.Command = old })
	w, err := warehouseproc.Open(context.Background(), cfg, wc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
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
// and seeds the demo warehouse in DW_HOME as of the demo's clock, as dw
// warehouse serve does.
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
func TestArgumentsAreAUsageError(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "serve")
	cmd.Env = append(os.Environ(), asChild+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("with an argument: %v; want exit status 2", err)
	}
	if stdout.Len() != 0 || !strings.HasPrefix(stderr.String(), "usage: dw-warehouse-duckdb") {
		t.Fatalf("stdout %q, stderr %q; want nothing on stdout and the usage on stderr", stdout.String(), stderr.String())
	}
}
