package main

import (
	"context"
	"os"

	"github.com/dataworkers/dw/internal/warehouseproc"
	"github.com/dataworkers/dw/internal/warehouses"
)

func init() {
	register("warehouse serve", "--name NAME", "serve one configured warehouse to an agent over stdin/stdout (agents start this themselves)", warehouseServe)
}

// warehouseServe hosts the warehouse drivers for an agent, which keeps
// them out of its own process (see internal/warehouseproc). It speaks only
// the line protocol on stdout.
func warehouseServe(ctx context.Context, e *env, args []string) error {
	fs := e.flags("warehouse serve")
	name := fs.String("name", "", "warehouse name from dw.yaml (default: the first)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := e.config()
	if err != nil {
		return err
	}
	wc, err := cfg.Warehouse(*name)
	if err != nil {
		return err
	}
	w, err := warehouses.Open(ctx, cfg, wc, e.clock)
	if err != nil {
		return err
	}
	defer w.Close()
	return warehouseproc.Serve(ctx, os.Stdin, os.Stdout, w)
}
