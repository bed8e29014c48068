// Package warehouses opens the warehouses dw.yaml configures, by kind.
// Only the agents that read warehouses import it, so the others do not
// link the DuckDB, BigQuery and Snowflake drivers (DuckDB alone adds about
// 15 MiB to a process's resident memory at start).
package warehouses

import (
	"context"
	"log/slog"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// Open opens one configured warehouse. On the embedded default the demo
// DuckDB file is created and seeded on first use.
func Open(ctx context.Context, cfg *config.Config, wc *config.Warehouse, clk clock.Clock) (warehouse.Warehouse, error) {
	switch wc.Kind {
	case "duckdb":
		if cfg.EmbeddedDefault() {
			if err := ensureDemo(ctx, cfg, wc.Path, clk, slog.Default()); err != nil {
				return nil, err
			}
		}
		return duckdb.Open(wc.Name, wc.Path, wc.Timeout)
	default:
		return openRemote(ctx, wc)
	}
}
