package warehouseproc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// TestMain doubles as the child: with DW_TEST_WAREHOUSE set, this test
// binary serves that DuckDB file, as `dw warehouse serve` does.
func TestMain(m *testing.M) {
	if os.Getenv(bqChildEnv) != "" {
		os.Exit(serveBigQueryChild())
	}
	if path := os.Getenv("DW_TEST_WAREHOUSE"); path != "" {
		w, err := duckdb.Open("t", path, 5*time.Second)
		if err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(1)
		}
		if err := Serve(context.Background(), os.Stdin, os.Stdout, w); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
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
	Command = func(string) (*exec.Cmd, error) {
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), "DW_TEST_WAREHOUSE="+path)
		return cmd, nil
	}
	t.Cleanup(func() { Command = old })
	w, err := Open(context.Background(), nil, &config.Warehouse{Name: "t", Kind: "duckdb"}, nil)
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
