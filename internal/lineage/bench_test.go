package lineage

import (
	"context"
	"github.com/dataworkers/dw/internal/lineage/graphindex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
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
		comp := n * 1065 / 10000
		rng := rand.New(rand.NewPCG(7, 11))
		edges := make([][2]int32, 0, 3*n)
		for i := 0; i < n; i++ {
			base := i / comp * comp
			size := min(comp, n-base)
			var picked [3]int32
			for k := 0; k < 3; k++ {
			again:
				j := int32(base + rng.IntN(size))
				if int(j) == i || (k > 0 && picked[0] == j) || (k > 1 && picked[1] == j) {
					goto again
				}
				picked[k] = j
				edges = append(edges, [2]int32{int32(i), j})
			}
		}
		dir, err := os.MkdirTemp("", "dw-lineage-bench-")
		if err != nil {
			b.Fatal(err)
		}
		bench.dir = dir
		db, err := store.OpenSQLite(context.Background(), filepath.Join(dir, "bench.db"))
		if err != nil {
			b.Fatal(err)
		}
		bulkLoad(b, db, n, edges)
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

// floorAdjacency is the baseline representation: a Go slice per node.
func floorAdjacency(n int, edges [][2]int32) [][]int32 {
	adj := make([][]int32, n)
	for _, e := range edges {
		adj[e[0]] = append(adj[e[0]], e[1])
	}
	return adj
}

// floorBFS is the plainest breadth-first search: the floor no index can beat by much.
func floorBFS(adj [][]int32, start int32) int {
	visited := make([]bool, len(adj))
	visited[start] = true
	queue := []int32{start}
	for h := 0; h < len(queue); h++ {
		for _, v := range adj[queue[h]] {
			if !visited[v] {
				visited[v] = true
				queue = append(queue, v)
			}
		}
	}
	return len(queue) - 1
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
// first asset against floorBFS over [][]int32 on the same graph in the same
// run, and reports the ratio.
func BenchmarkTraversal(b *testing.B) {
	benchGraph(b)
	ctx := context.Background()
	idx, err := ReadIndex(ctx, bench.db)
	if err != nil {
		b.Fatal(err)
	}
	adj := floorAdjacency(bench.n, bench.edges)
	start, ok := idx.Node(1)
	if !ok {
		b.Fatal("no start asset")
	}
	want := floorBFS(adj, 0)
	lim := graphindex.Limits{MaxDepth: maxMaxDepth, MaxNodes: maxMaxAssets}
	w := idx.BFS(ctx, []int32{start}, false, lim)
	if got := len(w.Order) - w.Starts; got != want || w.Budget != "" {
		b.Fatalf("index reached %d (budget %q), floor %d", got, w.Budget, want)
	}

	// The floor runs interleaved with the index, outside the timer, so both
	// see the same machine load and cache state.
	var floorTotal time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		t0 := time.Now()
		floorBFS(adj, 0)
		floorTotal += time.Since(t0)
		b.StartTimer()
		idx.BFS(ctx, []int32{start}, false, lim)
	}
	per := b.Elapsed() / time.Duration(b.N)
	floor := floorTotal / time.Duration(b.N)
	b.ReportMetric(float64(want), "reached")
	b.ReportMetric(float64(floor.Microseconds())/1000, "floor-ms")
	b.ReportMetric(float64(per)/float64(floor), "x-floor")
}

// BenchmarkBlastRadius times the whole BlastRadius call (version check,
// resolution, walk, counts by kind, owners, the first page of the most urgent assets read
// from the store with paths and next runs) against the floor.
func BenchmarkBlastRadius(b *testing.B) {
	benchGraph(b)
	ctx := context.Background()
	g := New(bench.db, clock.NewFake(storyTime))
	if _, err := g.Index(ctx); err != nil {
		b.Fatal(err)
	}
	adj := floorAdjacency(bench.n, bench.edges)
	want := floorBFS(adj, 0)
	p := BlastParams{Asset: "bench://a1", MaxDepth: maxMaxDepth, MaxAssets: maxMaxAssets, Timeout: "60s"}
	res, err := g.BlastRadius(ctx, p)
	if err != nil {
		b.Fatal(err)
	}
	if res.Total != want || res.Partial || len(res.Assets) != defaultLimit || len(res.Assets[0].Critical) == 0 {
		b.Fatalf("blast radius total %d partial %v listed %d; want %d", res.Total, res.Partial, len(res.Assets), want)
	}
	var floorTotal time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		t0 := time.Now()
		floorBFS(adj, 0)
		floorTotal += time.Since(t0)
		b.StartTimer()
		if _, err := g.BlastRadius(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	per := b.Elapsed() / time.Duration(b.N)
	floor := floorTotal / time.Duration(b.N)
	b.ReportMetric(float64(want), "reached")
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/blast")
	b.ReportMetric(float64(floor.Microseconds())/1000, "floor-ms")
	b.ReportMetric(float64(per)/float64(floor), "x-floor")
}
