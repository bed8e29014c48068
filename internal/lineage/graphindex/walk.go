package graphindex

import (
	"context"
	"slices"
	"sort"
	"time"
)

// Budget names the limit that cut a traversal short.
const (
	BudgetDepth = "depth"
	BudgetSize  = "size"
	BudgetTime  = "time"
)

// Limits bound one traversal. A zero deadline means no time budget.
type Limits struct {
	MaxDepth int
	MaxNodes int
	Deadline time.Time
}

// Walk is a breadth-first traversal: nodes in the order reached (starts
// first), each with the position of the node it was reached from (Parent).
// Positions, not node numbers, keep path reconstruction free of any
// node-sized lookup table. Distances come from levels (the position where
// each distance begins) for a plain walk, or per node for a column walk,
// whose revisits break level order.
//
// A plain walk does not write a parent per node: BFS appends a head's
// children in a run, so it records where each head's run begins (kids),
// once per head, and Parent finds a position's head by binary search. Its
// inner loop (expand) then writes one array per edge followed, not two.
type Walk struct {
	Order  []int32
	kids   []int32    // plain walk: kids[h] is the position of head h's first child; one past the last head, len(Order)
	parent []int32    // column walk: each position's parent
	metas  []NodeMeta // ReachedMetas' array, reused like Order's
	dist   []int32
	levels []int32
	Starts int
	Budget string
}

// closeLevels records the level of nodes reached but not yet expanded when
// a budget stops the walk early.
func (w *Walk) closeLevels(next int) *Walk {
	if next < len(w.Order) && int32(next) > w.levels[len(w.levels)-1] {
		w.levels = append(w.levels, int32(next))
	}
	return w
}

// Distance is the hop count of the node at position p.
func (w *Walk) Distance(p int32) int32 {
	if w.dist != nil {
		return w.dist[p]
	}
	return lastAtOrBefore(w.levels, p) // the level starting at or before p
}

// Parent is the position of the node the node at position p was reached
// from, -1 for a start.
func (w *Walk) Parent(p int32) int32 {
	if int(p) < w.Starts {
		return -1
	}
	if w.parent != nil {
		return w.parent[p]
	}
	// The head whose run of children begins at or before p (a head with
	// no children begins its run where the next one does).
	return lastAtOrBefore(w.kids, p)
}

// lastAtOrBefore is the index of the last of starts, ascending, that is at
// most p (-1 when none is).
func lastAtOrBefore(starts []int32, p int32) int32 {
	return int32(sort.Search(len(starts), func(i int) bool { return starts[i] > p })) - 1
}

// Parents is every position's parent, -1 for the starts, for callers that
// read them all.
func (w *Walk) Parents() []int32 {
	if w.parent != nil {
		return w.parent
	}
	out := make([]int32, len(w.Order))
	for p := range w.Starts {
		out[p] = -1
	}
	for h := 0; h+1 < len(w.kids); h++ {
		for p := w.kids[h]; p < w.kids[h+1]; p++ {
			out[p] = int32(h)
		}
	}
	return out
}

func (w *Walk) add(node, parent, dist int32) {
	w.Order = append(w.Order, node)
	w.parent = append(w.parent, parent)
	w.dist = append(w.dist, dist)
}

// Path returns the node numbers from the start to the node at position p.
func (w *Walk) Path(p int32) []int32 {
	var out []int32
	for ; p >= 0; p = w.Parent(p) {
		out = append(out, w.Order[p])
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
	if s, ok := ix.pools.scratch.Get().(*scratch); ok {
		s.epoch++
		if s.epoch == 0 { // wrapped: old marks could collide, start over
			clear(s.mark)
			s.epoch = 1
		}
		if n := ix.Len(); len(s.mark) < n {
			// Assets added since the set was made: a zero mark is never
			// the current epoch.
			s.mark = append(s.mark, make([]uint8, n-len(s.mark))...)
		}
		return s
	}
	return &scratch{mark: make([]uint8, ix.Len()), epoch: 1}
}

// walkBufs are the backing arrays of a released walk.
type walkBufs struct {
	order, kids []int32
	metas       []NodeMeta
}

// newWalk starts a walk on released arrays when there are some.
func (ix *Index) newWalk() *Walk {
	if b, ok := ix.pools.walks.Get().(*walkBufs); ok {
		return &Walk{Order: b.order[:0], kids: b.kids[:0], metas: b.metas[:0], levels: []int32{0}}
	}
	return &Walk{Order: make([]int32, 0, 256), kids: make([]int32, 0, 256), levels: []int32{0}}
}

// Release hands a plain walk's arrays back for the next BFS on this index.
// The caller must not use w, nor any slice of its Order or Parents, nor
// what ReachedMetas returned for it, after.
func (ix *Index) Release(w *Walk) {
	if w == nil || w.dist != nil || cap(w.Order) == 0 {
		return
	}
	ix.pools.walks.Put(&walkBufs{order: w.Order, kids: w.kids, metas: w.metas})
	w.Order, w.kids, w.metas = nil, nil, nil
}

// ReachedMetas is the meta of each node the walk reached past its
// starts, in Order (MetasOf), in an array the walk keeps and Release hands
// on: describing a blast radius of 100k assets otherwise allocated and
// zeroed a new 1.2 MB array on every call (4% of a warm call's CPU through
// MCP). It is valid until w is released.
func (ix *Index) ReachedMetas(w *Walk) []NodeMeta {
	// Grown once to the size needed: appended from a walk with no array
	// to reuse, it cost six times the bytes of one array of that size.
	w.metas = ix.MetasOf(slices.Grow(w.metas[:0], len(w.Order)-w.Starts), w.Order[w.Starts:])
	return w.metas
}

// adjacency is one direction's arrays, and the overlay's replaced rows
// in that direction (nil bits when there are none).
func (ix *Index) adjacency(up bool) (off, adj []int32, bits []uint64, rows *cowMap[int32, adjRow]) {
	if up {
		off, adj = ix.inOff, ix.inSrc
	} else {
		off, adj = ix.outOff, ix.outDst
	}
	if ix.d != nil {
		if up {
			bits, rows = ix.d.inBits, &ix.d.in
		} else {
			bits, rows = ix.d.outBits, &ix.d.out
		}
	}
	return off, adj, bits, rows
}

// BFS walks from the starts along edges (upstream when up) within the
// limits. A budget that stops it is recorded only when something was
// actually left unexplored, so an answer is never marked partial for a
// limit it merely touched.
func (ix *Index) BFS(ctx context.Context, starts []int32, up bool, lim Limits) *Walk {
	sc := ix.getScratch()
	defer ix.pools.scratch.Put(sc)
	mark, epoch := sc.mark, sc.epoch
	off, adj, bits, rows := ix.adjacency(up)
	w := ix.newWalk()
	// The walk runs on locals and fills Order by index, grown ahead of
	// each head's row, so its inner loop keeps no slice header that an
	// append would load and store (see Walk).
	order, kids := w.Order[:cap(w.Order)], w.kids
	n := 0
	for _, s := range starts {
		if mark[s] != epoch {
			mark[s] = epoch
			order = room(order, n+1)
			order[n] = s
			n++
		}
	}
	w.Starts = n
	maxDepth, maxNodes := int32(lim.MaxDepth), lim.MaxNodes+w.Starts
	timed := !lim.Deadline.IsZero()
	// A time or size budget that cuts the walk ends it at once; the level
	// after the one in hand begins at resume.
	cut, resume := "", 0
walk:
	for d, lo := int32(0), 0; lo < n; d++ {
		hi := n // this level is [lo, hi)
		if d > 0 {
			w.levels = append(w.levels, int32(lo))
		}
		for head := lo; head < hi; head++ {
			if head&1023 == 1023 && (timed && time.Now().After(lim.Deadline) || ctx.Err() != nil) {
				cut, resume = BudgetTime, hi
				break walk
			}
			u := order[head]
			var next []int32
			// A replaced row costs a map lookup; any other, one bit test
			// (the bits are a node in eight bytes' worth, so they stay in
			// cache).
			if bits != nil && int(u>>6) < len(bits) && bits[u>>6]&(1<<(uint(u)&63)) != 0 {
				r, _ := rows.get(u)
				next = r.nodes
			} else {
				next = adj[off[u]:off[u+1]]
			}
			if d >= maxDepth {
				// Only a neighbour left unreached makes the answer partial.
				for _, v := range next {
					if mark[v] != epoch {
						w.Budget = BudgetDepth
						break
					}
				}
				continue
			}
			kids = append(kids, int32(n))
			if n+len(next) > maxNodes {
				// The size budget falls inside this row: room for what it
				// allows, not for the row (a hub's 100k children under a
				// budget of ten had the walk hold a 400 KB array).
				order = room(order, maxNodes)
				for _, v := range next {
					if mark[v] == epoch {
						continue
					}
					if n >= maxNodes {
						cut, resume = BudgetSize, hi
						break walk
					}
					mark[v] = epoch
					order[n] = v
					n++
				}
				continue
			}
			order = room(order, n+len(next))
			n = expand(next, mark, epoch, order[:n+len(next)], n)
		}
		lo = hi
	}
	w.Order, w.kids = order[:n], append(kids, int32(n))
	if cut != "" {
		w.Budget = cut
		return w.closeLevels(resume)
	}
	return w
}

// expand puts the nodes of next not yet marked in out from position n on,
// marking them, and returns the next free position. It is the walk's inner
// loop, kept out of BFS on purpose: inlined there, the compiler kept the
// loop's own variables (the epoch among them) on the stack and loaded them
// again for every edge, as the walk's old loop did with its two appends.
//
//go:noinline
func expand(next []int32, mark []uint8, epoch uint8, out []int32, n int) int {
	for _, v := range next {
		if mark[v] != epoch {
			mark[v] = epoch
			out[n] = v
			n++
		}
	}
	return n
}

// room returns order, grown if need be, at its full capacity and at
// least need long.
func room(order []int32, need int) []int32 {
	if need > len(order) {
		order = slices.Grow(order, need-len(order))
	}
	return order[:cap(order)]
}

// ColSet is the set of a node's columns a change may affect; all means
// every column (no narrowing is possible).
type ColSet struct {
	all  bool
	cols map[string]struct{}
}

func (c *ColSet) union(o *ColSet) bool {
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

// List is the set's columns; nil when the set is every column.
func (c *ColSet) List() []string {
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
func transfer(in *ColSet, maps []colMap) *ColSet {
	if in.all {
		return &ColSet{all: true}
	}
	var out *ColSet
	for _, m := range maps {
		if _, ok := in.cols[m.from]; !ok {
			continue
		}
		if out == nil {
			out = &ColSet{cols: map[string]struct{}{}}
		}
		switch m.to {
		case "*":
			return &ColSet{all: true}
		case "":
			out.cols[m.from] = struct{}{}
		default:
			out.cols[m.to] = struct{}{}
		}
	}
	return out
}

// ColumnWalk is BFS narrowed by column lineage: from the start's columns,
// an edge is followed only when it carries one of the affected columns. An
// edge without column lineage is followed conservatively (the far end is
// affected in full) and reported, so the answer says where it widened.
// Column sets only grow, so revisiting a node whose set grew terminates,
// cycles included.
func (ix *Index) ColumnWalk(ctx context.Context, start int32, cols []string, lim Limits) (*Walk, []*ColSet, [][2]int32) {
	w := &Walk{}
	pos := map[int32]int32{start: 0}
	startSet := &ColSet{cols: map[string]struct{}{}}
	for _, c := range cols {
		startSet.cols[c] = struct{}{}
	}
	states := []*ColSet{startSet}
	w.add(start, -1, 0)
	w.Starts = 1
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
		if steps&255 == 0 && (!lim.Deadline.IsZero() && time.Now().After(lim.Deadline) || ctx.Err() != nil) {
			w.Budget = BudgetTime
			break
		}
		u, d, su := w.Order[p], w.dist[p], states[p]
		outs, _ := ix.Out(u)
		if d >= int32(lim.MaxDepth) {
			for _, v := range outs {
				if _, seen := pos[v]; !seen {
					if maps, ok := ix.colsOf(u, v); !ok || transfer(su, maps) != nil {
						w.Budget = BudgetDepth
						break
					}
				}
			}
			continue
		}
		for _, v := range outs {
			var sv *ColSet
			if maps, ok := ix.colsOf(u, v); ok {
				sv = transfer(su, maps)
			} else {
				if !su.all {
					if k := edgeKey(u, v); !seenUnknown[k] {
						seenUnknown[k] = true
						unknown = append(unknown, [2]int32{u, v})
					}
				}
				sv = &ColSet{all: true}
			}
			if sv == nil {
				continue
			}
			q, seen := pos[v]
			if !seen {
				if len(w.Order)-w.Starts >= lim.MaxNodes {
					w.Budget = BudgetSize
					return w, states, unknown
				}
				q = int32(len(w.Order))
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
