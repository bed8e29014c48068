package main

import (
	"context"
	"os"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouseproc"
	"github.com/dataworkers/dw/internal/warehouses"
)

func init() {
	register("warehouse serve", "", "serve a warehouse over stdin/stdout to an agent started before the per-kind warehouse children (newer agents start dw-warehouse-<kind>)", warehouseServe)
}

// warehouseServe is how agents built before the per-kind warehouse
// children (dw-warehouse-<kind>) reached their warehouses. It stays for
// them: start-agent.sh starts a stale agent at once and rebuilds beside
// it, so after an update an agent process from before can still be
// running, and its next warehouse child is this command of the new dw.
// It reads no dw.yaml: the agent's first request carries the
// configuration it loaded. It speaks only the line protocol on stdout.
func warehouseServe(ctx context.Context, e *env, args []string) error {
	pos, err := parseFlags(e.flags("warehouse serve"), args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return errUsage
	}
	return warehouseproc.Serve(ctx, os.Stdin, os.Stdout, func(ctx context.Context, o warehouseproc.Opening) (warehouse.Warehouse, error) {
		cfg := o.Config()
		// The embedded default seeds its demo warehouse on the demo's
		// incident day, the agent's clock (config.DemoClockFor).
		return warehouses.Open(ctx, cfg, &cfg.Warehouses[0], config.DemoClockFor(cfg, e.clock))
	})
}
