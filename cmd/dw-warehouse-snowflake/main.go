// Command dw-warehouse-snowflake serves one Snowflake warehouse to the
// agent that started it, over stdin/stdout (internal/warehouseproc's line
// protocol). Agents start it themselves for their Snowflake warehouses; it
// links the Snowflake driver and the protocol alone, because a process
// maps what it links (README, "The warehouse child").
package main

import (
	"context"
	"os"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/snowflake"
	"github.com/dataworkers/dw/internal/warehouseproc"
)

func main() {
	// stdin and stdout are the agent's protocol stream alone.
	warehouseproc.Main("snowflake", os.Stdin, os.Stdout, func(ctx context.Context, _ *config.Config, wc *config.Warehouse, _ clock.Clock) (warehouse.Warehouse, error) {
		return snowflake.OpenSection(ctx, wc)
	})
}
