package seeded

import (
	"context"
	"database/sql/driver"
	"fmt"
	"time"

	duckdbdriver "github.com/duckdb/duckdb-go/v2"

	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// writeWait is how long the writer waits for agents' read-only opens of
// the file to close.
const writeWait = 15 * time.Second

// WriteDuckDB writes the scenario's table into the DuckDB file at path as
// it stood at asOf: only rows that had landed by then. The table is
// replaced, so a test can move the file through a week one day at a time.
func (s *Scenario) WriteDuckDB(ctx context.Context, path string, asOf time.Time) error {
	return s.write(ctx, path, time.Time{}, asOf)
}

// AppendDuckDB adds to a table WriteDuckDB wrote the rows that landed
// after after and by asOf: moving a file through a week this way writes
// each day's rows once rather than the whole history every day. Rows only
// ever land in these scenarios, so the file is then as WriteDuckDB(asOf)
// would leave it.
func (s *Scenario) AppendDuckDB(ctx context.Context, path string, after, asOf time.Time) error {
	if after.IsZero() || !asOf.After(after) {
		return fmt.Errorf("append to %s: after (%s) must be set and before asOf (%s)", s.Table.Ref(), after, asOf)
	}
	return s.write(ctx, path, after, asOf)
}

// write replaces the table when after is zero, else appends to it, the
// rows that landed after after and by asOf.
func (s *Scenario) write(ctx context.Context, path string, after, asOf time.Time) error {
	t := s.Table
	d := warehouse.DuckDB{}
	qualified := d.Table(warehouse.TableRef{Schema: t.Schema, Name: t.Name})
	db, err := duckdb.OpenWrite(ctx, path, writeWait)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	stmts := []string{
		"CREATE SCHEMA IF NOT EXISTS " + d.QuoteIdent(t.Schema),
		"CREATE OR REPLACE TABLE " + qualified + " " + t.Columns,
	}
	if !after.IsZero() {
		stmts = nil
	}
	for _, stmt := range stmts {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		dconn, ok := dc.(driver.Conn)
		if !ok {
			return fmt.Errorf("append to %s: connection is %T, not a DuckDB connection", t.Ref(), dc)
		}
		a, err := duckdbdriver.NewAppenderFromConn(dconn, t.Schema, t.Name)
		if err != nil {
			return fmt.Errorf("append to %s: %w", t.Ref(), err)
		}
		vals := make([]driver.Value, 0, 8)
		for i, row := range t.Rows {
			if row.Landed.After(asOf) || (!after.IsZero() && !row.Landed.After(after)) {
				continue
			}
			vals = vals[:0]
			for _, v := range row.Values {
				vals = append(vals, v)
			}
			if err := a.AppendRow(vals...); err != nil {
				a.Close()
				return fmt.Errorf("append to %s row %d: %w", t.Ref(), i, err)
			}
		}
		return a.Close()
	})
}
