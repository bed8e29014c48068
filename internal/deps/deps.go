// Package deps holds what an agent's tool handlers share: the
// configuration, the clock, and the store and warehouses, opened lazily.
//
// Nothing heavy opens at start-up: an MCP client spawns all five agents at
// once and lists their tools before calling any, so start-up must cost
// milliseconds. The store opens on the first call that needs it and stays
// open; a DuckDB warehouse is opened read-only per query by its driver.
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

// Load reads the configuration the usual way and returns dependencies for agent.
func Load(agent string) (*Deps, error) {
	cfg, err := config.Load()
	if err != nil {
		return nil, err
	}
	clk, err := clock.FromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	if _, ok := clk.(clock.Offset); ok {
		slog.Warn("DW_CLOCK is set: acting as if the time were "+clk.Now().Format(time.RFC3339), "agent", agent)
	}
	return New(agent, cfg, clk, slog.Default()), nil
}

// Store opens the state store on first use. A failed open is not cached,
// so a store that comes up later is picked up by the next call.
func (d *Deps) Store(ctx context.Context) (*store.DB, error) {
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

// Close releases the store.
func (d *Deps) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db != nil {
		err := d.db.Close()
		d.db = nil
		return err
	}
	return nil
}
