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
	register("warehouse serve", "", "serve a warehouse to the agent that started it over stdin/stdout, as the agent's configuration says (agents start this themselves)", warehouseServe)
}

// warehouseServe hosts the warehouse drivers for an agent, which keeps
// them out of its own process (see internal/warehouseproc). It reads no
// dw.yaml: the agent's first request carries the configuration it loaded.
// It speaks only the line protocol on stdout.
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
		// incident day, the agent's clock (config.DemoClock).
		return warehouses.Open(ctx, cfg, &cfg.Warehouses[0], config.DemoClockFor(cfg, e.clock))
	})
}
