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
// (offsets + targets, both directions), with per-asset kind, flags, owner
// and domain so a blast radius can rank and count without touching the
// store. Everything else (names, schedules) is read for the few assets an
// answer lists.
type Index struct {
	// Version is the store's graph version the index was built from.
	Version int64

	Seqs   []int64 // node -> asset seq
	seqIdx []int32 // seq -> node + 1 when seqs are dense enough, else nil
	seqMap map[int64]int32

	// Meta is per node; its Owner and Domain index Strs.
	Meta []NodeMeta
	Strs []string

	// The edges in compressed sparse rows: node u's successors are
	// OutDst[OutOff[u]:OutOff[u+1]] with kinds OutKind (codes from Codes),
	// its predecessors InSrc[InOff[u]:InOff[u+1]] with kinds InKind. The
	// index is immutable: callers read these, never write them.
	OutOff  []int32
	OutDst  []int32
	OutKind []uint8
	InOff   []int32
	InSrc   []int32
	InKind  []uint8

	// cols holds column lineage by edge (from<<32 | to), only for the
	// edges that have it.
	cols map[uint64][]colMap

	scratch sync.Pool
	// walks holds the order and parent arrays of walks handed back with
	// Release: a blast radius over 100k assets otherwise grows two 100k
	// arrays by doubling on every call.
	walks sync.Pool
}

// Len is the number of assets.
func (ix *Index) Len() int { return len(ix.Seqs) }

// EdgeCount is the number of edges.
func (ix *Index) EdgeCount() int { return len(ix.OutDst) }

// Node maps an asset seq to its node number.
func (ix *Index) Node(seq int64) (int32, bool) {
	if ix.seqIdx != nil {
		if seq < 0 || seq >= int64(len(ix.seqIdx)) || ix.seqIdx[seq] == 0 {
			return 0, false
		}
		return ix.seqIdx[seq] - 1, true
	}
	n, ok := ix.seqMap[seq]
	return n, ok
}

// Bytes estimates the memory the index holds, for the benchmark's report.
func (ix *Index) Bytes() int64 {
	b := int64(len(ix.Seqs))*8 + int64(len(ix.seqIdx))*4 + int64(len(ix.seqMap))*24 +
		int64(len(ix.Meta))*12 +
		int64(len(ix.OutOff)+len(ix.OutDst)+len(ix.InOff)+len(ix.InSrc))*4 + int64(len(ix.OutKind)+len(ix.InKind))
	for _, s := range ix.Strs {
		b += int64(len(s)) + 16
	}
	for _, ms := range ix.cols {
		b += 48
		for _, m := range ms {
			b += int64(len(m.from)+len(m.to)) + 32
		}
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

// Load builds an index from the store's lineage tables, marked as
// built from graph version v, which the caller reads before calling. Assets
// and edges are read on two connections at once; an edge whose asset a
// concurrent write added after the asset read is left out, and the version
// read first makes the next load happen.
func Load(ctx context.Context, db *store.DB, v int64, codes Codes) (*Index, error) {
	ix := &Index{Version: v}
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
	ix.Seqs = make([]int64, 0, count)
	ix.Meta = make([]NodeMeta, 0, count)
	intern := map[string]int32{}
	id := func(b []byte) int32 {
		if len(b) == 0 {
			return -1
		}
		if i, ok := intern[string(b)]; ok {
			return i
		}
		i := int32(len(ix.Strs))
		s := string(b)
		ix.Strs = append(ix.Strs, s)
		intern[s] = i
		return i
	}
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
		ix.Seqs = append(ix.Seqs, seq)
		ix.Meta = append(ix.Meta, NodeMeta{Owner: id(owner), Domain: id(domain), Kind: kc, Flags: uint8(flags)})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	n := len(ix.Seqs)
	if n > 0 && ix.Seqs[n-1] < int64(4*n+1024) {
		ix.seqIdx = make([]int32, ix.Seqs[n-1]+1)
		for i, s := range ix.Seqs {
			ix.seqIdx[s] = int32(i) + 1
		}
	} else {
		ix.seqMap = make(map[int64]int32, n)
		for i, s := range ix.Seqs {
			ix.seqMap[s] = int32(i)
		}
	}
	return nil
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
		f, ok1 := ix.Node(e.from[i])
		t, ok2 := ix.Node(e.to[i])
		if !ok1 || !ok2 {
			continue
		}
		src = append(src, f)
		dst = append(dst, t)
		kinds = append(kinds, e.kind[i])
	}
	n := len(ix.Seqs)
	ix.OutOff, ix.OutDst, ix.OutKind = BuildCSR(n, src, dst, kinds)
	ix.InOff, ix.InSrc, ix.InKind = BuildCSR(n, dst, src, kinds)
}

// BuildCSR lays out edges grouped by their first endpoint with a counting
// sort: two passes, no comparison sort, no per-node slices.
func BuildCSR(n int, a, b []int32, kinds []uint8) (off, targets []int32, tkinds []uint8) {
	off = make([]int32, n+1)
	for _, x := range a {
		off[x+1]++
	}
	for i := 1; i <= n; i++ {
		off[i] += off[i-1]
	}
	targets = make([]int32, len(a))
	tkinds = make([]uint8, len(a))
	pos := make([]int32, n)
	copy(pos, off[:n])
	for i, x := range a {
		p := pos[x]
		targets[p] = b[i]
		tkinds[p] = kinds[i]
		pos[x] = p + 1
	}
	return off, targets, tkinds
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
		f, ok1 := ix.Node(from)
		t, ok2 := ix.Node(to)
		if !ok1 || !ok2 {
			continue
		}
		m := colMap{strings.ToLower(fc), strings.ToLower(tc)}
		k := edgeKey(f, t)
		dup := false
		for _, e := range ix.cols[k] {
			if e == m {
				dup = true
				break
			}
		}
		if !dup {
			ix.cols[k] = append(ix.cols[k], m)
		}
	}
	return rows.Err()
}
