// Package warehouses opens the warehouses dw.yaml configures, by kind:
// DuckDB files (package local), BigQuery and Snowflake. dw links it for
// its own commands (and `dw warehouse serve`, for agents from before the
// per-kind children); no agent does: an agent's warehouse calls go to a
// child process of the warehouse's kind (internal/warehouseproc), which
// links that kind's driver alone.
package warehouses

import (
	"context"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouses/local"
)

// Open opens one configured warehouse. On the embedded default the demo
// DuckDB file is created and seeded on first use (local.Open).
func Open(ctx context.Context, cfg *config.Config, wc *config.Warehouse, clk clock.Clock) (warehouse.Warehouse, error) {
	if wc.Kind == "duckdb" {
		return local.Open(ctx, cfg, wc, clk)
	}
	return openRemote(ctx, wc)
}
