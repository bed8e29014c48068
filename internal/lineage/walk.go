package lineage

import (
	"context"
	"sort"
	"time"
)

// Budget names the limit that cut a traversal short.
const (
	BudgetDepth = "depth"
	BudgetSize  = "size"
	BudgetTime  = "time"
)

// limits bound one traversal. A zero deadline means no time budget.
type limits struct {
	maxDepth int
	maxNodes int
	deadline time.Time
}

// walk is a breadth-first traversal: nodes in the order reached (starts
// first), each with the position of the node it was reached from.
// Positions, not node numbers, keep path reconstruction free of any
// node-sized lookup table. Distances come from levels (the position where
// each distance begins) for a plain walk, or per node for a column walk,
// whose revisits break level order.
type walk struct {
	order  []int32
	parent []int32
	dist   []int32
	levels []int32
	starts int
	budget string
}

// closeLevels records the level of nodes reached but not yet expanded when
// a budget stops the walk early.
func (w *walk) closeLevels(next int) *walk {
	if next < len(w.order) && int32(next) > w.levels[len(w.levels)-1] {
		w.levels = append(w.levels, int32(next))
	}
	return w
}

// distance is the hop count of the node at position p.
func (w *walk) distance(p int32) int32 {
	if w.dist != nil {
		return w.dist[p]
	}
	// The last level starting at or before p.
	lo, hi := 0, len(w.levels)
	for lo < hi {
		m := (lo + hi) / 2
		if w.levels[m] <= p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return int32(lo - 1)
}

func (w *walk) add(node, parent, dist int32) {
	w.order = append(w.order, node)
	w.parent = append(w.parent, parent)
	w.dist = append(w.dist, dist)
}

// path returns the node numbers from the start to the node at position p.
func (w *walk) path(p int32) []int32 {
	var out []int32
	for ; p >= 0; p = w.parent[p] {
		out = append(out, w.order[p])
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// scratch is a visited set reused across traversals: a node is visited when
// its mark equals the current epoch, so the set is cleared only once every
// 255 runs. One byte per node keeps it as cache-friendly as a []bool.
type scratch struct {
	mark  []uint8
	epoch uint8
}

func (ix *Index) getScratch() *scratch {
	if s, ok := ix.scratch.Get().(*scratch); ok {
		s.epoch++
		if s.epoch == 0 { // wrapped: old marks could collide, start over
			clear(s.mark)
			s.epoch = 1
		}
		return s
	}
	return &scratch{mark: make([]uint8, len(ix.seqs)), epoch: 1}
}

func (ix *Index) adjacency(up bool) (off, adj []int32, kinds []uint8) {
	if up {
		return ix.inOff, ix.inSrc, ix.inKind
	}
	return ix.outOff, ix.outDst, ix.outKind
}

// bfs walks from the starts along edges (upstream when up) within the
// limits. A budget that stops it is recorded only when something was
// actually left unexplored, so an answer is never marked partial for a
// limit it merely touched.
func (ix *Index) bfs(ctx context.Context, starts []int32, up bool, lim limits) *walk {
	sc := ix.getScratch()
	defer ix.scratch.Put(sc)
	mark, epoch := sc.mark, sc.epoch
	off, adj, _ := ix.adjacency(up)
	w := &walk{order: make([]int32, 0, 256), parent: make([]int32, 0, 256), levels: []int32{0}}
	for _, s := range starts {
		if mark[s] != epoch {
			mark[s] = epoch
			w.order = append(w.order, s)
			w.parent = append(w.parent, -1)
		}
	}
	w.starts = len(w.order)
	maxDepth, maxNodes := int32(lim.maxDepth), lim.maxNodes+w.starts
	timed := !lim.deadline.IsZero()
	d, levelEnd := int32(0), len(w.order)
	for head := 0; head < len(w.order); head++ {
		if head == levelEnd {
			d++
			levelEnd = len(w.order)
			w.levels = append(w.levels, int32(head))
		}
		if head&1023 == 1023 && (timed && time.Now().After(lim.deadline) || ctx.Err() != nil) {
			w.budget = BudgetTime
			return w.closeLevels(levelEnd)
		}
		u := w.order[head]
		next := adj[off[u]:off[u+1]]
		if d >= maxDepth {
			for _, v := range next {
				if mark[v] != epoch {
					w.budget = BudgetDepth
					break
				}
			}
			continue
		}
		for _, v := range next {
			if mark[v] == epoch {
				continue
			}
			if len(w.order) >= maxNodes {
				w.budget = BudgetSize
				return w.closeLevels(levelEnd)
			}
			mark[v] = epoch
			w.order = append(w.order, v)
			w.parent = append(w.parent, int32(head))
		}
	}
	return w
}

// colSet is the set of a node's columns a change may affect; all means
// every column (no narrowing is possible).
type colSet struct {
	all  bool
	cols map[string]struct{}
}

func (c *colSet) union(o *colSet) bool {
	if c.all {
		return false
	}
	if o.all {
		c.all, c.cols = true, nil
		return true
	}
	grew := false
	for k := range o.cols {
		if _, ok := c.cols[k]; !ok {
			if c.cols == nil {
				c.cols = map[string]struct{}{}
			}
			c.cols[k] = struct{}{}
			grew = true
		}
	}
	return grew
}

func (c *colSet) list() []string {
	if c.all {
		return nil
	}
	out := make([]string, 0, len(c.cols))
	for k := range c.cols {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// transfer is what of `in` reaches the far end of an edge with the given
// column lineage: mapped columns, columns a job reads (to ""), everything
// when a read column affects the whole target (to "*"). nil means nothing
// the change touches flows along the edge.
func transfer(in *colSet, maps []colMap) *colSet {
	if in.all {
		return &colSet{all: true}
	}
	var out *colSet
	for _, m := range maps {
		if _, ok := in.cols[m.from]; !ok {
			continue
		}
		if out == nil {
			out = &colSet{cols: map[string]struct{}{}}
		}
		switch m.to {
		case "*":
			return &colSet{all: true}
		case "":
			out.cols[m.from] = struct{}{}
		default:
			out.cols[m.to] = struct{}{}
		}
	}
	return out
}

// columnWalk is bfs narrowed by column lineage: from the start's columns,
// an edge is followed only when it carries one of the affected columns. An
// edge without column lineage is followed conservatively (the far end is
// affected in full) and reported, so the answer says where it widened.
// Column sets only grow, so revisiting a node whose set grew terminates,
// cycles included.
func (ix *Index) columnWalk(ctx context.Context, start int32, cols []string, lim limits) (*walk, []*colSet, [][2]int32) {
	w := &walk{}
	pos := map[int32]int32{start: 0}
	startSet := &colSet{cols: map[string]struct{}{}}
	for _, c := range cols {
		startSet.cols[c] = struct{}{}
	}
	states := []*colSet{startSet}
	w.add(start, -1, 0)
	w.starts = 1
	var unknown [][2]int32
	seenUnknown := map[uint64]bool{}
	queue := []int32{0}
	queued := map[int32]bool{0: true}
	steps := 0
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		queued[p] = false
		steps++
		if steps&255 == 0 && (!lim.deadline.IsZero() && time.Now().After(lim.deadline) || ctx.Err() != nil) {
			w.budget = BudgetTime
			break
		}
		u, d, su := w.order[p], w.dist[p], states[p]
		if d >= int32(lim.maxDepth) {
			for _, v := range ix.outDst[ix.outOff[u]:ix.outOff[u+1]] {
				if _, seen := pos[v]; !seen {
					if maps, ok := ix.cols[edgeKey(u, v)]; !ok || transfer(su, maps) != nil {
						w.budget = BudgetDepth
						break
					}
				}
			}
			continue
		}
		for _, v := range ix.outDst[ix.outOff[u]:ix.outOff[u+1]] {
			var sv *colSet
			if maps, ok := ix.cols[edgeKey(u, v)]; ok {
				sv = transfer(su, maps)
			} else {
				if !su.all {
					if k := edgeKey(u, v); !seenUnknown[k] {
						seenUnknown[k] = true
						unknown = append(unknown, [2]int32{u, v})
					}
				}
				sv = &colSet{all: true}
			}
			if sv == nil {
				continue
			}
			q, seen := pos[v]
			if !seen {
				if len(w.order)-w.starts >= lim.maxNodes {
					w.budget = BudgetSize
					return w, states, unknown
				}
				q = int32(len(w.order))
				pos[v] = q
				w.add(v, p, d+1)
				states = append(states, sv)
			} else if !states[q].union(sv) {
				continue
			}
			if !queued[q] {
				queued[q] = true
				queue = append(queue, q)
			}
		}
	}
	return w, states, unknown
}
