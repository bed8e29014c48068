package local

import (
	"context"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/demo"
	"github.com/dataworkers/dw/internal/demo/tables"
)

// seedPacks writes every scenario pack's tables into a new DuckDB file:
// the same code `dw demo load` runs.
func seedPacks(ctx context.Context, _ *config.Config, path string, now time.Time) error {
	for _, p := range demo.Packs() {
		if err := tables.LoadWarehouse(ctx, path, p, now); err != nil {
			return err
		}
	}
	return nil
}
