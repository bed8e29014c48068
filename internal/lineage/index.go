package lineage

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
)

// Graph is the context graph as one agent process sees it: the shared store
// plus a traversal index that is reloaded whenever another process (or
// this one) has changed the graph since it was built. It is safe for
// concurrent use.
type Graph struct {
	db    *store.DB
	clock clock.Clock

	mu  sync.Mutex
	idx *Index
}

// New returns the graph kept in db. The clock dates ingested facts and
// computes schedules' next runs.
func New(db *store.DB, c clock.Clock) *Graph {
	if c == nil {
		c = clock.System{}
	}
	return &Graph{db: db, clock: c}
}

// DB is the store the graph lives in.
func (g *Graph) DB() *store.DB { return g.db }

// Index returns a traversal index no older than the store's graph version,
// loading a fresh one when the version has moved. Loading reads the version
// first, so a write racing the load makes the next call reload again rather
// than leaving a stale index marked current.
func (g *Graph) Index(ctx context.Context) (*Index, error) {
	v, _, err := GraphVersion(ctx, g.db)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.idx != nil && g.idx.Version == v {
		return g.idx, nil
	}
	start := time.Now()
	idx, err := LoadIndex(ctx, g.db)
	if err != nil {
		return nil, err
	}
	slog.Debug("lineage: index loaded", "version", idx.Version, "assets", idx.Len(), "edges", idx.EdgeCount(), "took", time.Since(start))
	g.idx = idx
	return idx, nil
}

// nodeMeta is what a blast radius needs per asset reached, packed so that
// reading it costs one cache line, not four.
type nodeMeta struct {
	owner  int32 // index into strs; -1 when unowned
	domain int32
	kind   uint8
	flags  uint8
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

	seqs   []int64 // node -> asset seq
	seqIdx []int32 // seq -> node + 1 when seqs are dense enough, else nil
	seqMap map[int64]int32

	meta []nodeMeta
	strs []string

	outOff  []int32
	outDst  []int32
	outKind []uint8
	inOff   []int32
	inSrc   []int32
	inKind  []uint8

	// cols holds column lineage by edge (from<<32 | to), only for the
	// edges that have it.
	cols map[uint64][]colMap

	scratch sync.Pool
}

// Len is the number of assets.
func (ix *Index) Len() int { return len(ix.seqs) }

// EdgeCount is the number of edges.
func (ix *Index) EdgeCount() int { return len(ix.outDst) }

// node maps an asset seq to its node number.
func (ix *Index) node(seq int64) (int32, bool) {
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
	b := int64(len(ix.seqs))*8 + int64(len(ix.seqIdx))*4 + int64(len(ix.seqMap))*24 +
		int64(len(ix.meta))*12 +
		int64(len(ix.outOff)+len(ix.outDst)+len(ix.inOff)+len(ix.inSrc))*4 + int64(len(ix.outKind)+len(ix.inKind))
	for _, s := range ix.strs {
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

func kindCode(k string) uint8 {
	for i, known := range Kinds {
		if string(known) == k {
			return uint8(i)
		}
	}
	return uint8(len(Kinds) - 1) // an unknown stored kind counts as a dataset
}

func edgeKindCode(k []byte) uint8 {
	for i, known := range EdgeKinds {
		if string(known) == string(k) {
			return uint8(i)
		}
	}
	return uint8(2) // feeds
}

// LoadIndex builds an index from the store. Assets and edges are read on
// two connections at once; an edge whose asset a concurrent write added
// after the asset read is left out, and the version read first makes the
// next Graph.Index call load again.
func LoadIndex(ctx context.Context, db *store.DB) (*Index, error) {
	v, _, err := GraphVersion(ctx, db)
	if err != nil {
		return nil, err
	}
	ix := &Index{Version: v}
	var edges rawEdges
	var assetErr, edgeErr error
	var wg sync.WaitGroup
	wg.Go(func() { assetErr = ix.loadAssets(ctx, db) })
	wg.Go(func() { edges, edgeErr = readEdges(ctx, db) })
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

func (ix *Index) loadAssets(ctx context.Context, q store.Querier) error {
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
	ix.meta = make([]nodeMeta, 0, count)
	intern := map[string]int32{}
	id := func(b []byte) int32 {
		if len(b) == 0 {
			return -1
		}
		if i, ok := intern[string(b)]; ok {
			return i
		}
		i := int32(len(ix.strs))
		s := string(b)
		ix.strs = append(ix.strs, s)
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
			kc = kindCode(string(kind))
			kinds[string(kind)] = kc
		}
		ix.seqs = append(ix.seqs, seq)
		ix.meta = append(ix.meta, nodeMeta{owner: id(owner), domain: id(domain), kind: kc, flags: uint8(flags)})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	n := len(ix.seqs)
	if n > 0 && ix.seqs[n-1] < int64(4*n+1024) {
		ix.seqIdx = make([]int32, ix.seqs[n-1]+1)
		for i, s := range ix.seqs {
			ix.seqIdx[s] = int32(i) + 1
		}
	} else {
		ix.seqMap = make(map[int64]int32, n)
		for i, s := range ix.seqs {
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

func readEdges(ctx context.Context, q store.Querier) (rawEdges, error) {
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
		e.kind = append(e.kind, edgeKindCode(kind))
	}
	return e, rows.Err()
}

// buildEdges maps stored edges onto node numbers and lays them out both ways.
func (ix *Index) buildEdges(e rawEdges) {
	src := make([]int32, 0, len(e.from))
	dst := make([]int32, 0, len(e.from))
	kinds := make([]uint8, 0, len(e.from))
	for i := range e.from {
		f, ok1 := ix.node(e.from[i])
		t, ok2 := ix.node(e.to[i])
		if !ok1 || !ok2 {
			continue
		}
		src = append(src, f)
		dst = append(dst, t)
		kinds = append(kinds, e.kind[i])
	}
	n := len(ix.seqs)
	ix.outOff, ix.outDst, ix.outKind = buildCSR(n, src, dst, kinds)
	ix.inOff, ix.inSrc, ix.inKind = buildCSR(n, dst, src, kinds)
}

// buildCSR lays out edges grouped by their first endpoint with a counting
// sort: two passes, no comparison sort, no per-node slices.
func buildCSR(n int, a, b []int32, kinds []uint8) (off, targets []int32, tkinds []uint8) {
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
		f, ok1 := ix.node(from)
		t, ok2 := ix.node(to)
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
