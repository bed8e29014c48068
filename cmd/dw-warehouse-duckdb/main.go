// Command dw-warehouse-duckdb serves one DuckDB warehouse to the agent that
// started it, over stdin/stdout (internal/warehouseproc's line protocol),
// as `dw warehouse serve` does for every kind. Agents start it themselves
// for their DuckDB warehouses; it is its own binary because a process maps
// what it links, and dw links the CLI, BigQuery, Snowflake and what they
// depend on: this one links DuckDB and the protocol, and holds about half
// the memory (README, "The warehouse child").
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouseproc"
	"github.com/dataworkers/dw/internal/warehouses/local"
)

func main() {
	config.PrivateFiles()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: dw-warehouse-duckdb (no arguments). Agents start it to read their DuckDB warehouses; it reads no dw.yaml and speaks only to the agent that started it, on stdin/stdout.")
		os.Exit(2)
	}
	clk, err := clock.FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dw-warehouse-duckdb:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = warehouseproc.Serve(ctx, os.Stdin, os.Stdout, func(ctx context.Context, o warehouseproc.Opening) (warehouse.Warehouse, error) {
		cfg := o.Config()
		// The embedded default seeds its demo warehouse on the demo's
		// incident day, the agent's clock (config.DemoClockFor).
		return local.Open(ctx, cfg, &cfg.Warehouses[0], config.DemoClockFor(cfg, clk))
	})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dw-warehouse-duckdb:", err)
		os.Exit(1)
	}
}
