package graphindex

import (
	"slices"
	"sort"
)

// ChangeOp names what one logged change to the graph does to an index.
type ChangeOp uint8

// The changes an index applies. Each says what an asset or edge is now,
// not what happened to it, so applying one twice, or to an index that
// already saw it, leaves the same index.
const (
	// NodeSet: the asset From exists with this kind, flags, owner and
	// domain (added, or those changed).
	NodeSet ChangeOp = 1
	// NodeDel: the asset From is gone (folded into another); its edges go
	// with it.
	NodeDel ChangeOp = 2
	// EdgeSet: the edge From -> To exists with this kind.
	EdgeSet ChangeOp = 3
	// EdgeDel: the edge From -> To is gone.
	EdgeDel ChangeOp = 4
	// ColsSet: the pair From -> To has exactly the column lineage Cols
	// (none when empty).
	ColsSet ChangeOp = 5
	// Facts: facts the index does not hold (ids, names, titles, owners'
	// emails...) of the assets Seqs changed (none: facts no asset's row
	// holds). Apply skips it: it is for what holders read from the store
	// per asset, which they drop.
	Facts ChangeOp = 6
)

// Change is one logged change, by asset seq.
type Change struct {
	Op       ChangeOp
	From, To int64
	// Kind is the asset's kind (NodeSet) or the edge's (EdgeSet), as
	// stored; Codes maps it.
	Kind          string
	Flags         uint8
	Owner, Domain string
	// Cols are (from column, to column) pairs as stored.
	Cols [][2]string
	// Seqs are the assets a Facts change names.
	Seqs []int64
}

// overlay is what changed in an index since its arrays were laid out. An
// index never changes once published: Apply shares the overlay's maps
// copy-on-write (cowMap), copies its bitsets, and replaces rows; it never
// writes into a row, map or array another index can see.
type overlay struct {
	base  int32                // nodes in the arrays
	seqs  []int64              // seqs of the nodes added after them: base, base+1, ...
	added cowMap[int64, int32] // their seq -> node
	gone  cowMap[int32, bool]  // removed nodes

	// meta holds the kinds, flags, owners and domains that replace the
	// arrays', and those of added nodes; metaBits marks its nodes so a
	// walk pays one bit test for a node that is not in it.
	metaBits []uint64
	meta     cowMap[int32, NodeMeta]

	// out and in hold replaced rows (every added node has both), marked
	// in outBits and inBits.
	outBits, inBits []uint64
	out, in         cowMap[int32, adjRow]

	// cols replaces the arrays' column lineage by edge key; a nil value
	// means none.
	cols cowMap[uint64, []colMap]

	edges  int
	strIdx map[string]int32
}

// adjRow is one node's neighbours (in the order of their seqs) and the
// kinds of the edges to them.
type adjRow struct {
	nodes []int32
	kinds []uint8
}

func hasBit(bits []uint64, n int32) bool {
	return int(n>>6) < len(bits) && bits[n>>6]&(1<<(uint(n)&63)) != 0
}

func setBit(bits []uint64, n int32) []uint64 {
	for int(n>>6) >= len(bits) {
		bits = append(bits, 0)
	}
	bits[n>>6] |= 1 << (uint(n) & 63)
	return bits
}

// overlayRows is how many replaced rows and patched nodes an overlay may
// hold before Apply lays the index out afresh (Compact): walks look a
// replaced row up in a map, so a large overlay costs every walk a little,
// and compacting costs a few passes over the edges once per that many
// changes.
func overlayRows(nodes int) int { return max(4096, nodes/128) }

// Pending is the overlay's size in rows (replaced rows and patched nodes).
func (ix *Index) Pending() int {
	if ix.d == nil {
		return 0
	}
	return ix.d.out.len() + ix.d.in.len() + ix.d.meta.len()
}

// Apply returns the index brought up to graph version version and
// topology version topology by changes (in the order they were made),
// sharing ix's arrays. ix is left as it was: walks on it carry on. When the
// overlay has grown past overlayRows, the result is laid out afresh
// (Compact) instead.
func (ix *Index) Apply(version, topology int64, changes []Change, codes Codes) *Index {
	nx := ix.derive(version, topology)
	a := applier{ix: nx, codes: codes, ownOut: map[int32]bool{}, ownIn: map[int32]bool{}}
	for i := range changes {
		a.apply(&changes[i])
	}
	if nx.Pending() > overlayRows(nx.Len()) {
		// Past the bound a walk pays for many replaced rows; one pass
		// over the edges lays them out again (a few tens of
		// milliseconds at a million assets, against seconds to load).
		return nx.Compact()
	}
	return nx
}

// Relabel returns ix marked as answering for graph version version: a
// write that changed no fact the index holds moves the graph version, not
// the index. The result shares everything with ix but is a distinct index,
// so what callers keep per index (names read from the store) starts over.
func (ix *Index) Relabel(version int64) *Index {
	nx := *ix
	nx.Version = version
	return &nx
}

func (ix *Index) derive(version, topology int64) *Index {
	nx := *ix
	nx.Version, nx.Topology = version, topology
	// Appending to Strs copies it rather than writing into the array ix
	// reads.
	nx.Strs = slices.Clip(ix.Strs)
	if ix.d == nil {
		words := (len(ix.seqs) + 63) / 64
		nx.d = &overlay{base: int32(len(ix.seqs)), edges: len(ix.outDst),
			metaBits: make([]uint64, words), outBits: make([]uint64, words), inBits: make([]uint64, words)}
		return &nx
	}
	d := *ix.d
	d.seqs = slices.Clip(d.seqs)
	d.added, d.gone, d.meta = d.added.derive(), d.gone.derive(), d.meta.derive()
	d.out, d.in, d.cols = d.out.derive(), d.in.derive(), d.cols.derive()
	d.metaBits, d.outBits, d.inBits = slices.Clone(d.metaBits), slices.Clone(d.outBits), slices.Clone(d.inBits)
	d.strIdx = nil // rebuilt from Strs when a new name needs one
	nx.d = &d
	return &nx
}

// applier applies changes to an index being derived. Rows it allocated
// (own*) are its own and may be changed in place; any other row is shared
// and is copied before it changes.
type applier struct {
	ix            *Index
	codes         Codes
	ownOut, ownIn map[int32]bool
}

func (a *applier) apply(c *Change) {
	ix, d := a.ix, a.ix.d
	switch c.Op {
	case NodeSet:
		n, ok := ix.Node(c.From)
		if !ok {
			n = a.addNode(c.From)
		}
		d.meta.set(n, NodeMeta{Owner: a.intern(c.Owner), Domain: a.intern(c.Domain), Kind: a.codes.kindCode(c.Kind), Flags: c.Flags})
		d.metaBits = setBit(d.metaBits, n)
	case NodeDel:
		n, ok := ix.Node(c.From)
		if !ok {
			return
		}
		outs, _ := ix.Out(n)
		for _, v := range slices.Clone(outs) {
			if a.del(true, v, n) {
				d.edges--
			}
		}
		ins, _ := ix.In(n)
		for _, u := range slices.Clone(ins) {
			if a.del(false, u, n) {
				d.edges--
			}
		}
		a.setRow(false, n, adjRow{})
		a.setRow(true, n, adjRow{})
		d.gone.set(n, true)
	case EdgeSet:
		u, ok1 := ix.Node(c.From)
		v, ok2 := ix.Node(c.To)
		if !ok1 || !ok2 || u == v {
			return
		}
		k := a.codes.edgeKindCode([]byte(c.Kind))
		if a.set(false, u, v, k) {
			d.edges++
		}
		a.set(true, v, u, k)
	case EdgeDel:
		u, ok1 := ix.Node(c.From)
		v, ok2 := ix.Node(c.To)
		if !ok1 || !ok2 {
			return
		}
		if a.del(false, u, v) {
			d.edges--
		}
		a.del(true, v, u)
	case ColsSet:
		u, ok1 := ix.Node(c.From)
		v, ok2 := ix.Node(c.To)
		if !ok1 || !ok2 {
			return
		}
		var ms []colMap
		for _, p := range c.Cols {
			ms = addColMap(ms, p[0], p[1])
		}
		sortColMaps(ms)
		d.cols.set(edgeKey(u, v), ms)
	case Facts:
		// Nothing the index holds.
	}
}

// addNode numbers a new asset after every node the index has.
func (a *applier) addNode(seq int64) int32 {
	d := a.ix.d
	n := int32(a.ix.Len())
	d.seqs = append(d.seqs, seq)
	d.added.set(seq, n)
	a.setRow(false, n, adjRow{})
	a.setRow(true, n, adjRow{})
	return n
}

func (a *applier) intern(s string) int32 {
	if s == "" {
		return -1
	}
	d := a.ix.d
	if d.strIdx == nil {
		d.strIdx = make(map[string]int32, len(a.ix.Strs))
		for i, x := range a.ix.Strs {
			d.strIdx[x] = int32(i)
		}
	}
	if i, ok := d.strIdx[s]; ok {
		return i
	}
	i := int32(len(a.ix.Strs))
	a.ix.Strs = append(a.ix.Strs, s)
	d.strIdx[s] = i
	return i
}

func (a *applier) row(up bool, u int32) adjRow {
	if up {
		n, k := a.ix.In(u)
		return adjRow{n, k}
	}
	n, k := a.ix.Out(u)
	return adjRow{n, k}
}

// own returns u's row as one this applier may change in place.
func (a *applier) own(up bool, u int32) adjRow {
	owned := a.ownOut
	if up {
		owned = a.ownIn
	}
	r := a.row(up, u)
	if !owned[u] {
		r = adjRow{slices.Clone(r.nodes), slices.Clone(r.kinds)}
		owned[u] = true
	}
	return r
}

func (a *applier) setRow(up bool, u int32, r adjRow) {
	d := a.ix.d
	if up {
		d.in.set(u, r)
		d.inBits = setBit(d.inBits, u)
		a.ownIn[u] = true
		return
	}
	d.out.set(u, r)
	d.outBits = setBit(d.outBits, u)
	a.ownOut[u] = true
}

// find is where v is or belongs in row r, kept in the order of seqs.
func (a *applier) find(r adjRow, v int32) (int, bool) {
	seq := a.ix.Seq(v)
	i := sort.Search(len(r.nodes), func(i int) bool { return a.ix.Seq(r.nodes[i]) >= seq })
	return i, i < len(r.nodes) && r.nodes[i] == v
}

// set puts v with kind k in u's row (out, or in when up); it reports
// whether v is new there.
func (a *applier) set(up bool, u, v int32, k uint8) bool {
	i, found := a.find(a.row(up, u), v)
	if found && a.row(up, u).kinds[i] == k {
		return false
	}
	r := a.own(up, u)
	if found {
		r.kinds[i] = k
	} else {
		r.nodes = slices.Insert(r.nodes, i, v)
		r.kinds = slices.Insert(r.kinds, i, k)
	}
	a.setRow(up, u, r)
	return !found
}

// del takes v out of u's row; it reports whether v was there.
func (a *applier) del(up bool, u, v int32) bool {
	i, found := a.find(a.row(up, u), v)
	if !found {
		return false
	}
	r := a.own(up, u)
	r.nodes = slices.Delete(r.nodes, i, i+1)
	r.kinds = slices.Delete(r.kinds, i, i+1)
	a.setRow(up, u, r)
	return true
}

// Compact lays out what ix holds afresh in arrays, with no overlay,
// keeping every node's number: rows are copied in order (they are kept
// sorted), so it costs one sequential pass over the edges, and the result
// walks and answers exactly as ix does. A removed asset keeps its number
// as a hole with no edges until the index is loaded again.
func (ix *Index) Compact() *Index {
	d := ix.d
	if d == nil {
		return ix
	}
	n := ix.Len()
	nx := &Index{Version: ix.Version, Topology: ix.Topology, pools: ix.pools, numbering: ix.numbering,
		Strs: slices.Clip(ix.Strs), holes: ix.holes + d.gone.len()}
	nx.seqs = append(append(make([]int64, 0, n), ix.seqs...), d.seqs...)
	nx.meta = make([]NodeMeta, n)
	copy(nx.meta, ix.meta)
	d.meta.all(func(u int32, m NodeMeta) { nx.meta[u] = m })
	gone := func(u int32) bool { return d.gone.has(u) || int(u) < len(ix.seqs) && !ix.hasNode(u) }
	nx.indexSeqs(gone)
	nx.outOff, nx.outDst, nx.outKind = relay(n, d.edges, ix.Out)
	nx.inOff, nx.inSrc, nx.inKind = relay(n, d.edges, ix.In)
	nx.cols = make(map[uint64][]colMap, len(ix.cols))
	live := func(k uint64) bool { return !gone(int32(k>>32)) && !gone(int32(uint32(k))) }
	for k, ms := range ix.cols {
		if !d.cols.has(k) && live(k) {
			nx.cols[k] = ms
		}
	}
	d.cols.all(func(k uint64, ms []colMap) {
		if ms != nil && live(k) {
			nx.cols[k] = ms
		}
	})
	return nx
}

// relay copies n rows, edges entries in all, into compressed sparse rows.
func relay(n, edges int, row func(int32) ([]int32, []uint8)) (off, nodes []int32, kinds []uint8) {
	off = make([]int32, n+1)
	nodes = make([]int32, 0, edges)
	kinds = make([]uint8, 0, edges)
	for u := int32(0); int(u) < n; u++ {
		ns, ks := row(u)
		nodes = append(nodes, ns...)
		kinds = append(kinds, ks...)
		off[u+1] = int32(len(nodes))
	}
	return off, nodes, kinds
}

// SameNodes reports whether every node number of o names the same asset
// in ix, as between an index and any Apply (or Compact) derived from it:
// an added asset takes a number neither had, a removed one leaves a hole.
func (ix *Index) SameNodes(o *Index) bool {
	return ix.numbering != nil && ix.numbering == o.numbering && ix.Len() >= o.Len()
}
