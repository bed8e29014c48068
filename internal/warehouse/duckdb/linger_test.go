package duckdb

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/warehouse"
)

// TestInstanceLingersThenLetsAWriterIn: requests in a row share one open
// instance; once Linger passes without a request it is closed, so a
// writer waiting for the file gets it, and the next read opens the file
// again and sees what the writer wrote.
func TestInstanceLingersThenLetsAWriterIn(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "wh.duckdb")
	db, err := OpenWrite(ctx, path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t AS SELECT range AS id FROM range(10)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	w, err := Open("t", path, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	count := func() int64 {
		t.Helper()
		res, err := w.Query(ctx, warehouse.Query{SQL: "SELECT count(*) FROM t"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Rows[0][0].(int64)
	}
	if n := count(); n != 10 {
		t.Fatalf("count = %d", n)
	}
	if !w.Open() {
		t.Fatal("the instance was closed right after a request; it should linger for the next")
	}
	if _, err := w.ListTables(ctx); err != nil || !w.Open() {
		t.Fatalf("a second request: %v (open %v)", err, w.Open())
	}

	// The writer retries while the reader holds the file; the reader lets
	// go after Linger, well inside the writer's wait.
	t0 := time.Now()
	db, err = OpenWrite(ctx, path, 10*Linger)
	if err != nil {
		t.Fatalf("writer after %s: %v", time.Since(t0), err)
	}
	if w.Open() {
		t.Error("a writer holds the file, yet the reader's instance is open")
	}
	if _, err := db.Exec(`INSERT INTO t SELECT range FROM range(5)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if n := count(); n != 15 {
		t.Fatalf("after the write, count = %d; want 15", n)
	}
	if err := w.Close(); err != nil || w.Open() {
		t.Fatalf("Close: %v (open %v)", err, w.Open())
	}
}
