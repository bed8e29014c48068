package local

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
)

// ensureDemo creates and seeds the embedded default's DuckDB warehouse the
// first time any agent needs it. Five agents may start together, so the
// seeding holds an exclusive file lock and re-checks after taking it; the
// seeder writes to a temporary file that is renamed into place, so a
// reader never sees a half-written warehouse.
func ensureDemo(ctx context.Context, cfg *config.Config, path string, clk clock.Clock, logger *slog.Logger) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create data directory %s: %w", filepath.Dir(path), err)
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	logger.Info("creating the embedded demo warehouse (first start)", "path", path)
	tmp := path + ".seeding"
	_ = os.Remove(tmp)
	if err := seedPacks(ctx, cfg, tmp, clk.Now()); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("seed demo warehouse %s: %w", path, err)
	}
	_ = os.Remove(tmp + ".wal")
	return os.Rename(tmp, path)
}
