package packload

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/demo"
	"github.com/dataworkers/dw/internal/routines"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/warehouses"
)

const seededKey = "embedded_default_seeded"

// SeedDefault loads every pack into the embedded default's store the first
// time any agent opens it, so a newcomer's first questions have a graph,
// a change log and team metrics to answer from. Five agents start at
// once: a file lock in the data directory serialises them and a marker in
// the store makes the seed happen once.
func SeedDefault(ctx context.Context, db *store.DB, cfg *config.Config, clk clock.Clock) error {
	if !cfg.EmbeddedDefault() {
		return nil
	}
	if _, _, ok, err := store.GetSetting(ctx, db, seededKey); err != nil || ok {
		return err
	}
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(cfg.Home, "seed.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("lock seed: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock seed: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, _, ok, err := store.GetSetting(ctx, db, seededKey); err != nil || ok {
		return err
	}
	now := clk.Now()
	wh := ""
	if len(cfg.Warehouses) > 0 {
		wh = cfg.Warehouses[0].Name
	}
	for _, name := range demo.Packs() {
		p, _, err := Read(name, now)
		if err != nil {
			return err
		}
		if _, err := LoadStore(ctx, db, clk, p, wh); err != nil {
			return err
		}
	}
	// The first "check usage.usage_hourly for today" is judged against
	// the routines' three weeks of history, recorded here once.
	if len(cfg.Warehouses) > 0 {
		w, err := warehouses.Open(ctx, cfg, &cfg.Warehouses[0], clk)
		if err != nil {
			return err
		}
		err = routines.RecordDemoHistory(ctx, checks.Env{DB: db, Warehouse: w, Clock: clk, Agent: "dw", Tool: "demo seed"})
		w.Close()
		if err != nil {
			return fmt.Errorf("record the demo's history: %w", err)
		}
	}
	// The demo's store is made for replay: on it, and only on it, the demo's
	// clock also dates decisions, so a request proposed on the incident day
	// is decided on it too (see approvals.MarkReplayStore).
	if err := approvals.MarkReplayStore(ctx, db, cfg.Home, now); err != nil {
		return err
	}
	return store.PutSetting(ctx, db, seededKey, now.Format("2006-01-02T15:04:05Z07:00"), now)
}
