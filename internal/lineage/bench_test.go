package lineage

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage/graphindex"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
)

// The benchmarks run on a synthetic graph of DW_LINEAGE_BENCH_ASSETS assets
// (default 1,000,000) and three times as many edges, kept in a SQLite store
// built once per run. Assets fall into ten components of ~10.65% of the
// graph each; edges are random inside a component, so a walk from a
// component's first asset reaches about 94% of it: ~100,000 assets at the
// default size. Quick run: DW_LINEAGE_BENCH_ASSETS=100000 go test -bench . -run '^$' ./internal/lineage

var bench struct {
	once  sync.Once
	dir   string
	db    *store.DB
	n     int
	edges [][2]int32
	setup time.Duration
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bench.db != nil {
		bench.db.Close()
	}
	if bench.dir != "" {
		os.RemoveAll(bench.dir)
	}
	os.Exit(code)
}

func benchAssets() int {
	if s := os.Getenv("DW_LINEAGE_BENCH_ASSETS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 1000 {
			return n
		}
	}
	return 1_000_000
}

func benchGraph(b *testing.B) {
	b.Helper()
	bench.once.Do(func() {
		start := time.Now()
		n := benchAssets()
		edges := lineagetest.NewGraph(n).Edges
		dir, err := os.MkdirTemp("", "dw-lineage-bench-")
		if err != nil {
			b.Fatal(err)
		}
		bench.dir = dir
		db, err := store.OpenSQLite(context.Background(), filepath.Join(dir, "bench.db"))
		if err != nil {
			b.Fatal(err)
		}
		lineagetest.BulkLoad(b, db, n, edges)
		// A store in use has its write-ahead log folded into the file; a
		// fresh 4M-row log would make every page read look it up first.
		if _, err := db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			b.Fatal(err)
		}
		bench.db, bench.n, bench.edges, bench.setup = db, n, edges, time.Since(start)
		b.Logf("bench graph: %d assets, %d edges, built in %s", n, len(edges), bench.setup.Round(time.Millisecond))
	})
	if bench.db == nil {
		b.Fatal("bench graph setup failed")
	}
}

// floorAdjacency is the bench graph in the floor's representation.
func floorAdjacency() [][]int32 {
	return (&lineagetest.Graph{N: bench.n, Edges: bench.edges}).Adjacency()
}

// againstFloor runs op b.N times, each run of it after one lineagetest.FloorBFS over
// adj from asset 0 timed outside the benchmark's timer, so both see the
// same machine load and cache state. It reports how many assets the floor
// reaches, the floor's time and op's time as a ratio of it ("x-floor"),
// and returns op's time per run.
func againstFloor(b *testing.B, adj [][]int32, op func() error) time.Duration {
	reached := lineagetest.FloorBFS(adj, 0)
	var floorTotal time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		t0 := time.Now()
		lineagetest.FloorBFS(adj, 0)
		floorTotal += time.Since(t0)
		b.StartTimer()
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	per := b.Elapsed() / time.Duration(b.N)
	floor := floorTotal / time.Duration(b.N)
	b.ReportMetric(float64(reached), "reached")
	b.ReportMetric(float64(floor.Microseconds())/1000, "floor-ms")
	b.ReportMetric(float64(per)/float64(floor), "x-floor")
	return per
}

func heapMB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

// BenchmarkLoadIndex times loading the traversal index from the store.
func BenchmarkLoadIndex(b *testing.B) {
	benchGraph(b)
	ctx := context.Background()
	var idx *graphindex.Index
	before := heapMB()
	for b.Loop() {
		idx = nil
		var err error
		if idx, err = ReadIndex(ctx, bench.db); err != nil {
			b.Fatal(err)
		}
	}
	after := heapMB()
	perLoad := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(perLoad/(float64(len(bench.edges))/1e6), "s/Medges")
	b.ReportMetric(float64(idx.Bytes())/(1<<20), "index-MB")
	b.ReportMetric(after-before, "heap-MB")
	if idx.Len() != bench.n || idx.EdgeCount() != len(bench.edges) {
		b.Fatalf("index has %d assets, %d edges; want %d, %d", idx.Len(), idx.EdgeCount(), bench.n, len(bench.edges))
	}
	runtime.KeepAlive(idx)
}

// BenchmarkTraversal times the index's downstream walk from a component's
// first asset against lineagetest.FloorBFS over [][]int32 on the same graph in the same
// run, and reports the ratio.
func BenchmarkTraversal(b *testing.B) {
	benchGraph(b)
	ctx := context.Background()
	idx, err := ReadIndex(ctx, bench.db)
	if err != nil {
		b.Fatal(err)
	}
	adj := floorAdjacency()
	start, ok := idx.Node(1)
	if !ok {
		b.Fatal("no start asset")
	}
	want := lineagetest.FloorBFS(adj, 0)
	lim := graphindex.Limits{MaxDepth: MaxWalkDepth, MaxNodes: MaxWalkAssets}
	w := idx.BFS(ctx, []int32{start}, false, lim)
	if got := len(w.Order) - w.Starts; got != want || w.Budget != "" {
		b.Fatalf("index reached %d (budget %q), floor %d", got, w.Budget, want)
	}
	againstFloor(b, adj, func() error { idx.BFS(ctx, []int32{start}, false, lim); return nil })
}

// BenchmarkBlastRadius times the whole BlastRadius call (version check,
// resolution, walk, counts by kind, owners, the first page of the most urgent assets read
// from the store with paths and next runs) against the floor.
func BenchmarkBlastRadius(b *testing.B) {
	benchGraph(b)
	ctx := context.Background()
	g := New(bench.db, clock.NewFake(lineagetest.StoryTime))
	if _, err := g.Index(ctx); err != nil {
		b.Fatal(err)
	}
	adj := floorAdjacency()
	want := lineagetest.FloorBFS(adj, 0)
	p := BlastParams{Asset: "bench://a1", MaxDepth: MaxWalkDepth, MaxAssets: MaxWalkAssets, Timeout: "60s"}
	res, err := g.BlastRadius(ctx, p)
	if err != nil {
		b.Fatal(err)
	}
	if res.Total != want || res.Partial || len(res.Assets) != defaultLimit || len(res.Assets[0].Critical) == 0 {
		b.Fatalf("blast radius total %d partial %v listed %d; want %d", res.Total, res.Partial, len(res.Assets), want)
	}
	per := againstFloor(b, adj, func() error { _, err := g.BlastRadius(ctx, p); return err })
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/blast")
}

// BenchmarkBlastRadiusAfterWrite is BenchmarkBlastRadius with another
// store handle's write of one edge (through the Writer, as a note writes
// it) before each call, untimed: the call first brings the held index up
// to date from the change log. It also reports what the alternatives to
// the overlay cost on the same index: laying it out afresh in memory
// (compact-ms, what Apply does once the overlay grows past its bound) and
// reading it whole from the store (reload-ms, what every call after a
// write paid before the log).
func BenchmarkBlastRadiusAfterWrite(b *testing.B) {
	benchGraph(b)
	ctx := context.Background()
	g := New(bench.db, clock.NewFake(lineagetest.StoryTime))
	if _, err := g.Index(ctx); err != nil {
		b.Fatal(err)
	}
	other, err := store.OpenSQLite(ctx, bench.db.Source())
	if err != nil {
		b.Fatal(err)
	}
	defer other.Close()
	writer := New(other, nil)
	adj := floorAdjacency()
	comp := max(bench.n*1065/10000, 4)
	rng := rand.New(rand.NewPCG(9, 9))
	p := BlastParams{Asset: "bench://a1", MaxDepth: MaxWalkDepth, MaxAssets: MaxWalkAssets, Timeout: "60s"}
	var apply time.Duration
	per := againstFloor(b, adj, func() error {
		b.StopTimer()
		from, to := int64(rng.IntN(comp)+1), int64(rng.IntN(comp)+1)
		if from != to {
			if _, err := writer.Write(ctx, func(w *Writer) error { return w.Link(from, to, EdgeFeeds, SourceNote, nil, false) }); err != nil {
				return err
			}
		}
		b.StartTimer()
		t0 := time.Now()
		if _, err := g.Index(ctx); err != nil {
			return err
		}
		apply += time.Since(t0)
		_, err := g.BlastRadius(ctx, p)
		return err
	})
	b.StopTimer()
	idx, err := g.Index(ctx)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	idx.Compact()
	compact := time.Since(t0)
	t0 = time.Now()
	if _, err := ReadIndex(ctx, bench.db); err != nil {
		b.Fatal(err)
	}
	reload := time.Since(t0)
	if st := g.IndexStats(); st.Loads != 1 {
		b.Fatalf("the held index was loaded %d times, want once (%+v)", st.Loads, st)
	}
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/blast")
	b.ReportMetric(float64(apply.Microseconds())/1000/float64(b.N), "apply-ms")
	b.ReportMetric(float64(compact.Microseconds())/1000, "compact-ms")
	b.ReportMetric(float64(reload.Microseconds())/1000, "reload-ms")
}
