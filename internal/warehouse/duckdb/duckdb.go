// Package duckdb is the embedded default warehouse: a DuckDB file read by
// every agent at once.
//
// DuckDB lets many processes open a file READ_ONLY together, but a
// read-write open fails while any reader holds it (and the reverse). So
// agents open the file read-only for the length of one request and close
// it; the loader (dw demo load) opens it read-write briefly and retries
// while readers hold it.
package duckdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" database/sql driver

	"github.com/dataworkers/dw/internal/warehouse"
)

// Warehouse is a DuckDB file opened read-only per request.
type Warehouse struct {
	name    string
	path    string
	timeout time.Duration
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

// Close has nothing to release: connections live for one request.
func (w *Warehouse) Close() error { return nil }

// withConn opens the file read-only, runs fn, and closes it. A writer
// holding the file (the loader, briefly) makes the open fail; we retry for
// a short while rather than fail a read that would succeed a moment later.
func (w *Warehouse) withConn(ctx context.Context, fn func(db *sql.DB) error) error {
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		db, err := sql.Open("duckdb", w.path+"?access_mode=READ_ONLY")
		if err == nil {
			err = db.PingContext(ctx)
		}
		if err == nil {
			defer db.Close()
			return fn(db)
		}
		if db != nil {
			db.Close()
		}
		lastErr = err
		if !isLockConflict(err) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("open DuckDB warehouse %s (%s) read-only: %w", w.name, w.path, lastErr)
}

func isLockConflict(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "lock") || strings.Contains(msg, "conflicting")
}

// Query runs one SELECT with the warehouse's timeout.
func (w *Warehouse) Query(ctx context.Context, q warehouse.Query) (*warehouse.Result, error) {
	if err := warehouse.ReadOnlyStatement(q.SQL); err != nil {
		return nil, err
	}
	timeout := w.timeout
	if q.Timeout > 0 {
		timeout = q.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var res *warehouse.Result
	err := w.withConn(ctx, func(db *sql.DB) error {
		rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		res, err = warehouse.ScanRows(rows)
		return err
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("query on %s timed out after %s", w.name, timeout)
	}
	return res, err
}

// ListTables lists base tables and views outside the system schemas.
func (w *Warehouse) ListTables(ctx context.Context) ([]warehouse.TableRef, error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	var out []warehouse.TableRef
	err := w.withConn(ctx, func(db *sql.DB) error {
		rows, err := db.QueryContext(ctx, `SELECT table_schema, table_name FROM information_schema.tables
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
	err := w.withConn(ctx, func(db *sql.DB) error {
		rows, err := db.QueryContext(ctx, `SELECT column_name, data_type, is_nullable = 'YES', ordinal_position
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
