package ingest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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

// importManifest is a dbt manifest of n models, model i depending on up to
// three earlier models, and those edges as 0-based pairs (from, to).
func importManifest(n int) ([]byte, [][2]int32) {
	var b bytes.Buffer
	b.WriteString(`{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json", "adapter_type": "duckdb", "project_name": "bench"}, "sources": {}, "nodes": {`)
	var edges [][2]int32
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"model.bench.m%d": {"unique_id": "model.bench.m%d", "resource_type": "model", "name": "m%d", "database": "db", "schema": "s", "alias": "m%d", "depends_on": {"nodes": [`, i, i, i, i)
		for k, d := range []int{1, 7, 31} {
			if i-d < 0 {
				break
			}
			if k > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"model.bench.m%d"`, i-d)
			edges = append(edges, [2]int32{int32(i - d), int32(i)})
		}
		b.WriteString(`]}}`)
	}
	b.WriteString(`}}`)
	return b.Bytes(), edges
}

func walMiB(path string) float64 {
	st, err := os.Stat(path + "-wal")
	if err != nil {
		return 0
	}
	return float64(st.Size()) / (1 << 20)
}

// peakWAL samples the size of path's write-ahead log until the returned
// func is called, which returns the largest seen: the log is reused from
// its start after a checkpoint, and a size limit would truncate it, so its
// size at the end need not be its peak.
func peakWAL(path string) func() float64 {
	stop := make(chan struct{})
	peak := make(chan float64)
	go func() {
		var m float64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			m = max(m, walMiB(path))
			select {
			case <-stop:
				peak <- max(m, walMiB(path))
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 {
		close(stop)
		return <-peak
	}
}

// BenchmarkImportDBT is issue 18's catalog-import row in-process: a dbt
// manifest of n models and about 3n edges imported into a fresh SQLite
// store, against the floor of a bulk insert of the same rows (assets,
// edges and names, prepared multi-row INSERTs in one transaction) into
// another, and the size each write-ahead log reached. A manifest this
// large is staged (lineage.WriteBulk): committed in batches, so the log
// stays about one batch long whatever the import's size.
func BenchmarkImportDBT(b *testing.B) {
	ctx := context.Background()
	n := importAssets()
	data, edges := importManifest(n)
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
		stopWAL := peakWAL(filepath.Join(dir, "import.db"))
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
		var aliases int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM lineage_aliases").Scan(&aliases); err != nil {
			b.Fatal(err)
		}
		db.Close()

		// The floor writes the same rows: the assets and edges, and as
		// many names as the import registered.
		floorDB, err := store.OpenSQLite(ctx, filepath.Join(dir, "floor.db"))
		if err != nil {
			b.Fatal(err)
		}
		stopWAL = peakWAL(filepath.Join(dir, "floor.db"))
		t = time.Now()
		lineagetest.BulkLoad(b, floorDB, n, edges)
		bulkAliases(b, floorDB, aliases, n)
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

// bulkAliases inserts count names, spread over assets 1..n, in one
// transaction with a prepared multi-row INSERT.
func bulkAliases(b *testing.B, db *store.DB, count, n int) {
	ctx := context.Background()
	tx, err := db.SQL().BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	const rows = 500
	ph := func(k int) string {
		var sb strings.Builder
		for r := 0; r < k; r++ {
			if r > 0 {
				sb.WriteByte(',')
			}
			if db.Dialect() == store.Postgres {
				fmt.Fprintf(&sb, "($%d,$%d,0)", 2*r+1, 2*r+2)
			} else {
				sb.WriteString("(?,?,0)")
			}
		}
		return sb.String()
	}
	const q = "INSERT INTO lineage_aliases (alias, asset_seq, weak) VALUES "
	full, err := tx.PrepareContext(ctx, q+ph(rows))
	if err != nil {
		b.Fatal(err)
	}
	args := make([]any, 0, 2*rows)
	for i := 0; i < count; i++ {
		args = append(args, fmt.Sprintf("bench-alias-%d", i), i%n+1)
		if len(args) == 2*rows {
			if _, err := full.ExecContext(ctx, args...); err != nil {
				b.Fatal(err)
			}
			args = args[:0]
		}
	}
	if len(args) > 0 {
		if _, err := tx.ExecContext(ctx, q+ph(len(args)/2), args...); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}
