package duckdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/warehouse"
)

// escapeFixture is a warehouse file next to files it must never reach: a
// secret holding a random marker, a second store-like file with it too, and
// an HTTP server that counts requests and would answer with the marker.
type escapeFixture struct {
	dir, whPath, secret, store, url string
	marker                          string
	hits                            *atomic.Int64
	wh                              *Warehouse
}

func newEscapeFixture(t *testing.T) *escapeFixture {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	f := &escapeFixture{dir: t.TempDir(), marker: "MARKER" + hex.EncodeToString(b), hits: &atomic.Int64{}}
	f.whPath = filepath.Join(f.dir, "wh.duckdb")
	f.secret = filepath.Join(f.dir, "secret.csv")
	f.store = filepath.Join(f.dir, "store.db")
	// CSV-shaped, so read_csv would parse it and a number check on the
	// text would quote it, as the reported exploit did.
	if err := os.WriteFile(f.secret, []byte("value\n"+f.marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.store, []byte("SQLite format 3\x00"+f.marker), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		fmt.Fprintf(w, "value\n%s\n", f.marker)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL + "/x.csv"

	db, err := OpenWrite(context.Background(), f.whPath, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`CREATE SCHEMA loyalty`,
		`CREATE TABLE loyalty.balances AS SELECT i AS member_id, 400 + i % 100 AS balance FROM range(100) t(i)`,
		// A view over a table function, made by whoever loaded the file
		// (external access is on for the loader): reading it must fail.
		fmt.Sprintf(`CREATE VIEW loyalty.leak AS SELECT content FROM read_text('%s')`, f.secret),
	} {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	f.wh, err = Open("demo", f.whPath, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Error phrases a refusal carries.
const (
	external   = "file and network access are disabled"
	onlySelect = "only a single SELECT is accepted"
)

// escape is one way out.
type escape struct{ name, sql, want string }

// atRun are reads DuckDB makes only when the statement runs (sniff_csv
// opens its file late): ValidateQuery, which plans but never runs, sees a
// SELECT; the locked connection refuses them when Query runs them.
var atRun = map[string]bool{"sniff_csv": true}

func (f *escapeFixture) escapes() []escape {
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	return []escape{
		{"read_text", "SELECT content AS value FROM read_text(" + q(f.secret) + ")", external},
		{"read_text upper case", "SELECT content AS value FROM READ_TEXT(" + q(f.secret) + ")", external},
		{"read_text quoted name", `SELECT content AS value FROM "read_text"(` + q(f.secret) + ")", external},
		{"read_text list of files", "SELECT content AS value FROM read_text([" + q(f.secret) + "])", external},
		{"read_text in FROM-first form", "FROM read_text(" + q(f.secret) + ") SELECT content AS value", external},
		{"read_text in a scalar subquery", "SELECT (SELECT content FROM read_text(" + q(f.secret) + ")) AS value", external},
		{"read_text in a CTE", "WITH s AS (SELECT content FROM read_text(" + q(f.secret) + ")) SELECT content AS value FROM s", external},
		{"read_text through query()", "SELECT * FROM query(" + q("SELECT content AS value FROM read_text("+q(f.secret)+")") + ")", external},
		{"/etc/passwd", "SELECT content AS value FROM read_text('/etc/passwd')", external},
		{"read_csv", "SELECT value FROM read_csv(" + q(f.secret) + ")", external},
		{"read_csv_auto", "SELECT value FROM read_csv_auto(" + q(f.secret) + ")", external},
		{"read_json", "SELECT * FROM read_json(" + q(f.secret) + ")", external},
		{"sniff_csv", "SELECT * FROM sniff_csv(" + q(f.secret) + ")", external},
		{"read_blob", "SELECT content AS value FROM read_blob(" + q(f.secret) + ")", external},
		{"read_blob of the store file", "SELECT content AS value FROM read_blob(" + q(f.store) + ")", external},
		{"read_blob of the warehouse file itself", "SELECT content AS value FROM read_blob(" + q(f.whPath) + ")", external},
		{"read_parquet", "SELECT * FROM read_parquet(" + q(f.secret) + ")", external},
		{"glob", "SELECT file AS value FROM glob(" + q(f.dir+"/*") + ")", external},
		{"a file named as a table", "SELECT * FROM " + q(f.secret), ""},
		{"an http URL", "SELECT value FROM read_csv(" + q(f.url) + ")", external},
		{"an http URL as a table", "SELECT * FROM " + q(f.url), ""},
		{"a view over read_text", "SELECT content AS value FROM loyalty.leak", external},
		{"COPY TO", "COPY loyalty.balances TO " + q(filepath.Join(f.dir, "out.csv")), onlySelect},
		{"COPY query TO", "COPY (SELECT content FROM read_text(" + q(f.secret) + ")) TO " + q(filepath.Join(f.dir, "out2.csv")), ""},
		{"ATTACH", "ATTACH " + q(f.store) + " AS s", ""},
		{"INSTALL", "INSTALL httpfs", onlySelect},
		{"LOAD", "LOAD httpfs", onlySelect},
		{"a second statement", "SELECT 1 AS value; SELECT content FROM read_text(" + q(f.secret) + ")", onlySelect},
		{"a second statement that writes", "SELECT 1 AS value; COPY loyalty.balances TO " + q(filepath.Join(f.dir, "out3.csv")), onlySelect},
		{"a second statement after a comment", "SELECT 1 AS value /* ; */; CREATE TABLE loyalty.x AS SELECT 1", onlySelect},
		{"SET", "SET enable_external_access = true", onlySelect},
		{"SET lock_configuration", "SET lock_configuration = false", onlySelect},
		{"RESET", "RESET enable_external_access", onlySelect},
		{"PRAGMA", "PRAGMA enable_profiling", onlySelect},
		{"PRAGMA rewritten to a SELECT", "PRAGMA table_info('loyalty.balances')", onlySelect},
		{"CALL", "CALL pragma_table_info('loyalty.balances')", onlySelect},
		{"CREATE TABLE", "CREATE TABLE loyalty.x AS SELECT 1 AS value", onlySelect},
		{"CREATE VIEW", "CREATE VIEW loyalty.y AS SELECT content FROM read_text(" + q(f.secret) + ")", ""},
		{"EXPORT DATABASE", "EXPORT DATABASE " + q(filepath.Join(f.dir, "export")), onlySelect},
		{"EXPLAIN", "EXPLAIN SELECT content FROM read_text(" + q(f.secret) + ")", ""},
		{"DELETE", "DELETE FROM loyalty.balances", onlySelect},
		{"DETACH", "DETACH wh", onlySelect},
	}
}

// TestSQLCannotLeaveTheWarehouse: every way out is refused, by both the
// validation and the query path, and no byte of what lies outside (the
// marker) appears in an error or a result, nor does the HTTP server see a
// request, nor is a file written.
func TestSQLCannotLeaveTheWarehouse(t *testing.T) {
	f := newEscapeFixture(t)
	ctx := context.Background()
	for _, c := range f.escapes() {
		t.Run(c.name, func(t *testing.T) {
			res, qerr := f.wh.Query(ctx, warehouse.Query{SQL: c.sql})
			checked := map[string]error{"Query": qerr}
			if verr := f.wh.ValidateQuery(ctx, c.sql); !atRun[c.name] || verr != nil {
				checked["ValidateQuery"] = verr
			}
			for what, err := range checked {
				if err == nil {
					t.Fatalf("%s accepted %q", what, c.sql)
				}
				if !errors.Is(err, warehouse.ErrRefused) {
					t.Errorf("%s: %v is not a refusal", what, err)
				}
				if c.want != "" && !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s: %q does not say %q", what, err, c.want)
				}
				if strings.Contains(err.Error(), f.marker) || strings.Contains(err.Error(), f.marker[:12]) {
					t.Errorf("%s: the error carries the secret: %q", what, err)
				}
			}
			if res != nil {
				t.Errorf("Query returned rows %v", res.Rows)
			}
		})
	}
	if n := f.hits.Load(); n != 0 {
		t.Errorf("the HTTP server was asked %d times", n)
	}
	for _, p := range []string{"out.csv", "out2.csv", "out3.csv", "export"} {
		if _, err := os.Stat(filepath.Join(f.dir, p)); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	// The warehouse is unchanged: no table was created.
	tables, err := f.wh.ListTables(ctx)
	if err != nil || len(tables) != 2 {
		t.Errorf("tables after the escapes: %v %v", tables, err)
	}
}

// TestRefusalsNameWhatWasFound: the messages say what the engine saw.
func TestRefusalsNameWhatWasFound(t *testing.T) {
	f := newEscapeFixture(t)
	ctx := context.Background()
	for sql, want := range map[string]string{
		"COPY loyalty.balances TO '/tmp/x.csv'": `found "COPY loyalty.balances TO '/tmp/x.csv'", which is not a SELECT`,
		"INSTALL httpfs":                        `found "INSTALL httpfs" (statement type LOAD)`,
		"PRAGMA table_info('loyalty.balances')": "(statement type SELECT)",
		"LOAD httpfs":                           "(statement type LOAD)",
		"SET threads = 1":                       "(statement type SET)",
		"SELECT 1; SELECT 2":                    "found 2 statements",
		"SELECT 1; DROP TABLE loyalty.balances": "found more than one statement",
		"SELEC 1":                               `the SQL does not parse: syntax error at or near "SELEC"`,
		"   ":                                   "the SQL is empty",
		"SELECT nope FROM loyalty.balances":     `"nope" not found`,
	} {
		err := f.wh.ValidateQuery(ctx, sql)
		if err == nil || !errors.Is(err, warehouse.ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want a refusal saying %q", sql, err, want)
		}
	}
}

// TestQueriesInsideTheWarehouseStillRun: the lockdown leaves ordinary
// reads alone, the file opens with external access off, and arguments,
// CTEs, FROM-first queries and comments work.
func TestQueriesInsideTheWarehouseStillRun(t *testing.T) {
	f := newEscapeFixture(t)
	ctx := context.Background()
	for sql, want := range map[string]int64{
		"SELECT count(*) FROM loyalty.balances":                                       100,
		"SELECT count(*) FROM loyalty.balances;":                                      100,
		"-- a comment first\nSELECT count(*) FROM loyalty.balances":                   100,
		"WITH b AS (SELECT * FROM loyalty.balances) SELECT count(*) FROM b":           100,
		"FROM loyalty.balances SELECT count(*)":                                       100,
		"SELECT count(*) FROM loyalty.balances WHERE note IS NULL OR true":            -1,
		"SELECT count(*) FROM (SELECT 'a;b' AS s) t":                                  1,
		"SELECT count(*) FROM information_schema.tables WHERE table_schema='loyalty'": 2,
	} {
		if err := f.wh.ValidateQuery(ctx, sql); (err == nil) != (want >= 0) {
			t.Errorf("validate %q: %v", sql, err)
			continue
		}
		if want < 0 {
			continue
		}
		res, err := f.wh.Query(ctx, warehouse.Query{SQL: sql})
		if err != nil || len(res.Rows) != 1 || res.Rows[0][0] != want {
			t.Errorf("%q: %v %v; want %d", sql, res, err, want)
		}
	}
	res, err := f.wh.Query(ctx, warehouse.Query{SQL: "SELECT count(*) FROM loyalty.balances WHERE balance >= ?", Args: []any{450}})
	if err != nil || res.Rows[0][0] != int64(50) {
		t.Fatalf("with an argument: %v %v", res, err)
	}
}

// TestConfigurationIsLocked is the proof that a statement cannot turn the
// settings back: on a raw locked connection (no statement check in the
// way) every SET is refused by DuckDB itself, and the settings read back
// as locked down.
func TestConfigurationIsLocked(t *testing.T) {
	f := newEscapeFixture(t)
	ctx := context.Background()
	db, err := openLocked(ctx, f.whPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// A connection made after the instance's first (the one each request
	// gets from the held instance) is as locked as the first.
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, stmt := range []string{
		"SET enable_external_access = true",
		"SET lock_configuration = false",
		"RESET lock_configuration",
		"SET disabled_filesystems = ''",
		"SET autoinstall_known_extensions = true",
		"SET autoload_known_extensions = true",
		"SET allow_community_extensions = true",
		"SET GLOBAL enable_external_access = true",
	} {
		if _, err := conn.ExecContext(ctx, stmt); err == nil || !strings.Contains(err.Error(), "locked") {
			t.Errorf("%s: %v; want DuckDB to refuse it as locked", stmt, err)
		}
	}
	var ext, inst, load, comm, lock string
	err = conn.QueryRowContext(ctx, `SELECT current_setting('enable_external_access')::VARCHAR, current_setting('autoinstall_known_extensions')::VARCHAR,
		current_setting('autoload_known_extensions')::VARCHAR, current_setting('allow_community_extensions')::VARCHAR,
		current_setting('lock_configuration')::VARCHAR`).Scan(&ext, &inst, &load, &comm, &lock)
	if err != nil {
		t.Fatal(err)
	}
	if ext != "false" || inst != "false" || load != "false" || comm != "false" || lock != "true" {
		t.Errorf("settings: external access %s, autoinstall %s, autoload %s, community %s, locked %s", ext, inst, load, comm, lock)
	}
	// Even unchecked, the raw connection cannot read the secret.
	var content string
	err = conn.QueryRowContext(ctx, "SELECT content FROM read_text(?)", f.secret).Scan(&content)
	if err == nil || strings.Contains(content, f.marker) {
		t.Errorf("raw read_text: %q %v", content, err)
	}
}

// TestSecondConnectionSharesTheLock: connections to one file in one
// process share a DuckDB instance; one opened while another holds the
// already-locked instance is locked down too.
func TestSecondConnectionSharesTheLock(t *testing.T) {
	f := newEscapeFixture(t)
	ctx := context.Background()
	db, err := openLocked(ctx, f.whPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// A connection made after the instance's first (the one each request
	// gets from the held instance) is as locked as the first.
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res, err := f.wh.Query(ctx, warehouse.Query{SQL: "SELECT count(*) FROM loyalty.balances"})
	if err != nil || res.Rows[0][0] != int64(100) {
		t.Fatalf("second connection: %v %v", res, err)
	}
	err = f.wh.ValidateQuery(ctx, "SELECT content FROM read_text('"+f.secret+"')")
	if !errors.Is(err, warehouse.ErrRefused) || !strings.Contains(err.Error(), external) {
		t.Fatalf("second connection read_text: %v", err)
	}
}
