package ingest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/lineage"

	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
)

// importAssets is the manifest size: 20k models by default so the row
// stays near a minute on a loaded machine; DW_IMPORT_BENCH_ASSETS=100000
// gives issue 18's row (100k assets, 300k edges).
func importAssets() int {
	if n, err := strconv.Atoi(os.Getenv("DW_IMPORT_BENCH_ASSETS")); err == nil && n >= 100 {
		return n
	}
	return 20_000
}

// BenchmarkImportDBT is issue 18's catalog-import row in-process: a dbt
// manifest of n models and about 3n edges imported into a fresh SQLite
// store, against the floor of a bulk insert of the same rows (the assets,
// names and edges the import stored, read back from its store; prepared
// multi-row INSERTs in one transaction) into another, and the size each
// write-ahead log reached. A manifest this
// large is staged (lineage.WriteBulk): committed in batches, so the log
// stays about one batch long whatever the import's size.
func BenchmarkImportDBT(b *testing.B) {
	ctx := context.Background()
	n := importAssets()
	data, edges := lineagetest.DBTManifest(n)
	// Three alternating runs of each, reported by their minimum: on a
	// loaded machine one run of either swings by 2-3×.
	var tooks, floors []time.Duration
	var wal, floorWAL float64
	for i := 0; i < b.N*3; i++ {
		dir := b.TempDir()
		db, err := store.OpenSQLite(ctx, filepath.Join(dir, "import.db"))
		if err != nil {
			b.Fatal(err)
		}
		g := lineage.New(db, nil)
		stopWAL := lineagetest.PeakWAL(filepath.Join(dir, "import.db"))
		t := time.Now()
		res, err := DBTManifest(ctx, g, bytes.NewReader(data), DBTOptions{})
		took := time.Since(t)
		wal = stopWAL()
		if err != nil {
			b.Fatal(err)
		}
		if res.AssetsCreated != n || res.EdgesCreated != len(edges) {
			b.Fatalf("imported %d assets and %d edges, want %d and %d", res.AssetsCreated, res.EdgesCreated, n, len(edges))
		}
		rows := lineagetest.ReadCatalogRows(b, db)
		db.Close()

		// The floor writes the same rows, as the import stored them, into
		// another new store.
		floorDB, err := store.OpenSQLite(ctx, filepath.Join(dir, "floor.db"))
		if err != nil {
			b.Fatal(err)
		}
		stopWAL = lineagetest.PeakWAL(filepath.Join(dir, "floor.db"))
		t = time.Now()
		rows.Insert(b, floorDB)
		floor := time.Since(t)
		floorWAL = stopWAL()
		floorDB.Close()
		tooks, floors = append(tooks, took), append(floors, floor)
	}
	took, floor := slices.Min(tooks), slices.Min(floors)
	{
		b.ReportMetric(float64(took.Milliseconds()), "ms/import")
		b.ReportMetric(float64(floor.Milliseconds()), "floor-ms")
		b.ReportMetric(float64(took)/float64(floor), "x-floor")
		b.ReportMetric(wal, "MiB-wal-peak")
		b.Logf("import of %d assets / %d edges: %s (min of %v); bulk insert of the same rows %s (min of %v) (%.1f×); WAL peak %.1f MiB (bulk insert's %.1f MiB)",
			n, len(edges), took.Round(time.Millisecond), tooks, floor.Round(time.Millisecond), floors, float64(took)/float64(floor), wal, floorWAL)
	}
}
