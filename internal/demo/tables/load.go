package tables

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	duckdbdriver "github.com/duckdb/duckdb-go/v2"

	"github.com/dataworkers/dw/internal/demo"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// writeWait is how long a loader waits for agents' read-only opens to
// close before giving up on the file.
const writeWait = 15 * time.Second

// LoadWarehouse writes a pack's tables into the DuckDB file at duckdbPath
// (created if missing), as they stood at the story's 15:05 check on the
// incident day demo.Timeline(now) picks. Every table of the pack is replaced,
// so loading twice gives the same file, and loading after a fix resets
// the story.
func LoadWarehouse(ctx context.Context, duckdbPath, pack string, now time.Time) error {
	if err := demo.CheckPack(pack); err != nil {
		return err
	}
	tl := demo.Timeline(now)
	return withWriter(ctx, duckdbPath, func(db *sql.DB) error {
		switch pack {
		case "billing":
			return loadBilling(ctx, db, tl)
		default:
			return loadLoyalty(ctx, db, tl)
		}
	})
}

// ApplyBillingFix applies the billing owners' approved steps to a file
// LoadWarehouse filled: usage.usage_hourly_v2 (the corrected statement's
// output from the incident day's 00:00, plus the history it was backfilled
// with) and fct_billable_egress rebuilt with today's hours read from it.
// The tables hold what had landed by the 16:05 verification.
func ApplyBillingFix(ctx context.Context, duckdbPath string, now time.Time) error {
	tl := demo.Timeline(now)
	return withWriter(ctx, duckdbPath, func(db *sql.DB) error {
		if err := requireTables(ctx, db, "billing", "usage.usage_hourly", "billing.dim_accounts"); err != nil {
			return err
		}
		return fixBilling(ctx, db, tl)
	})
}

// ApplyLoyaltyFix applies the loyalty owners' approved step to a file
// LoadWarehouse filled: points-balance v4.1 redeployed from the 14:00
// savepoint with its state, which rewrites every balance since 14:00; then
// the hourly activity model and nightly_tiers re-run for verification.
// The tables hold what had landed by the 16:05 verification.
func ApplyLoyaltyFix(ctx context.Context, duckdbPath string, now time.Time) error {
	tl := demo.Timeline(now)
	return withWriter(ctx, duckdbPath, func(db *sql.DB) error {
		if err := requireTables(ctx, db, "loyalty", "loyalty.member_balances", "loyalty.member_activity_hourly",
			"loyalty.fct_member_tier", "loyalty.tier_changes_daily"); err != nil {
			return err
		}
		return fixLoyalty(ctx, db, tl)
	})
}

func withWriter(ctx context.Context, path string, fn func(db *sql.DB) error) error {
	if path == "" {
		return fmt.Errorf("no DuckDB file given: pass the path of the demo warehouse (e.g. ~/.local/share/data-workers/demo.duckdb)")
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create directory for DuckDB file %s: %w", path, err)
		}
	}
	db, err := duckdb.OpenWrite(ctx, path, writeWait)
	if err != nil {
		return err
	}
	defer db.Close()
	// One connection: the appender and the DDL must see each other's work.
	db.SetMaxOpenConns(1)
	if err := fn(db); err != nil {
		return fmt.Errorf("DuckDB file %s: %w", path, err)
	}
	return nil
}

// requireTables fails with a hint to load the pack when a table is missing.
func requireTables(ctx context.Context, db *sql.DB, pack string, tables ...string) error {
	for _, t := range tables {
		schema, name, _ := strings.Cut(t, ".")
		var n int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?`,
			schema, name).Scan(&n)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("table %s is missing: load the %s pack first (tables.LoadWarehouse with pack %q)", t, pack, pack)
		}
	}
	return nil
}

func execAll(ctx context.Context, db *sql.DB, stmts ...string) error {
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%w\nin: %s", err, firstLine(s))
		}
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// appendRows loads n rows into schema.table through DuckDB's appender.
func appendRows(ctx context.Context, db *sql.DB, schema, table string, n int, row func(i int) []driver.Value) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		dconn, ok := dc.(driver.Conn)
		if !ok {
			return fmt.Errorf("append to %s.%s: connection is %T, not a DuckDB connection", schema, table, dc)
		}
		a, err := duckdbdriver.NewAppenderFromConn(dconn, schema, table)
		if err != nil {
			return fmt.Errorf("append to %s.%s: %w", schema, table, err)
		}
		for i := 0; i < n; i++ {
			if err := a.AppendRow(row(i)...); err != nil {
				a.Close()
				return fmt.Errorf("append to %s.%s row %d: %w", schema, table, i, err)
			}
		}
		if err := a.Close(); err != nil {
			return fmt.Errorf("append to %s.%s: %w", schema, table, err)
		}
		return nil
	})
}

// sqlTime spells a time as a DuckDB TIMESTAMP literal. Only times the
// generator computed reach it, never user text.
func sqlTime(t time.Time) string {
	return "TIMESTAMP '" + t.UTC().Format("2006-01-02 15:04:05.000000") + "'"
}

func sqlDate(t time.Time) string { return "DATE '" + t.UTC().Format("2006-01-02") + "'" }

func nullable(s string) driver.Value {
	if s == "" {
		return nil
	}
	return s
}
