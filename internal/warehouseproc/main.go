package warehouseproc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
)

// ChildPrefix begins the name of every warehouse child: the child of a
// warehouse of kind K is ChildPrefix+K (dw-warehouse-duckdb,
// dw-warehouse-bigquery, dw-warehouse-snowflake), installed beside the
// agents.
const ChildPrefix = "dw-warehouse-"

// kinds are the warehouse kinds, each served by a child of its own.
var kinds = [...]string{"duckdb", "bigquery", "snowflake"}

// Kinds returns the warehouse kinds, each served by a child of its own
// (a copy: childIn's allow-list is not the caller's to change).
func Kinds() []string { return slices.Clone(kinds[:]) }

// Main is a warehouse child's whole main: it serves the kind of warehouse
// the child is named for (ChildPrefix+kind), reading requests from in and
// writing answers to out (the child's stdin and stdout, which its cmd
// hands over: they carry the protocol and nothing else) until the agent
// closes its end, and exits 0; a protocol or driver failure exits 1,
// an argument 2 (the child takes none). It reads no dw.yaml: open gets the
// configuration the agent loaded, holding the one warehouse to serve, and
// the clock DW_CLOCK sets (a DW_CLOCK that is not a time also exits 2).
// SIGINT and SIGTERM cancel what is in flight, so a statement stopped by
// the agent is stopped in the warehouse too. Logs go to stderr; stdout is
// the protocol's.
func Main(kind string, in io.Reader, out io.Writer, open func(ctx context.Context, cfg *config.Config, wc *config.Warehouse, clk clock.Clock) (warehouse.Warehouse, error)) {
	name := ChildPrefix + kind
	config.PrivateFiles()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stderr, "usage: %s (no arguments). Agents start it to read their %s warehouses; it reads no dw.yaml and speaks only to the agent that started it, on stdin/stdout.\n", name, kind)
		os.Exit(2)
	}
	clk, err := clock.FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = Serve(ctx, in, out, func(ctx context.Context, o Opening) (warehouse.Warehouse, error) {
		// An agent only sends a warehouse to the child of its kind
		// (Command); anything else is refused before a driver sees it.
		if o.Warehouse.Kind != kind {
			return nil, fmt.Errorf("warehouse %s is of kind %q; %s serves %s warehouses only", o.Warehouse.Name, o.Warehouse.Kind, name, kind)
		}
		cfg := o.Config()
		return open(ctx, cfg, &cfg.Warehouses[0], clk)
	})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
