package graphindex

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/lineage/lineagetest"
)

// The overlay against its alternatives, on lineagetest's synthetic graph
// in memory (DW_LINEAGE_BENCH_ASSETS assets, default 1,000,000): what one
// logged edge costs to apply with so many changes already in the overlay,
// what laying the whole index out afresh costs (Compact, the alternative
// of re-laying the CSR on every write, and what Apply does once the
// overlay passes its bound), and what a walk costs on an index carrying
// the largest overlay, against the same walk on the plain arrays.

func benchIndex(b *testing.B) (*Index, *lineagetest.Graph) {
	b.Helper()
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("DW_LINEAGE_BENCH_ASSETS")); err == nil && v >= 1000 {
		n = v
	}
	g := lineagetest.NewGraph(n)
	src := make([]int32, len(g.Edges))
	dst := make([]int32, len(g.Edges))
	for i, e := range g.Edges {
		src[i], dst[i] = e[0], e[1]
	}
	return FromEdges(n, src, dst, make([]uint8, len(src))), g
}

var benchCodes = Codes{Kinds: []string{"dataset"}, EdgeKinds: []string{"feeds"}}

// withEdges applies k random edges inside the first component (so the
// walk from node 0 reaches about as far), one Apply each, and adds them
// to adj.
func withEdges(ix *Index, k int, rng *rand.Rand, adj [][]int32) *Index {
	comp := max(ix.Len()*1065/10000, 4)
	for i := 0; i < k; i++ {
		u, v := int32(rng.IntN(comp)), int32(rng.IntN(comp))
		ix = ix.Apply(ix.Version+1, ix.Topology+1, []Change{{Op: EdgeSet, From: int64(u) + 1, To: int64(v) + 1, Kind: "feeds"}}, benchCodes)
		if adj != nil && u != v {
			adj[u] = append(adj[u], v)
		}
	}
	return ix
}

func BenchmarkApplyOneEdge(b *testing.B) {
	base, _ := benchIndex(b)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, pending := range []int{0, 1000, overlayRows(base.Len())/2 - 2} {
		ix := withEdges(base, pending, rng, nil)
		b.Run(fmt.Sprintf("overlay-%d", ix.Pending()), func(b *testing.B) {
			for b.Loop() {
				ix.Apply(ix.Version+1, ix.Topology+1, []Change{{Op: EdgeSet, From: int64(rng.IntN(ix.Len()) + 1), To: int64(rng.IntN(ix.Len()) + 1), Kind: "feeds"}}, benchCodes)
			}
		})
	}
	b.Run("compact", func(b *testing.B) {
		ix := withEdges(base, 100, rng, nil)
		for b.Loop() {
			ix.Compact()
		}
	})
}

// BenchmarkWalkOnOverlay walks from a component's first asset on the
// plain arrays and on an index carrying an overlay just under its bound,
// each against lineagetest.FloorBFS in the same run.
func BenchmarkWalkOnOverlay(b *testing.B) {
	base, g := benchIndex(b)
	rng := rand.New(rand.NewPCG(2, 2))
	adj := g.Adjacency()
	over := withEdges(base, overlayRows(base.Len())/2-2, rng, adj)
	lim := Limits{MaxDepth: 10000, MaxNodes: 10_000_000}
	for _, c := range []struct {
		name string
		ix   *Index
	}{{"plain", base}, {"overlay", over}} {
		b.Run(c.name, func(b *testing.B) {
			var floor time.Duration
			for b.Loop() {
				b.StopTimer()
				t := time.Now()
				// The floor walks the added edges too; the plain index
				// does not have them, so its walk is a little shorter.
				lineagetest.FloorBFS(adj, 0)
				floor += time.Since(t)
				b.StartTimer()
				c.ix.Release(c.ix.BFS(context.Background(), []int32{0}, false, lim))
			}
			b.ReportMetric(float64(b.Elapsed())/float64(floor), "x-floor")
			b.ReportMetric(float64(c.ix.Pending()), "pending-rows")
		})
	}
}
