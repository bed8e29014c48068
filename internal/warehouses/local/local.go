// Package local opens the DuckDB warehouses dw.yaml configures: a file on
// this machine, created and seeded with the demo on first use when it is
// the embedded default's. It links DuckDB and nothing of the remote
// drivers, so the DuckDB warehouse child (cmd/dw-warehouse-duckdb) stays
// small: a process maps the pages of every package it links, and each
// package's init runs at start whether used or not.
package local

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// Open opens one configured DuckDB warehouse. On the embedded default the
// demo file is created and seeded on first use, as of clk.
func Open(ctx context.Context, cfg *config.Config, wc *config.Warehouse, clk clock.Clock) (warehouse.Warehouse, error) {
	if wc.Kind != "duckdb" {
		return nil, fmt.Errorf("warehouse %s: kind %q is not duckdb: this opens DuckDB files only", wc.Name, wc.Kind)
	}
	if cfg.EmbeddedDefault() {
		if err := ensureDemo(ctx, cfg, wc.Path, clk, slog.Default()); err != nil {
			return nil, err
		}
	}
	return duckdb.Open(wc.Name, wc.Path, wc.Timeout)
}
