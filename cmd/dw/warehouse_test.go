package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb/duckdbtest"
	"github.com/dataworkers/dw/internal/warehouseproc"
)

// asDW makes this test binary dw itself (TestMain), so a test can start
// `dw warehouse serve` as an agent from before the per-kind children did.
const asDW = "DW_TEST_AS_DW"

func TestMain(m *testing.M) {
	if os.Getenv(asDW) != "" {
		main()
	}
	os.Exit(m.Run())
}

// TestWarehouseServeForAnOlderAgent: an agent process from before the
// per-kind children, still running after an update, starts `dw warehouse
// serve` of the new dw as its child; it serves the warehouse of the
// agent's configuration.
func TestWarehouseServeForAnOlderAgent(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DW_HOME", dir)
	path := filepath.Join(dir, "wh.duckdb")
	duckdbtest.File(t, path, `CREATE SCHEMA s`, `CREATE TABLE s.t AS SELECT range AS id FROM range(3)`)
	cfg := &config.Config{Source: filepath.Join(dir, "dw.yaml"), Home: dir}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	old := warehouseproc.Command
	warehouseproc.Command = func(string, string) (*exec.Cmd, error) {
		cmd := exec.Command(self, "warehouse", "serve")
		cmd.Env = append(os.Environ(), asDW+"=1")
		return cmd, nil
	}
	t.Cleanup(func() { warehouseproc.Command = old })
	w, err := warehouseproc.Open(context.Background(), cfg, &config.Warehouse{Name: "wh", Kind: "duckdb", Path: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	res, err := w.Query(context.Background(), warehouse.Query{SQL: "SELECT count(*) FROM s.t", Agent: "test", Tool: "t"})
	if err != nil || len(res.Rows) != 1 || res.Rows[0][0] != int64(3) {
		t.Fatalf("count through dw warehouse serve = %+v, %v; want the 3 rows of the configured file", res, err)
	}
}
