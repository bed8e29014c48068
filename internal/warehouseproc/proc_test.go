package warehouseproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// TestMain doubles as the warehouse child: with DW_TEST_WAREHOUSE_CHILD
// set, this test binary serves what the agent's open frame names, as
// a warehouse child does (serveChild).
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(serveChild())
	}
	os.Exit(m.Run())
}

func proxy(t *testing.T) *Proxy {
	t.Helper()
	path := filepath.Join(t.TempDir(), "wh.duckdb")
	db, err := duckdb.OpenWrite(context.Background(), path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`CREATE SCHEMA usage`,
		`CREATE TABLE usage.t (id BIGINT, big HUGEINT, amount DECIMAL(12,2), ratio DOUBLE, name VARCHAR, seen_at TIMESTAMP, ok BOOLEAN, raw BLOB)`,
		`INSERT INTO usage.t VALUES (9007199254740993, 170141183460469231731687303715884105727, 12.34, 0.5, 'a', TIMESTAMP '2026-03-10 14:05:06.123456', true, '\xAA'::BLOB), (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
	} {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	db.Close()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	old := Command
	Command = func(string, string) (*exec.Cmd, error) {
		cmd := exec.Command(self, "-test.run=^$")
		// A child that dies of SIGINT, so a cancelled call that reaches
		// it shows as a kill (TestCancelledQueryKillsTheChild).
		cmd.Env = append(os.Environ(), childEnv+"=1", "DW_TEST_CHILD_DIES_ON_SIGINT=1")
		return cmd, nil
	}
	t.Cleanup(func() { Command = old })
	w, err := Open(context.Background(), agentConfig(t), &config.Warehouse{Name: "t", Kind: "duckdb", Path: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w.(*Proxy)
}

// TestValuesKeepTheirTypes: integers beyond float precision, times, nulls,
// booleans and bytes come back as the driver gave them; decimals and huge
// integers as their exact text.
func TestValuesKeepTheirTypes(t *testing.T) {
	p := proxy(t)
	ctx := context.Background()
	res, err := p.Query(ctx, warehouse.Query{SQL: `SELECT id, big, amount, ratio, name, seen_at, ok, raw FROM usage.t ORDER BY id NULLS LAST`})
	if err != nil {
		t.Fatal(err)
	}
	row := res.Rows[0]
	if row[0] != int64(9007199254740993) {
		t.Errorf("bigint = %#v", row[0])
	}
	if s, _ := row[1].(string); s != "170141183460469231731687303715884105727" {
		t.Errorf("hugeint = %#v", row[1])
	}
	if s, _ := row[2].(string); !strings.HasPrefix(s, "12.34") {
		t.Errorf("decimal = %#v", row[2])
	}
	if row[3] != 0.5 || row[4] != "a" || row[6] != true {
		t.Errorf("double/varchar/bool = %#v %#v %#v", row[3], row[4], row[6])
	}
	if at, _ := row[5].(time.Time); !at.Equal(time.Date(2026, 3, 10, 14, 5, 6, 123456000, time.UTC)) {
		t.Errorf("timestamp = %#v", row[5])
	}
	if b, _ := row[7].([]byte); len(b) != 1 || b[0] != 0xAA {
		t.Errorf("blob = %#v", row[7])
	}
	for i, v := range res.Rows[1] {
		if v != nil {
			t.Errorf("null column %d came back as %#v", i, v)
		}
	}
	// Arguments cross too.
	res, err = p.Query(ctx, warehouse.Query{SQL: `SELECT count(*) FROM usage.t WHERE seen_at >= ?`, Args: []any{time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)}})
	if err != nil || res.Rows[0][0] != int64(1) {
		t.Fatalf("with args: %v %v", res, err)
	}
}

func TestCatalogAndErrors(t *testing.T) {
	p := proxy(t)
	ctx := context.Background()
	tab, err := warehouse.Resolve(ctx, p, "usage.t")
	if err != nil || len(tab.Columns) != 8 {
		t.Fatalf("resolve: %+v %v", tab, err)
	}
	if _, err := warehouse.Resolve(ctx, p, "usage.tt"); err == nil || !strings.Contains(err.Error(), "usage.t") {
		t.Errorf("unknown table: %v", err)
	}
	if _, err := p.Query(ctx, warehouse.Query{SQL: `SELECT nope FROM usage.t`}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("bad column: %v", err)
	}
	if _, err := p.Query(ctx, warehouse.Query{SQL: `DELETE FROM usage.t`}); err == nil {
		t.Error("a DELETE reached the warehouse process")
	}
	// A cancelled call ends the child; the next call starts a new one.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.ListTables(cctx); err == nil {
		t.Error("cancelled call succeeded")
	}
	if tables, err := p.ListTables(ctx); err != nil || len(tables) != 1 {
		t.Fatalf("after cancel: %v %v", tables, err)
	}
}

// TestServeOpensFromTheFirstFrameOnly: the child opens nothing until the
// agent's open frame, refuses any other first request (opening nothing),
// and opens exactly the warehouse the frame names.
func TestServeOpensFromTheFirstFrameOnly(t *testing.T) {
	var opened []Opening
	open := func(_ context.Context, o Opening) (warehouse.Warehouse, error) {
		opened = append(opened, o)
		return nil, errors.New("not opened in this test")
	}
	var out bytes.Buffer
	err := Serve(context.Background(), strings.NewReader(`{"op":"list"}`+"\n"), &out, open)
	var resp response
	if jerr := json.Unmarshal(out.Bytes(), &resp); err == nil || jerr != nil || !strings.Contains(resp.Error, "first request must be open") || len(opened) != 0 {
		t.Fatalf("a first request that is not open: %v, answer %+v (%v), opened %v", err, resp, jerr, opened)
	}
	frame := Opening{Warehouse: config.Warehouse{Name: "wh", Kind: "duckdb", Path: "/data/wh.duckdb"}, Home: "/data", Source: "/etc/dw.yaml"}
	line, _ := json.Marshal(request{Op: "open", Open: &frame})
	out.Reset()
	err = Serve(context.Background(), bytes.NewReader(append(line, '\n')), &out, open)
	resp = response{}
	if jerr := json.Unmarshal(out.Bytes(), &resp); err == nil || jerr != nil || resp.Error != "not opened in this test" {
		t.Fatalf("an open that fails: %v, answer %+v (%v); want the opener's error", err, resp, jerr)
	}
	if len(opened) != 1 || !reflect.DeepEqual(opened[0], frame) {
		t.Fatalf("opened %+v, want the frame %+v", opened, frame)
	}
	if cfg := opened[0].Config(); cfg.EmbeddedDefault() || cfg.Home != "/data" || len(cfg.Warehouses) != 1 || cfg.Warehouses[0].Path != "/data/wh.duckdb" {
		t.Fatalf("the child's configuration %+v", cfg)
	}
	if (Opening{}).Config().EmbeddedDefault() != true {
		t.Fatal("a frame without a source is not the embedded default")
	}
}

// TestOpenFailureReachesTheAgent: a child that cannot open its warehouse
// answers why, and the agent's call fails with the driver's words, not
// with a child that exited, on every call.
func TestOpenFailureReachesTheAgent(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	old := Command
	Command = func(string, string) (*exec.Cmd, error) {
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=1")
		return cmd, nil
	}
	t.Cleanup(func() { Command = old })
	wc := sfSection("sf")
	wc.PasswordEnv = "DW_TEST_UNSET_SF_PASSWORD"
	w, err := Open(context.Background(), agentConfig(t), &wc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// The child answers and exits at once: every call starts one, and
	// each must still read its answer before the pipe goes (Wait used to
	// close it under the reader, and the call failed with "file already
	// closed" instead of the driver's words).
	for i := 0; i < 40; i++ {
		_, err = w.ListTables(context.Background())
		if err == nil || !strings.Contains(err.Error(), "DW_TEST_UNSET_SF_PASSWORD is empty") {
			t.Fatalf("call %d listing through a child that cannot open: %v; want the driver's error naming the variable", i, err)
		}
	}
}

// TestCommandPicksTheChildByKind: an agent's warehouses of each kind are
// served by dw-warehouse-<kind>, found beside the agent's executable;
// where it is missing, the error names the binary to build, and a kind
// no child serves is refused with the valid ones.
func TestCommandPicksTheChildByKind(t *testing.T) {
	for _, kind := range Kinds() {
		_, err := Command("wh", kind)
		if err == nil || !strings.Contains(err.Error(), "no "+ChildPrefix+kind+" binary in") || !strings.Contains(err.Error(), "make build") {
			t.Fatalf("kind %s beside a test binary: %v; want an error naming %s and make build", kind, err, ChildPrefix+kind)
		}
	}
	dir := t.TempDir()
	for _, kind := range Kinds() {
		if err := os.WriteFile(filepath.Join(dir, ChildPrefix+kind), nil, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, kind := range Kinds() {
		cmd, err := childIn(dir, kind)
		if want := []string{filepath.Join(dir, ChildPrefix+kind)}; err != nil || !slices.Equal(cmd.Args, want) {
			t.Fatalf("kind %s: %v, %v; want %v", kind, cmd, err, want)
		}
	}
	for _, kind := range []string{"", "postgres", "../duckdb", "duckdb/../../bin/sh"} {
		if cmd, err := childIn(dir, kind); err == nil || cmd != nil || !strings.Contains(err.Error(), "valid: duckdb, bigquery, snowflake") {
			t.Fatalf("kind %q: %v, %v; want an error listing the valid kinds", kind, cmd, err)
		}
	}
}

// TestAGrandchildHoldingThePipeDoesNotHoldTheCall: a child that exits
// while a process it started still holds its stdout (the answers' pipe)
// fails the call soon after it exits, whether the call waited for an
// answer or was cancelled; it does not wait for the grandchild, with the
// proxy's lock held and every later call behind it.
func TestAGrandchildHoldingThePipeDoesNotHoldTheCall(t *testing.T) {
	dir := t.TempDir()
	n := 0
	old := Command
	Command = func(string, string) (*exec.Cmd, error) {
		n++
		pidFile := filepath.Join(dir, fmt.Sprintf("grandchild%d", n))
		t.Cleanup(func() {
			if b, err := os.ReadFile(pidFile); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
		// The first child exits after reading the open frame; the second
		// never answers, so its call is cancelled. Both leave a sleep
		// behind that inherited their stdout.
		script := "sleep 60 & echo $! >" + pidFile + "; read line; exit 1"
		if n > 1 {
			script = "sleep 60 & echo $! >" + pidFile + "; read line; exec sleep 60"
		}
		return exec.Command("/bin/sh", "-c", script), nil
	}
	t.Cleanup(func() { Command = old })
	w, err := Open(context.Background(), agentConfig(t), &config.Warehouse{Name: "wh", Kind: "duckdb", Path: filepath.Join(dir, "x.duckdb")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Bounds far above the drain (1 s) and the cancel grace (2 s), far
	// below the grandchildren's 60 s: this is about not hanging.
	t0 := time.Now()
	if _, err := w.ListTables(context.Background()); err == nil || time.Since(t0) > 20*time.Second {
		t.Fatalf("a child that exited without answering: %v after %s; want an error well before its grandchild exits", err, time.Since(t0))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	t0 = time.Now()
	if _, err := w.ListTables(ctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > 20*time.Second {
		t.Fatalf("a call cancelled on a child that never answers: %v after %s; want the deadline well before its grandchild exits", err, time.Since(t0))
	}
}
