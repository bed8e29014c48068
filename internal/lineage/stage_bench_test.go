package lineage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// BenchmarkStagedWrite is the catalog import's design decision measured:
// the same bulk write (n assets named three ways, about 3n edges, through
// UpsertAssets and LinkLater as the dbt import writes them) as one
// transaction (Write) and staged (WriteBulk), alternating into fresh
// SQLite stores, each with the peak size of its write-ahead log.
// DW_IMPORT_BENCH_ASSETS sets n (default 20,000; 100,000 is issue 18's).
func BenchmarkStagedWrite(b *testing.B) {
	n := 20_000
	if v, err := strconv.Atoi(os.Getenv("DW_IMPORT_BENCH_ASSETS")); err == nil && v >= 100 {
		n = v
	}
	write := func(w *Writer) error {
		ins := make([]*AssetInput, n)
		for i := range ins {
			ins[i] = &AssetInput{ID: fmt.Sprintf("dbt://model.bench.m%d", i), Kind: KindDBTModel, Platform: "duckdb",
				Names: []string{fmt.Sprintf("duckdb://db.s.m%d", i)}, Weak: []string{fmt.Sprintf("duckdb://s.m%d", i)}, Source: SourceDBT}
		}
		seqs, err := w.UpsertAssets(ins)
		if err != nil {
			return err
		}
		for i := range seqs {
			for _, d := range []int{1, 7, 31} {
				if i-d >= 0 {
					if err := w.LinkLater(seqs[i-d], seqs[i], SourceDBT); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	ctx := context.Background()
	run := func(staged bool) (time.Duration, float64) {
		path := filepath.Join(b.TempDir(), "dw.db")
		db, err := store.OpenSQLite(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		g := New(db, nil)
		stop := make(chan struct{})
		peak := make(chan float64)
		go func() {
			var m float64
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			for {
				if st, err := os.Stat(path + "-wal"); err == nil {
					m = max(m, float64(st.Size())/(1<<20))
				}
				select {
				case <-stop:
					peak <- m
					return
				case <-t.C:
				}
			}
		}()
		t0 := time.Now()
		var stats ImportStats
		if staged {
			stats, err = g.WriteBulk(ctx, 4*n, write, BulkOptions{})
		} else {
			stats, err = g.Write(ctx, write)
		}
		took := time.Since(t0)
		close(stop)
		wal := <-peak
		if err != nil {
			b.Fatal(err)
		}
		if stats.AssetsCreated != n {
			b.Fatalf("%d assets created, want %d", stats.AssetsCreated, n)
		}
		return took, wal
	}
	var one, staged []time.Duration
	var oneWAL, stagedWAL float64
	for i := 0; i < b.N*3; i++ {
		t, w := run(false)
		one, oneWAL = append(one, t), max(oneWAL, w)
		t, w = run(true)
		staged, stagedWAL = append(staged, t), max(stagedWAL, w)
	}
	o, s := slices.Min(one), slices.Min(staged)
	b.ReportMetric(float64(s)/float64(o), "x-one-tx")
	b.ReportMetric(oneWAL, "MiB-wal-one-tx")
	b.ReportMetric(stagedWAL, "MiB-wal-staged")
	b.Logf("%d assets, %d names, ~%d edges: one transaction %s (min of %v), WAL peak %.1f MiB; staged %s (min of %v, %.2f×), WAL peak %.1f MiB",
		n, 3*n, 3*n, o.Round(time.Millisecond), one, oneWAL, s.Round(time.Millisecond), staged, float64(s)/float64(o), stagedWAL)
}
