// Package duckdb is the embedded default warehouse: a DuckDB file read by
// every agent at once.
//
// DuckDB lets many processes open a file READ_ONLY together, but a
// read-write open fails while any reader holds it (and the reverse). So
// readers hold the file only while they are busy: one DuckDB instance is
// opened read-only on a request and kept for the requests that follow
// within Linger (a tool call makes several: list, describe, scan), then
// closed; the loader (dw demo load) opens it read-write briefly and
// retries while readers hold it, for longer than Linger. Each request
// still gets a fresh connection, so nothing a statement leaves on a
// connection reaches the next request.
//
// SQL cannot leave the warehouse. DuckDB can read any file the process can
// (read_text, read_csv, glob, ATTACH, COPY), fetch URLs and install
// extensions; a read-only open stops none of that. So every agent
// connection is opened with external access, extension auto-install and
// auto-load and community extensions off (lockdownDSN, applied before the
// file is opened, which DuckDB still allows for the database file itself),
// then the local file system is disabled outright (so not even the
// warehouse file can be read raw with read_blob) and the configuration is
// locked, so no statement can turn any of it back on. On top, every
// statement must be, in DuckDB's own parser's and planner's judgement, one
// SELECT (checkStatement).
package duckdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/duckdb/duckdb-go/v2" // also registers the "duckdb" database/sql driver

	"github.com/dataworkers/dw/internal/warehouse"
)

// lockdownDSN are the settings DuckDB applies as it opens the file.
const lockdownDSN = "access_mode=READ_ONLY" +
	"&enable_external_access=false" +
	"&autoinstall_known_extensions=false" +
	"&autoload_known_extensions=false" +
	"&allow_community_extensions=false"

// lockdownSQL runs on each new connection, in order. disabled_filesystems
// cannot be given at open (DuckDB refuses it there, and the file must open
// first), and lock_configuration must come last: after it no SET succeeds.
var lockdownSQL = []string{
	"SET disabled_filesystems = 'LocalFileSystem'",
	"SET lock_configuration = true",
}

// ExternalAccessDisabled is how a refused file, URL or extension reads:
// never the engine's own message, which may name what it touched.
const ExternalAccessDisabled = "file and network access are disabled for warehouse SQL: only the warehouse's own tables can be read (no read_text, read_csv, read_blob, read_parquet, glob, URLs, ATTACH, COPY or extensions)"

// Linger is how long an opened DuckDB instance is kept after its last
// request. Opening one costs about 10-20 ms and, with the catalog read
// again, more for each table a request lists or describes; a writer waits
// for the readers to let go, so this stays far below its wait (15 s).
const Linger = time.Second

// Warehouse is a DuckDB file, opened read-only while requests come.
type Warehouse struct {
	name    string
	path    string
	timeout time.Duration

	mu sync.Mutex
	// db is the open instance, nil when closed; users counts the requests
	// using it, and idle closes it once Linger has passed with none.
	db    *sql.DB
	users int
	used  uint64
	idle  *time.Timer
}

// Open returns a warehouse over the DuckDB file at path. The file must
// exist: agents never create or write it.
func Open(name, path string, timeout time.Duration) (*Warehouse, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("DuckDB warehouse %s: %w", name, err)
	}
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	return &Warehouse{name: name, path: path, timeout: timeout}, nil
}

// Name is the configured name.
func (w *Warehouse) Name() string { return w.name }

// Path is the DuckDB file.
func (w *Warehouse) Path() string { return w.path }

// Dialect is DuckDB's.
func (w *Warehouse) Dialect() warehouse.Dialect { return warehouse.DuckDB{} }

// Close closes the instance if one is open; the next request opens it
// again.
func (w *Warehouse) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.idle != nil {
		w.idle.Stop()
	}
	if w.db == nil {
		return nil
	}
	db := w.db
	w.db = nil
	return db.Close()
}

// Open reports whether a DuckDB instance is open now (held between
// requests for Linger).
func (w *Warehouse) Open() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.db != nil
}

// withConn runs fn on a fresh connection, locked down, to the instance
// held open on the file read-only (opened now if none is). A writer
// holding the file (the loader, briefly) makes the open fail; we retry for
// a short while rather than fail a read that would succeed a moment later.
func (w *Warehouse) withConn(ctx context.Context, fn func(conn *sql.Conn) error) error {
	db, err := w.acquire(ctx)
	if err != nil {
		return err
	}
	defer w.release()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect to DuckDB warehouse %s (%s): %w", w.name, w.path, err)
	}
	defer conn.Close()
	return fn(conn)
}

// acquire returns the open instance, opening it if none is, and counts a
// user so it is not closed under the request.
func (w *Warehouse) acquire(ctx context.Context) (*sql.DB, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.db == nil {
		var lastErr error
		for attempt := 0; attempt < 20 && w.db == nil; attempt++ {
			db, err := openLocked(ctx, w.path)
			if err == nil {
				w.db = db
				break
			}
			lastErr = err
			if !isLockConflict(err) {
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		if w.db == nil {
			return nil, fmt.Errorf("open DuckDB warehouse %s (%s) read-only: %w", w.name, w.path, lastErr)
		}
	}
	w.users++
	w.used++
	if w.idle != nil {
		w.idle.Stop()
	}
	return w.db, nil
}

// release ends a request; the last one out starts the Linger countdown,
// after which the instance is closed unless a request came meanwhile.
func (w *Warehouse) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.users--
	if w.users > 0 || w.db == nil {
		return
	}
	n := w.used
	w.idle = time.AfterFunc(Linger, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.users > 0 || w.used != n || w.db == nil {
			return
		}
		w.db.Close()
		w.db = nil
	})
}

// openLocked opens path with lockdownDSN, as one instance whose every
// connection runs lockdownSQL and is verified before use, and checks that
// a first connection can be made. Connections are not pooled between
// requests.
func openLocked(ctx context.Context, path string) (*sql.DB, error) {
	c, err := duckdb.NewConnector(path+"?"+lockdownDSN, lockDown)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	db.SetMaxIdleConns(0)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	conn.Close()
	return db, nil
}

// lockDown is the connector's init: it runs lockdownSQL, then checks that
// the settings hold. Connections to one file in one process share a
// DuckDB instance, whose configuration an earlier connection may already
// have locked; then the SETs fail with "locked" and the check decides.
func lockDown(ex driver.ExecerContext) error {
	ctx := context.Background()
	for _, stmt := range lockdownSQL {
		if _, err := ex.ExecContext(ctx, stmt, nil); err != nil {
			if strings.Contains(err.Error(), "configuration has been locked") {
				break
			}
			return fmt.Errorf("secure the DuckDB connection: %w", err)
		}
	}
	q, ok := ex.(driver.QueryerContext)
	if !ok {
		return errors.New("secure the DuckDB connection: the driver cannot read settings back")
	}
	rows, err := q.QueryContext(ctx, `SELECT current_setting('enable_external_access')::VARCHAR,
		current_setting('autoinstall_known_extensions')::VARCHAR, current_setting('autoload_known_extensions')::VARCHAR,
		current_setting('allow_community_extensions')::VARCHAR, current_setting('lock_configuration')::VARCHAR`, nil)
	if err != nil {
		return fmt.Errorf("secure the DuckDB connection: %w", err)
	}
	defer rows.Close()
	vals := make([]driver.Value, 5)
	if err := rows.Next(vals); err != nil {
		return fmt.Errorf("secure the DuckDB connection: %w", err)
	}
	want := []string{"false", "false", "false", "false", "true"}
	for i, v := range vals {
		if fmt.Sprint(v) != want[i] {
			return fmt.Errorf("secure the DuckDB connection: settings read back as %v, want %v; refusing to run SQL on it", vals, want)
		}
	}
	return nil
}

// isLockConflict says another open holds the file: another process's
// (a lock), or, in this process, a reader's instance a writer waits for
// (DuckDB refuses a second instance of one file with other settings).
func isLockConflict(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "lock") || strings.Contains(msg, "conflicting") || strings.Contains(msg, "different configuration")
}

// serialized is json_serialize_sql's answer: the parse tree of SELECT
// statements, or why there is none.
type serialized struct {
	Error        bool              `json:"error"`
	ErrorType    string            `json:"error_type"`
	ErrorMessage string            `json:"error_message"`
	Statements   []json.RawMessage `json:"statements"`
}

// checkStatement is DuckDB's own judgement that sqlText is one SELECT,
// made without running it. Two views agree or the statement is refused:
// the parser (json_serialize_sql parses without binding and serializes
// only SELECT statements, so it counts statements and refuses PRAGMA, SET,
// COPY, ATTACH, INSTALL…), and the planner (a prepared statement, which
// the driver makes only from a single statement and never executes, and
// whose statement type must be SELECT). Preparing also binds the table
// functions, and most open their file or URL then, so those are refused
// here by the locked connection; the few that open late (sniff_csv) are
// refused by it when they run.
func checkStatement(ctx context.Context, conn *sql.Conn, sqlText string) error {
	var doc string
	if err := conn.QueryRowContext(ctx, `SELECT json_serialize_sql(?::VARCHAR)::VARCHAR`, sqlText).Scan(&doc); err != nil {
		return fmt.Errorf("check the statement: %w", err)
	}
	var parsed serialized
	if err := json.Unmarshal([]byte(doc), &parsed); err != nil {
		return fmt.Errorf("check the statement: DuckDB's parse tree is not JSON: %w", err)
	}
	switch {
	case parsed.Error && parsed.ErrorType == "parser":
		return warehouse.Refused("the SQL does not parse: %s", parsed.ErrorMessage)
	case !parsed.Error && len(parsed.Statements) == 0:
		return warehouse.Refused("the SQL is empty: give a single SELECT")
	case !parsed.Error && len(parsed.Statements) > 1:
		return warehouse.Refused("only a single SELECT is accepted; found %d statements", len(parsed.Statements))
	}
	typ, err := statementType(conn, sqlText)
	if parsed.Error {
		// The parser already says this is not a SELECT. The planner's
		// type names it when it can be planned at all; a COPY to a file
		// cannot be on this connection, and is refused just the same.
		switch {
		case err == nil:
			return warehouse.Refused("only a single SELECT is accepted; found %s (statement type %s)", opening(sqlText), typeName(typ))
		case strings.Contains(err.Error(), "multi-statement"):
			return warehouse.Refused("only a single SELECT is accepted; found more than one statement")
		}
		return warehouse.Refused("only a single SELECT is accepted; found %s, which is not a SELECT", opening(sqlText))
	}
	if err != nil {
		return refusal(err)
	}
	if typ != duckdb.STATEMENT_TYPE_SELECT {
		return warehouse.Refused("only a single SELECT is accepted; found %s (statement type %s)", opening(sqlText), typeName(typ))
	}
	return nil
}

// statementType prepares sqlText and reads the statement type DuckDB's
// planner gives it. Prepare, unlike PrepareContext, refuses several
// statements instead of running all but the last, and a prepared
// statement is closed unexecuted.
func statementType(conn *sql.Conn, sqlText string) (duckdb.StmtType, error) {
	var typ duckdb.StmtType
	err := conn.Raw(func(dc any) error {
		c, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("unexpected DuckDB connection %T", dc)
		}
		st, err := c.Prepare(sqlText)
		if err != nil {
			return err
		}
		defer st.Close()
		ds, ok := st.(*duckdb.Stmt)
		if !ok {
			return fmt.Errorf("unexpected DuckDB statement %T", st)
		}
		typ, err = ds.StatementType()
		return err
	})
	return typ, err
}

// refusal words an engine error about the statement. A permission error
// becomes ExternalAccessDisabled whole: DuckDB's message names the file or
// URL, and an error about a refused read must not carry anything from it.
func refusal(err error) error {
	var de *duckdb.Error
	if errors.As(err, &de) && de.Type == duckdb.ErrorTypePermission || strings.Contains(err.Error(), "disabled by configuration") {
		return warehouse.Refused("%s", ExternalAccessDisabled)
	}
	if strings.Contains(err.Error(), "multi-statement") {
		return warehouse.Refused("only a single SELECT is accepted; found more than one statement")
	}
	if errors.As(err, &de) {
		return warehouse.Refused("%s", de.Msg)
	}
	return err
}

// opening is the start of a statement, for a message: enough to recognise
// it, never the whole of a long text.
func opening(sqlText string) string {
	s := strings.Join(strings.Fields(sqlText), " ")
	if r := []rune(s); len(r) > 40 {
		s = string(r[:40]) + "…"
	}
	return fmt.Sprintf("%q", s)
}

var typeNames = map[duckdb.StmtType]string{
	duckdb.STATEMENT_TYPE_SELECT: "SELECT", duckdb.STATEMENT_TYPE_INSERT: "INSERT", duckdb.STATEMENT_TYPE_UPDATE: "UPDATE",
	duckdb.STATEMENT_TYPE_EXPLAIN: "EXPLAIN", duckdb.STATEMENT_TYPE_DELETE: "DELETE", duckdb.STATEMENT_TYPE_PREPARE: "PREPARE",
	duckdb.STATEMENT_TYPE_CREATE: "CREATE", duckdb.STATEMENT_TYPE_EXECUTE: "EXECUTE", duckdb.STATEMENT_TYPE_ALTER: "ALTER",
	duckdb.STATEMENT_TYPE_TRANSACTION: "TRANSACTION", duckdb.STATEMENT_TYPE_COPY: "COPY", duckdb.STATEMENT_TYPE_ANALYZE: "ANALYZE",
	duckdb.STATEMENT_TYPE_VARIABLE_SET: "SET VARIABLE", duckdb.STATEMENT_TYPE_CREATE_FUNC: "CREATE FUNCTION",
	duckdb.STATEMENT_TYPE_DROP: "DROP", duckdb.STATEMENT_TYPE_EXPORT: "EXPORT", duckdb.STATEMENT_TYPE_PRAGMA: "PRAGMA",
	duckdb.STATEMENT_TYPE_VACUUM: "VACUUM", duckdb.STATEMENT_TYPE_CALL: "CALL", duckdb.STATEMENT_TYPE_SET: "SET",
	duckdb.STATEMENT_TYPE_LOAD: "LOAD", duckdb.STATEMENT_TYPE_RELATION: "RELATION", duckdb.STATEMENT_TYPE_EXTENSION: "EXTENSION",
	duckdb.STATEMENT_TYPE_LOGICAL_PLAN: "LOGICAL PLAN", duckdb.STATEMENT_TYPE_ATTACH: "ATTACH", duckdb.STATEMENT_TYPE_DETACH: "DETACH",
	duckdb.STATEMENT_TYPE_MULTI: "MULTI",
}

func typeName(t duckdb.StmtType) string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("#%d", t)
}

// ValidateQuery checks sqlText with checkStatement on a locked connection
// to the file, so the tables it names must exist. Nothing runs.
func (w *Warehouse) ValidateQuery(ctx context.Context, sqlText string) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	return w.withConn(ctx, func(conn *sql.Conn) error { return checkStatement(ctx, conn, sqlText) })
}

// Query runs one SELECT with the warehouse's timeout, after
// checkStatement on the same locked connection.
func (w *Warehouse) Query(ctx context.Context, q warehouse.Query) (*warehouse.Result, error) {
	timeout := w.timeout
	if q.Timeout > 0 {
		timeout = q.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var res *warehouse.Result
	err := w.withConn(ctx, func(conn *sql.Conn) error {
		if err := checkStatement(ctx, conn, q.SQL); err != nil {
			return err
		}
		rows, err := conn.QueryContext(ctx, q.SQL, q.Args...)
		if err != nil {
			return runError(err)
		}
		defer rows.Close()
		res, err = warehouse.ScanRows(rows)
		return runError(err)
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("query on %s timed out after %s", w.name, timeout)
	}
	return res, err
}

// runError keeps a permission error met while running (a table function
// that opens its file late) from carrying DuckDB's message.
func runError(err error) error {
	if err == nil {
		return nil
	}
	var de *duckdb.Error
	if errors.As(err, &de) && de.Type == duckdb.ErrorTypePermission || strings.Contains(err.Error(), "disabled by configuration") {
		return warehouse.Refused("%s", ExternalAccessDisabled)
	}
	return err
}

// ListTables lists base tables and views outside the system schemas.
func (w *Warehouse) ListTables(ctx context.Context) ([]warehouse.TableRef, error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	var out []warehouse.TableRef
	err := w.withConn(ctx, func(conn *sql.Conn) error {
		rows, err := conn.QueryContext(ctx, `SELECT table_schema, table_name FROM information_schema.tables
			WHERE table_schema NOT IN ('information_schema', 'pg_catalog')
			ORDER BY table_schema, table_name`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t warehouse.TableRef
			if err := rows.Scan(&t.Schema, &t.Name); err != nil {
				return err
			}
			out = append(out, t)
		}
		return rows.Err()
	})
	return out, err
}

// Describe reads a table's columns from the information schema.
func (w *Warehouse) Describe(ctx context.Context, t warehouse.TableRef) (*warehouse.Table, error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	tab := &warehouse.Table{Ref: t}
	err := w.withConn(ctx, func(conn *sql.Conn) error {
		rows, err := conn.QueryContext(ctx, `SELECT column_name, data_type, is_nullable = 'YES', ordinal_position
			FROM information_schema.columns WHERE table_schema = ? AND table_name = ?
			ORDER BY ordinal_position`, t.Schema, t.Name)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c warehouse.Column
			if err := rows.Scan(&c.Name, &c.Type, &c.Nullable, &c.Position); err != nil {
				return err
			}
			tab.Columns = append(tab.Columns, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	if len(tab.Columns) == 0 {
		return nil, fmt.Errorf("table %s not found in warehouse %s", t, w.name)
	}
	return tab, nil
}

// OpenWrite opens the file read-write for a loader, creating it if needed.
// It retries while agents hold read-only opens, for up to wait.
func OpenWrite(ctx context.Context, path string, wait time.Duration) (*sql.DB, error) {
	deadline := time.Now().Add(wait)
	for {
		db, err := sql.Open("duckdb", path)
		if err == nil {
			if err = db.PingContext(ctx); err == nil {
				return db, nil
			}
			db.Close()
		}
		if !isLockConflict(err) || time.Now().After(deadline) {
			return nil, fmt.Errorf("open DuckDB file %s for writing: %w", path, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
