// Package deps holds what an agent's tool handlers share: the
// configuration, the clock, and the store and warehouses, opened lazily.
//
// Nothing heavy opens at start-up: an MCP client spawns all five agents at
// once and lists their tools before calling any, so start-up must cost
// milliseconds. The store opens on the first call that needs it and stays
// open; a warehouse's driver runs in a child process (warehouseproc) that
// the first warehouse call starts and that exits after DW_WAREHOUSE_IDLE
// without a call; DuckDB holds its file only while queries come.
package deps

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/storeconfig"
	"github.com/dataworkers/dw/internal/warehouse"
)

// Deps is shared by every handler of one agent. It is safe for concurrent use.
type Deps struct {
	// Agent is the binary's name, used to label warehouse queries and to
	// record who proposed or recorded something.
	Agent  string
	Config *config.Config
	Clock  clock.Clock
	Logger *slog.Logger
	// ConfigErr is why the configuration did not load. While it is set,
	// Config holds the embedded default's shape so handlers never see nil,
	// and Store and Warehouse return ConfigErr: every tool answers with the
	// file:line:key error and nothing is opened (see Load).
	ConfigErr error

	// OpenWarehouse opens a configured warehouse. Only agents that read
	// warehouses set it (to warehouses.Open), so the others do not link the
	// DuckDB, BigQuery and Snowflake drivers.
	OpenWarehouse func(ctx context.Context, cfg *config.Config, wc *config.Warehouse, clk clock.Clock) (warehouse.Warehouse, error)

	// SeedStore fills a newly opened store (the embedded default's demo
	// packs). Agents set it; it must be idempotent and safe to run from
	// several processes at once.
	SeedStore func(ctx context.Context, db *store.DB, cfg *config.Config, clk clock.Clock) error

	mu         sync.Mutex
	db         *store.DB
	warehouses map[string]warehouse.Warehouse

	held held // the lineage graph and the external clients (graph.go, clients.go)
}

// New returns dependencies for an agent; nothing is opened yet.
func New(agent string, cfg *config.Config, clk clock.Clock, logger *slog.Logger) *Deps {
	if clk == nil {
		clk = clock.System{}
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Deps{Agent: agent, Config: cfg, Clock: clk, Logger: logger, warehouses: map[string]warehouse.Warehouse{}}
}

// Load reads the configuration the usual way and returns dependencies for
// agent. A configuration that does not load does not stop the agent: an
// agent that exits before initialize shows the client only "failed to
// connect", and the file:line:key error is lost on a stderr nobody reads.
// So the agent starts with ConfigErr set (and the embedded default's shape
// in Config, which opens nothing); Store and Warehouse return ConfigErr,
// and mcpserver.Main answers every tool call with it.
func Load(agent string) (*Deps, error) {
	config.PrivateFiles()
	cfg, cfgErr := config.Load()
	if cfgErr != nil {
		var err error
		if cfg, err = config.Default(); err != nil {
			return nil, cfgErr
		}
	}
	clk, err := clock.FromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	if _, ok := clk.(clock.Offset); ok {
		slog.Warn("DW_CLOCK is set: acting as if the time were "+clk.Now().Format(time.RFC3339), "agent", agent)
	}
	if cfgErr == nil {
		// The embedded default acts on its demo's incident day (config.DemoClock).
		clk = config.DemoClockFor(cfg, clk)
	}
	d := New(agent, cfg, clk, slog.Default())
	d.ConfigErr = cfgErr
	return d, nil
}

// Store opens the state store on first use. A failed open is not cached,
// so a store that comes up later is picked up by the next call.
func (d *Deps) Store(ctx context.Context) (*store.DB, error) {
	if d.ConfigErr != nil {
		return nil, d.ConfigErr
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db != nil {
		return d.db, nil
	}
	db, err := storeconfig.Open(ctx, d.Config)
	if err != nil {
		return nil, err
	}
	if d.SeedStore != nil {
		if err := d.SeedStore(ctx, db, d.Config, d.Clock); err != nil {
			db.Close()
			return nil, fmt.Errorf("seed the embedded default store: %w", err)
		}
	}
	d.db = db
	return db, nil
}

// Warehouse returns the named warehouse ("" is the first configured).
func (d *Deps) Warehouse(ctx context.Context, name string) (warehouse.Warehouse, error) {
	if d.ConfigErr != nil {
		return nil, d.ConfigErr
	}
	wc, err := d.Config.Warehouse(name)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if w, ok := d.warehouses[wc.Name]; ok {
		return w, nil
	}
	if d.OpenWarehouse == nil {
		return nil, fmt.Errorf("%s does not read warehouses", d.Agent)
	}
	w, err := d.OpenWarehouse(ctx, d.Config, wc, d.Clock)
	if err != nil {
		return nil, err
	}
	d.warehouses[wc.Name] = w
	return w, nil
}

// Close releases the clients and the store.
func (d *Deps) Close() error {
	d.closeClients()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db != nil {
		err := d.db.Close()
		d.db = nil
		return err
	}
	return nil
}
