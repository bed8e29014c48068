package tables

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/demo"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// BenchmarkLoadWarehouse times a pack's load against a baseline run in the
// same process: DuckDB writing the same number of rows of the same width
// from range(), the least any loader of that data could cost. It reports
// the ratio (load / baseline) and the load's seconds per pack; the budget
// is well under 5 s per pack on 2 cores.
func BenchmarkLoadWarehouse(b *testing.B) {
	ctx := context.Background()
	for _, pack := range demo.Packs() {
		b.Run(pack, func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, "demo.duckdb")
			rows := packRowCount(pack)
			var load, base time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if err := LoadWarehouse(ctx, path, pack, storyNow); err != nil {
					b.Fatal(err)
				}
				load += time.Since(start)
				start = time.Now()
				if err := baselineWrite(ctx, filepath.Join(dir, "baseline.duckdb"), rows); err != nil {
					b.Fatal(err)
				}
				base += time.Since(start)
			}
			b.ReportMetric(load.Seconds()/float64(b.N), "s/pack")
			b.ReportMetric(float64(load)/float64(base), "load/baseline")
		})
	}
}

func packRowCount(pack string) int {
	tl := demo.Timeline(storyNow)
	if pack == "billing" {
		m := newBillingModel(billingSeed, tl)
		usage := m.rows(tl.HistoryStart, tl.QualityCheck, rollupV1)
		return len(usage) + len(m.billable(usage)) + 2*len(m.accounts)
	}
	return 2*loyaltyMembers + demo.HistoryDays*24 + demo.HistoryDays
}

func baselineWrite(ctx context.Context, path string, rows int) error {
	db, err := duckdb.OpenWrite(ctx, path, writeWait)
	if err != nil {
		return err
	}
	defer db.Close()
	return execBaseline(ctx, db, rows)
}

func execBaseline(ctx context.Context, db *sql.DB, rows int) error {
	_, err := db.ExecContext(ctx, fmt.Sprintf(`CREATE OR REPLACE TABLE t AS
		SELECT 'acct_' || (i %% 400) AS k, 'row-' || i AS id, TIMESTAMP '2026-01-01' + INTERVAL (i) SECOND AS a,
			i * 7 AS n, CASE WHEN i %% 5 = 0 THEN NULL ELSE i * 13 END AS m, TIMESTAMP '2026-01-01' + INTERVAL (i) MINUTE AS b
		FROM range(%d) AS r(i)`, rows))
	return err
}
