// Command dw-warehouse-duckdb serves one DuckDB warehouse to the agent that
// started it, over stdin/stdout (internal/warehouseproc's line protocol).
// Agents start it themselves for their DuckDB warehouses; it links DuckDB
// and the protocol alone, because a process maps what it links (README,
// "The warehouse child").
package main

import (
	"context"
	"os"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouseproc"
	"github.com/dataworkers/dw/internal/warehouses/local"
)

func main() {
	// stdin and stdout are the agent's protocol stream alone.
	warehouseproc.Main("duckdb", os.Stdin, os.Stdout, func(ctx context.Context, cfg *config.Config, wc *config.Warehouse, clk clock.Clock) (warehouse.Warehouse, error) {
		// The embedded default seeds its demo warehouse on the demo's
		// incident day, the agent's clock (config.DemoClockFor).
		return local.Open(ctx, cfg, wc, config.DemoClockFor(cfg, clk))
	})
}
