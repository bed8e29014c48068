package graphindex

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// refWalk is the plainest BFS with the walk's rules, written for the test
// alone: a parent per node, levels, and a budget only when something was
// left unexplored. Neighbours come from Out and In, which see the overlay.
type refWalk struct {
	order, parent, dist []int32
	budget              string
}

func refBFS(ix *Index, starts []int32, up bool, lim Limits) refWalk {
	var r refWalk
	seen := map[int32]bool{}
	for _, s := range starts {
		if !seen[s] {
			seen[s] = true
			r.order, r.parent, r.dist = append(r.order, s), append(r.parent, -1), append(r.dist, 0)
		}
	}
	maxNodes := lim.MaxNodes + len(r.order)
	for h := 0; h < len(r.order); h++ {
		var next []int32
		if up {
			next, _ = ix.In(r.order[h])
		} else {
			next, _ = ix.Out(r.order[h])
		}
		if r.dist[h] >= int32(lim.MaxDepth) {
			for _, v := range next {
				if !seen[v] {
					r.budget = BudgetDepth
				}
			}
			continue
		}
		for _, v := range next {
			if seen[v] {
				continue
			}
			if len(r.order) >= maxNodes {
				r.budget = BudgetSize
				return r
			}
			seen[v] = true
			r.order, r.parent, r.dist = append(r.order, v), append(r.parent, int32(h)), append(r.dist, r.dist[h]+1)
		}
	}
	return r
}

// The walk, which records where each head's children begin rather than a
// parent per node, answers what the plainest BFS answers: the same order,
// parents, distances, paths and budget, on random graphs with and without
// an overlay, both ways, from several starts (repeated ones included),
// under depth and size budgets, on arrays reused from earlier walks.
func TestBFSMatchesThePlainestBFS(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(18, 6))
	codes := Codes{Kinds: []string{"dataset"}, EdgeKinds: []string{"feeds"}}
	for g := 0; g < 60; g++ {
		n := 2 + rng.IntN(300)
		m := rng.IntN(4 * n)
		src, dst := make([]int32, m), make([]int32, m)
		for i := range src {
			src[i], dst[i] = int32(rng.IntN(n)), int32(rng.IntN(n))
		}
		ix := FromEdges(n, src, dst, make([]uint8, m))
		if g%2 == 1 { // rows replaced by logged edges: the overlay's path
			for k := rng.IntN(20); k > 0; k-- {
				ix = ix.Apply(ix.Version+1, ix.Topology+1, []Change{{Op: EdgeSet, From: int64(rng.IntN(n)) + 1, To: int64(rng.IntN(n)) + 1, Kind: "feeds"}}, codes)
			}
		}
		for q := 0; q < 40; q++ {
			starts := make([]int32, 1+rng.IntN(3))
			for i := range starts {
				starts[i] = int32(rng.IntN(n))
			}
			if rng.IntN(4) == 0 {
				starts = append(starts, starts[0])
			}
			lim := Limits{MaxDepth: rng.IntN(8), MaxNodes: 1 + rng.IntN(n)}
			if rng.IntN(3) == 0 {
				lim = Limits{MaxDepth: MaxDepthForTest, MaxNodes: n}
			}
			up := rng.IntN(2) == 0
			name := fmt.Sprintf("graph %d (n %d, %d edges, overlay %v) query %d: from %v up %v limits %+v", g, n, m, ix.d != nil, q, starts, up, lim)
			want := refBFS(ix, starts, up, lim)
			w := ix.BFS(ctx, starts, up, lim)
			if !slices.Equal(w.Order, want.order) || w.Budget != want.budget || w.Starts != len(want.order)-countReached(want) {
				t.Fatalf("%s:\norder %v budget %q starts %d\nwant  %v budget %q", name, w.Order, w.Budget, w.Starts, want.order, want.budget)
			}
			if got := w.Parents(); !slices.Equal(got, want.parent) {
				t.Fatalf("%s: parents %v, want %v", name, got, want.parent)
			}
			for p := range w.Order {
				if got := w.Parent(int32(p)); got != want.parent[p] {
					t.Fatalf("%s: parent of position %d is %d, want %d", name, p, got, want.parent[p])
				}
				if got := w.Distance(int32(p)); got != want.dist[p] {
					t.Fatalf("%s: distance of position %d is %d, want %d", name, p, got, want.dist[p])
				}
				var path []int32
				for at := int32(p); at >= 0; at = want.parent[at] {
					path = append([]int32{want.order[at]}, path...)
				}
				if got := w.Path(int32(p)); !slices.Equal(got, path) {
					t.Fatalf("%s: path to position %d is %v, want %v", name, p, got, path)
				}
			}
			ix.Release(w)
		}
	}
}

// MaxDepthForTest is a depth no test graph reaches.
const MaxDepthForTest = 1 << 20

func countReached(r refWalk) int {
	n := 0
	for _, p := range r.parent {
		if p >= 0 {
			n++
		}
	}
	return n
}

// A walk cut by its deadline stops where it was, partial for time, with
// every node it reached placed and parented as the full walk places them.
func TestBFSCutByTimeIsAPrefix(t *testing.T) {
	n := 50_000
	src, dst := make([]int32, 0, n), make([]int32, 0, n)
	for i := 1; i < n; i++ { // a chain: one head a level, so the check at every 1,024th head fires mid-walk
		src, dst = append(src, int32(i-1)), append(dst, int32(i))
	}
	ix := FromEdges(n, src, dst, make([]uint8, len(src)))
	full := ix.BFS(context.Background(), []int32{0}, false, Limits{MaxDepth: n, MaxNodes: n})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := ix.BFS(ctx, []int32{0}, false, Limits{MaxDepth: n, MaxNodes: n, Deadline: time.Now().Add(time.Hour)})
	if w.Budget != BudgetTime || len(w.Order) == 0 || len(w.Order) >= n || !slices.Equal(w.Order, full.Order[:len(w.Order)]) {
		t.Fatalf("cancelled walk: budget %q, %d of %d reached", w.Budget, len(w.Order), n)
	}
	for p := range w.Order {
		if w.Parent(int32(p)) != full.Parent(int32(p)) || w.Distance(int32(p)) != full.Distance(int32(p)) {
			t.Fatalf("position %d: parent %d distance %d, the full walk %d %d", p, w.Parent(int32(p)), w.Distance(int32(p)), full.Parent(int32(p)), full.Distance(int32(p)))
		}
	}
}

// A size budget bounds what a walk holds, not only what it answers: a hub
// with 100k children under a budget of ten grows no array for the row.
func TestBFSSizeBudgetBoundsItsArrays(t *testing.T) {
	n := 100_001
	src, dst := make([]int32, 0, n), make([]int32, 0, n)
	for i := 1; i < n; i++ {
		src, dst = append(src, 0), append(dst, int32(i))
	}
	ix := FromEdges(n, src, dst, make([]uint8, len(src)))
	for round := 0; round < 2; round++ { // the second on the first's released arrays
		w := ix.BFS(context.Background(), []int32{0}, false, Limits{MaxDepth: 10, MaxNodes: 10})
		if len(w.Order) != 11 || w.Budget != BudgetSize || cap(w.Order) > 1024 {
			t.Fatalf("round %d: reached %d, budget %q, holding an array of %d", round, len(w.Order), w.Budget, cap(w.Order))
		}
		ix.Release(w)
	}
}
