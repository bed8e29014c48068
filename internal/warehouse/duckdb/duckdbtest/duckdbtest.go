// Package duckdbtest makes DuckDB warehouse files for tests, as the
// bigquerytest and snowflaketest fakes stand in for the remote warehouses.
package duckdbtest

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// File writes the DuckDB file at path by running stmts in order and
// closes it, so a reader (a warehouse child) can open it; any error fails
// tb, naming the statement.
func File(tb testing.TB, path string, stmts ...string) {
	tb.Helper()
	db, err := duckdb.OpenWrite(context.Background(), path, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			tb.Fatalf("%s: %v", q[:min(len(q), 80)], err)
		}
	}
}
