package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
)

// asDW makes this test binary dw itself (TestMain), so a test can start
// `dw warehouse serve` as an agent does; the child appends its pid to the
// file asDWPids names.
const (
	asDW     = "DW_TEST_AS_DW"
	asDWPids = "DW_TEST_AS_DW_PIDS"
)

func TestMain(m *testing.M) {
	if os.Getenv(asDW) != "" {
		if f, err := os.OpenFile(os.Getenv(asDWPids), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			fmt.Fprintln(f, os.Getpid())
			f.Close()
		}
		main()
	}
	os.Exit(m.Run())
}

// TestWarehouseChildServesTheAgentsConfig: `dw warehouse serve` opens the
// warehouse the agent's configuration names, not whatever dw.yaml says
// when it starts. The agent loads dw.yaml once; its child idles out; the
// file is edited to point the warehouse elsewhere; the next call starts a
// new child, which still serves the warehouse the agent loaded.
func TestWarehouseChildServesTheAgentsConfig(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DW_HOME", dir)
	t.Setenv(warehouseproc.IdleEnv, "200ms")
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
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "pids")
	old := warehouseproc.Command
	warehouseproc.Command = func(string, string) (*exec.Cmd, error) {
		cmd := exec.Command(self, "warehouse", "serve")
		cmd.Env = append(os.Environ(), asDW+"=1", asDWPids+"="+pidFile)
		return cmd, nil
	}
	t.Cleanup(func() { warehouseproc.Command = old })
	w, err := warehouseproc.Open(context.Background(), cfg, wc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	count := func() int64 {
		t.Helper()
		res, err := w.Query(context.Background(), warehouse.Query{SQL: "SELECT count(*) FROM s.t", Agent: "test", Tool: "t"})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := res.Rows[0][0].(int64)
		return n
	}
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

	if n := count(); n != 3 {
		t.Fatalf("first call counts %d rows, want the 3 of the warehouse dw.yaml named", n)
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
	if n := count(); n != 3 {
		t.Fatalf("after dw.yaml was edited, the restarted child counts %d rows; want the 3 of the warehouse the agent loaded", n)
	}
	if got := children(); len(got) != 2 {
		t.Fatalf("%d children started; want 2 (one idle exit)", len(got))
	}
}
