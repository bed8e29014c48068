// Package storetest runs a test against every store engine: a fresh SQLite
// file and a fresh schema in the PostgreSQL test database. Repository code
// in every package uses it so the same behaviour is proven on both.
package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// PostgresURL is the test database: DW_TEST_POSTGRES, else the machine's
// local PostgreSQL with trust auth.
func PostgresURL() string {
	if u := os.Getenv("DW_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

var schemaSeq atomic.Int64

// SQLite opens a store in a fresh file under t.TempDir().
func SQLite(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "dw.db"))
	if err != nil {
		t.Fatalf("open SQLite store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// PostgresSchemaURL creates a fresh schema in the test database and returns
// a URL whose search_path points at it, so tests never see each other's
// rows; the schema is dropped at cleanup. When PostgreSQL is unreachable the
// test is skipped, except under CI, where it fails: CI starts PostgreSQL.
func PostgresSchemaURL(t testing.TB) string {
	t.Helper()
	base := PostgresURL()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("open PostgreSQL: %v", err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL at %s is required under CI: %v", store.Redact(base), err)
		}
		t.Skipf("PostgreSQL at %s is not reachable (%v); set DW_TEST_POSTGRES or start it", store.Redact(base), err)
	}
	schema := fmt.Sprintf("dwtest_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, schemaSeq.Add(1))
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		a, err := sql.Open("pgx", base)
		if err != nil {
			return
		}
		defer a.Close()
		_, _ = a.Exec("DROP SCHEMA " + schema + " CASCADE")
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema
}

// Postgres opens a store in a fresh schema of the test database.
func Postgres(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.OpenPostgres(context.Background(), PostgresSchemaURL(t))
	if err != nil {
		t.Fatalf("open PostgreSQL store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Each runs fn as a subtest against each engine.
func Each(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, Postgres(t)) })
}

// EachOpener runs fn as a subtest against each engine with a way to open
// one fresh store as often as it likes, as processes sharing it do (each
// its own connections), for what happens when a store is opened: a
// migration, several processes opening it at once.
func EachOpener(t *testing.T, fn func(t *testing.T, open func() (*store.DB, error))) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "dw.db")
		fn(t, func() (*store.DB, error) { return store.OpenSQLite(context.Background(), path) })
	})
	t.Run("postgres", func(t *testing.T) {
		url := PostgresSchemaURL(t)
		fn(t, func() (*store.DB, error) { return store.OpenPostgres(context.Background(), url) })
	})
}

// EachTwice runs fn as a subtest against each engine with two handles on
// one fresh store, as two processes sharing it have: each its own
// connections, neither seeing the other's state but through the store.
func EachTwice(t *testing.T, fn func(t *testing.T, a, b *store.DB)) {
	t.Helper()
	EachOpener(t, func(t *testing.T, open func() (*store.DB, error)) {
		handle := func() *store.DB {
			t.Helper()
			db, err := open()
			if err != nil {
				t.Fatalf("open store: %v", err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}
		fn(t, handle(), handle())
	})
}
