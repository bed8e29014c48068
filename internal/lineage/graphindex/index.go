// Package graphindex is the context graph's traversal index: an immutable,
// compact snapshot of the lineage tables (assets numbered 0..n-1, edges in
// compressed sparse rows both ways, per-asset kind, flags, owner and domain,
// column lineage by edge) and the walks over it: breadth-first within depth,
// size and time budgets, column walks, field walks. It only reads the
// store; lineage loads it, holds it per graph version and turns node
// numbers back into assets.
package graphindex

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/dataworkers/dw/internal/store"
)

// NodeMeta is what a blast radius needs per asset reached, packed so that
// reading it costs one cache line, not four.
type NodeMeta struct {
	Owner  int32 // index into strs; -1 when unowned
	Domain int32
	Kind   uint8
	Flags  uint8
}

// colMap is one column mapping on an edge, lower-cased: column names match
// case-insensitively, which can only widen an impact answer, never narrow it.
type colMap struct{ from, to string }

// Index is an immutable, compact snapshot of the graph for traversal:
// assets are numbered 0..n-1 and edges kept in compressed sparse rows
// (offsets + targets, both directions, each row in the order of its
// neighbours' seqs), with per-asset kind, flags, owner and domain so a
// blast radius can rank and count without touching the store. Everything
// else (names, schedules) is read for the few assets an answer lists.
//
// An index brought up to date from the change log (Apply) shares the
// arrays of the one it came from and keeps what changed since the load in
// an overlay: replaced rows, added assets, patched kinds and owners. Read
// it through the accessors (Seq, MetaOf, Out, In), which see both.
type Index struct {
	// Version is the store's graph version the index answers for.
	Version int64
	// Topology is the store's topology version of what it holds (assets,
	// edges, column lineage, and the kinds, flags, owners and domains it
	// ranks by); a write of other facts moves Version only.
	Topology int64

	seqs   []int64 // node -> asset seq, ascending
	seqIdx []int32 // seq -> node + 1 when seqs are dense enough, else nil
	seqMap map[int64]int32

	meta []NodeMeta
	// Strs are the owner and domain names NodeMeta's Owner and Domain
	// index. Callers read it, never write it.
	Strs []string

	// The edges in compressed sparse rows: node u's successors are
	// outDst[outOff[u]:outOff[u+1]] with kinds outKind (codes from Codes),
	// its predecessors inSrc[inOff[u]:inOff[u+1]] with kinds inKind.
	outOff  []int32
	outDst  []int32
	outKind []uint8
	inOff   []int32
	inSrc   []int32
	inKind  []uint8

	// cols holds column lineage by edge (from<<32 | to), only for the
	// edges that have it, each edge's mappings sorted.
	cols map[uint64][]colMap

	// d is what changed since the arrays were laid out; nil for an index
	// loaded or compacted whole.
	d *overlay
	// holes counts removed assets whose numbers the arrays keep (after
	// Compact), with no edges and no seq lookup.
	holes int
	// numbering is shared by every index derived from one load: node
	// numbers mean the same assets in all of them.
	numbering *numbering

	pools *pools
}

type numbering struct{ _ byte }

// pools are the buffers walks reuse. An index brought up to date shares
// its predecessor's, so the first walk after a change does not grow its
// arrays from nothing again.
type pools struct {
	scratch sync.Pool
	// walks holds the order and parent arrays of walks handed back with
	// Release: a blast radius over 100k assets otherwise grows two 100k
	// arrays by doubling on every call.
	walks sync.Pool
}

// Len is the number of node numbers: arrays indexed by node are this long.
// An asset removed since the load keeps its number, unreachable, until
// the index is compacted.
func (ix *Index) Len() int {
	if ix.d != nil {
		return int(ix.d.base) + len(ix.d.seqs)
	}
	return len(ix.seqs)
}

// Assets is the number of assets the index holds.
func (ix *Index) Assets() int {
	if ix.d != nil {
		return ix.Len() - ix.holes - ix.d.gone.len()
	}
	return len(ix.seqs) - ix.holes
}

// EdgeCount is the number of edges.
func (ix *Index) EdgeCount() int {
	if ix.d != nil {
		return ix.d.edges
	}
	return len(ix.outDst)
}

// Node maps an asset seq to its node number.
func (ix *Index) Node(seq int64) (int32, bool) {
	n, ok := ix.baseNode(seq)
	if ix.d == nil {
		return n, ok
	}
	if ok {
		return n, !ix.d.gone.has(n)
	}
	n, ok = ix.d.added.get(seq)
	return n, ok && !ix.d.gone.has(n)
}

// hasNode reports whether array node u is in the seq lookup (not a hole).
func (ix *Index) hasNode(u int32) bool {
	m, ok := ix.baseNode(ix.seqs[u])
	return ok && m == u
}

func (ix *Index) baseNode(seq int64) (int32, bool) {
	if ix.seqIdx != nil {
		if seq < 0 || seq >= int64(len(ix.seqIdx)) || ix.seqIdx[seq] == 0 {
			return 0, false
		}
		return ix.seqIdx[seq] - 1, true
	}
	n, ok := ix.seqMap[seq]
	return n, ok
}

// Seq is the asset seq of node n.
func (ix *Index) Seq(n int32) int64 {
	if int(n) < len(ix.seqs) {
		return ix.seqs[n]
	}
	return ix.d.seqs[int(n)-len(ix.seqs)]
}

// MetaOf is node n's kind, flags, owner and domain.
func (ix *Index) MetaOf(n int32) NodeMeta {
	if ix.d != nil {
		return ix.d.metaOf(ix, n)
	}
	return ix.meta[n]
}

// MetasOf appends the meta of each node to dst: one tight loop over the
// nodes a walk reached, so the loads of their (scattered) entries overlap,
// where a call per node waits on each.
func (ix *Index) MetasOf(dst []NodeMeta, nodes []int32) []NodeMeta {
	if ix.d == nil {
		for _, n := range nodes {
			dst = append(dst, ix.meta[n])
		}
		return dst
	}
	for _, n := range nodes {
		dst = append(dst, ix.d.metaOf(ix, n))
	}
	return dst
}

func (d *overlay) metaOf(ix *Index, n int32) NodeMeta {
	if hasBit(d.metaBits, n) {
		m, _ := d.meta.get(n)
		return m
	}
	return ix.meta[n]
}

// Out is node u's successors and the kinds of the edges to them, in the
// order of their seqs. Callers must not modify the slices.
func (ix *Index) Out(u int32) ([]int32, []uint8) {
	if ix.d != nil && hasBit(ix.d.outBits, u) {
		r, _ := ix.d.out.get(u)
		return r.nodes, r.kinds
	}
	return ix.outDst[ix.outOff[u]:ix.outOff[u+1]], ix.outKind[ix.outOff[u]:ix.outOff[u+1]]
}

// In is node u's predecessors and the kinds of the edges from them.
func (ix *Index) In(u int32) ([]int32, []uint8) {
	if ix.d != nil && hasBit(ix.d.inBits, u) {
		r, _ := ix.d.in.get(u)
		return r.nodes, r.kinds
	}
	return ix.inSrc[ix.inOff[u]:ix.inOff[u+1]], ix.inKind[ix.inOff[u]:ix.inOff[u+1]]
}

// colsOf is the column lineage of edge u -> v; ok is false when the edge
// has none recorded.
func (ix *Index) colsOf(u, v int32) ([]colMap, bool) {
	k := edgeKey(u, v)
	if ix.d != nil {
		if ms, ok := ix.d.cols.get(k); ok {
			return ms, ms != nil
		}
	}
	ms, ok := ix.cols[k]
	return ms, ok
}

// EdgeColumns is the column lineage of edge u -> v as (from, to) pairs,
// lower-cased and sorted; nil when it has none.
func (ix *Index) EdgeColumns(u, v int32) [][2]string {
	ms, _ := ix.colsOf(u, v)
	var out [][2]string
	for _, m := range ms {
		out = append(out, [2]string{m.from, m.to})
	}
	return out
}

// Bytes estimates the memory the index holds, for the benchmark's report.
func (ix *Index) Bytes() int64 {
	b := int64(len(ix.seqs))*8 + int64(len(ix.seqIdx))*4 + int64(len(ix.seqMap))*24 +
		int64(len(ix.meta))*12 +
		int64(len(ix.outOff)+len(ix.outDst)+len(ix.inOff)+len(ix.inSrc))*4 + int64(len(ix.outKind)+len(ix.inKind))
	for _, s := range ix.Strs {
		b += int64(len(s)) + 16
	}
	for _, ms := range ix.cols {
		b += 48
		for _, m := range ms {
			b += int64(len(m.from)+len(m.to)) + 32
		}
	}
	if d := ix.d; d != nil {
		b += int64(len(d.metaBits)+len(d.outBits)+len(d.inBits))*8 + int64(len(d.seqs))*8 + int64(d.added.len()+d.gone.len())*24 +
			int64(d.meta.len())*36 + int64(d.cols.len())*48
		rows := func(_ int32, r adjRow) { b += 48 + int64(len(r.nodes))*5 }
		d.out.all(rows)
		d.in.all(rows)
	}
	return b
}

// Codes names the small numbers an index keeps for kinds: an asset's kind
// (NodeMeta.Kind) is its position in Kinds, an edge's (OutKind, InKind) its
// position in EdgeKinds. The index does not know what the kinds mean; the
// graph that loads it does.
type Codes struct {
	Kinds     []string
	EdgeKinds []string
	// FallbackKind and FallbackEdge are the codes of a stored kind not in
	// the lists (written by a newer version, say).
	FallbackKind, FallbackEdge uint8
}

func (c Codes) kindCode(k string) uint8 {
	for i, known := range c.Kinds {
		if known == k {
			return uint8(i)
		}
	}
	return c.FallbackKind
}

func (c Codes) edgeKindCode(k []byte) uint8 {
	for i, known := range c.EdgeKinds {
		if known == string(k) {
			return uint8(i)
		}
	}
	return c.FallbackEdge
}

// Load builds an index from the store's lineage tables, marked as built
// from graph version version and topology version topology, which the
// caller reads before calling. Assets and edges are read on two
// connections at once; an edge whose asset a concurrent write added after
// the asset read is left out, and the versions read first make the next
// refresh apply that write (again: applying a change is idempotent).
func Load(ctx context.Context, db *store.DB, version, topology int64, codes Codes) (*Index, error) {
	ix := &Index{Version: version, Topology: topology, pools: &pools{}, numbering: &numbering{}}
	var edges rawEdges
	var assetErr, edgeErr error
	var wg sync.WaitGroup
	wg.Go(func() { assetErr = ix.loadAssets(ctx, db, codes) })
	wg.Go(func() { edges, edgeErr = readEdges(ctx, db, codes) })
	wg.Wait()
	if assetErr != nil {
		return nil, fmt.Errorf("load lineage assets: %w", assetErr)
	}
	if edgeErr != nil {
		return nil, fmt.Errorf("load lineage edges: %w", edgeErr)
	}
	ix.buildEdges(edges)
	if err := ix.loadColumns(ctx, db); err != nil {
		return nil, fmt.Errorf("load column lineage: %w", err)
	}
	return ix, nil
}

func (ix *Index) loadAssets(ctx context.Context, q store.Querier, codes Codes) error {
	var count int
	if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM lineage_assets").Scan(&count); err != nil {
		return err
	}
	rows, err := q.QueryContext(ctx, "SELECT seq, kind, flags, owner, domain FROM lineage_assets ORDER BY seq")
	if err != nil {
		return err
	}
	defer rows.Close()
	ix.seqs = make([]int64, 0, count)
	ix.meta = make([]NodeMeta, 0, count)
	in := interner{strs: &ix.Strs, idx: map[string]int32{}}
	var seq int64
	var flags int
	var kind, owner, domain sql.RawBytes
	kinds := map[string]uint8{}
	for rows.Next() {
		if err := rows.Scan(&seq, &kind, &flags, &owner, &domain); err != nil {
			return err
		}
		kc, ok := kinds[string(kind)]
		if !ok {
			kc = codes.kindCode(string(kind))
			kinds[string(kind)] = kc
		}
		ix.seqs = append(ix.seqs, seq)
		ix.meta = append(ix.meta, NodeMeta{Owner: in.id(owner), Domain: in.id(domain), Kind: kc, Flags: uint8(flags)})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	ix.indexSeqs(nil)
	return nil
}

// indexSeqs builds the seq -> node lookup of ix.seqs, leaving out the
// nodes hole reports (nil: none).
func (ix *Index) indexSeqs(hole func(int32) bool) {
	n := len(ix.seqs)
	top := int64(0)
	for _, s := range ix.seqs {
		top = max(top, s)
	}
	if n > 0 && top < int64(4*n+1024) {
		ix.seqIdx = make([]int32, top+1)
		for i, s := range ix.seqs {
			if hole == nil || !hole(int32(i)) {
				ix.seqIdx[s] = int32(i) + 1
			}
		}
	} else {
		ix.seqMap = make(map[int64]int32, n)
		for i, s := range ix.seqs {
			if hole == nil || !hole(int32(i)) {
				ix.seqMap[s] = int32(i)
			}
		}
	}
}

// interner numbers owner and domain names: one string per distinct name.
type interner struct {
	strs *[]string
	idx  map[string]int32
}

func (in interner) id(b []byte) int32 {
	if len(b) == 0 {
		return -1
	}
	if i, ok := in.idx[string(b)]; ok {
		return i
	}
	i := int32(len(*in.strs))
	s := string(b)
	*in.strs = append(*in.strs, s)
	in.idx[s] = i
	return i
}

// rawEdges are edges as stored, by asset seq.
type rawEdges struct {
	from, to []int64
	kind     []uint8
}

func readEdges(ctx context.Context, q store.Querier, codes Codes) (rawEdges, error) {
	var e rawEdges
	var count int
	if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM lineage_edges").Scan(&count); err != nil {
		return e, err
	}
	rows, err := q.QueryContext(ctx, "SELECT from_seq, to_seq, kind FROM lineage_edges")
	if err != nil {
		return e, err
	}
	defer rows.Close()
	e.from = make([]int64, 0, count)
	e.to = make([]int64, 0, count)
	e.kind = make([]uint8, 0, count)
	var from, to int64
	var kind sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&from, &to, &kind); err != nil {
			return e, err
		}
		e.from = append(e.from, from)
		e.to = append(e.to, to)
		e.kind = append(e.kind, codes.edgeKindCode(kind))
	}
	return e, rows.Err()
}

// buildEdges maps stored edges onto node numbers and lays them out both ways.
func (ix *Index) buildEdges(e rawEdges) {
	src := make([]int32, 0, len(e.from))
	dst := make([]int32, 0, len(e.from))
	kinds := make([]uint8, 0, len(e.from))
	for i := range e.from {
		f, ok1 := ix.baseNode(e.from[i])
		t, ok2 := ix.baseNode(e.to[i])
		if !ok1 || !ok2 {
			continue
		}
		src = append(src, f)
		dst = append(dst, t)
		kinds = append(kinds, e.kind[i])
	}
	ix.layOut(src, dst, kinds)
}

// layOut lays the edges out both ways, each row in node order.
func (ix *Index) layOut(src, dst []int32, kinds []uint8) {
	n := len(ix.seqs)
	// Stably by target, then by source: the out rows come out sorted by
	// target, and the edges in (source, target) order, which sorted
	// stably by target gives the in rows sorted by source.
	_, byDst := countingOrder(n, dst, nil)
	var bySrc []int32
	ix.outOff, bySrc = countingOrder(n, src, byDst)
	ix.outDst, ix.outKind = gather(bySrc, dst, kinds)
	var byDstSrc []int32
	ix.inOff, byDstSrc = countingOrder(n, dst, bySrc)
	ix.inSrc, ix.inKind = gather(byDstSrc, src, kinds)
}

// countingOrder orders the positions of key (each in 0..n-1) by key,
// stably: visiting them in the order of in (nil: 0, 1, ...). off[k] is
// where key k's positions begin. Two passes, no comparison sort.
func countingOrder(n int, key []int32, in []int32) (off, order []int32) {
	off = make([]int32, n+1)
	for _, k := range key {
		off[k+1]++
	}
	for i := 1; i <= n; i++ {
		off[i] += off[i-1]
	}
	order = make([]int32, len(key))
	pos := make([]int32, n)
	copy(pos, off[:n])
	if in == nil {
		for i, k := range key {
			order[pos[k]] = int32(i)
			pos[k]++
		}
		return off, order
	}
	for _, i := range in {
		k := key[i]
		order[pos[k]] = i
		pos[k]++
	}
	return off, order
}

func gather(order, nodes []int32, kinds []uint8) ([]int32, []uint8) {
	outN := make([]int32, len(order))
	outK := make([]uint8, len(order))
	for p, i := range order {
		outN[p] = nodes[i]
		outK[p] = kinds[i]
	}
	return outN, outK
}

// BuildCSR lays out edges grouped by their first endpoint, each group in
// the order of the second, with counting sorts: no comparison sort, no
// per-node slices.
func BuildCSR(n int, a, b []int32, kinds []uint8) (off, targets []int32, tkinds []uint8) {
	_, byB := countingOrder(n, b, nil)
	off, byAB := countingOrder(n, a, byB)
	targets, tkinds = gather(byAB, b, kinds)
	return off, targets, tkinds
}

// FromEdges is the index of a graph that is not in a store: n assets with
// seqs 1..n (node i is seq i+1) and the given edges between node numbers.
func FromEdges(n int, src, dst []int32, kinds []uint8) *Index {
	ix := &Index{seqs: make([]int64, n), meta: make([]NodeMeta, n), pools: &pools{}, numbering: &numbering{}}
	for i := range ix.seqs {
		ix.seqs[i] = int64(i) + 1
		ix.meta[i] = NodeMeta{Owner: -1, Domain: -1}
	}
	ix.indexSeqs(nil)
	ix.layOut(src, dst, kinds)
	return ix
}

func edgeKey(from, to int32) uint64 { return uint64(uint32(from))<<32 | uint64(uint32(to)) }

func (ix *Index) loadColumns(ctx context.Context, q store.Querier) error {
	rows, err := q.QueryContext(ctx, "SELECT from_seq, to_seq, from_col, to_col FROM lineage_edge_columns")
	if err != nil {
		return err
	}
	defer rows.Close()
	ix.cols = map[uint64][]colMap{}
	for rows.Next() {
		var from, to int64
		var fc, tc string
		if err := rows.Scan(&from, &to, &fc, &tc); err != nil {
			return err
		}
		f, ok1 := ix.baseNode(from)
		t, ok2 := ix.baseNode(to)
		if !ok1 || !ok2 {
			continue
		}
		k := edgeKey(f, t)
		ix.cols[k] = addColMap(ix.cols[k], fc, tc)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, ms := range ix.cols {
		sortColMaps(ms)
	}
	return nil
}

// addColMap adds a mapping, lower-cased, unless the list holds it.
func addColMap(ms []colMap, from, to string) []colMap {
	m := colMap{strings.ToLower(from), strings.ToLower(to)}
	if slices.Contains(ms, m) {
		return ms
	}
	return append(ms, m)
}

// sortColMaps puts an edge's mappings in one order however they were
// stored, so walks that follow them answer the same on every index.
func sortColMaps(ms []colMap) {
	slices.SortFunc(ms, func(a, b colMap) int {
		if c := strings.Compare(a.from, b.from); c != 0 {
			return c
		}
		return strings.Compare(a.to, b.to)
	})
}
