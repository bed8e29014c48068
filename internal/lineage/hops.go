package lineage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/dataworkers/dw/internal/lineage/graphindex"
	"github.com/dataworkers/dw/internal/sqlscan"
	"runtime"
	"strings"
	"sync"
	"weak"

	"github.com/dataworkers/dw/internal/store"
)

// Hop places an asset reached by Upstream or Downstream.
type Hop struct {
	// Distance is the number of edges from the nearest start asset.
	Distance int `json:"distance" jsonschema:"edges from the nearest start asset"`
	// Next is the neighbour one hop closer to the start ("" at a start);
	// following Next repeatedly yields a shortest path back to a start.
	Next string `json:"next,omitempty" jsonschema:"neighbour one hop closer to the start"`
}

// FieldReader is a job or model downstream of an asset that reads one of
// the asset's fields, directly or under a name column lineage gave it.
type FieldReader struct {
	// Reader is the reading job or model's asset id.
	Reader string `json:"reader" jsonschema:"asset id of the job or model that reads the field"`
	// Field is the field as the caller named it on the start asset.
	Field string `json:"field" jsonschema:"the field read, as named on the start asset"`
	// From is the asset the reader reads the field from.
	From string `json:"from" jsonschema:"asset the reader reads the field from"`
	// Evidence says how the read is known: the reader's recorded SQL
	// expression, else the source of the column lineage.
	Evidence string `json:"evidence" jsonschema:"how the read is known, e.g. recorded SQL: SUM(response_bytes)"`
}

// Upstream walks edges against their direction from the start assets, at
// most maxDepth hops, and returns every asset reached with its distance and
// the neighbour one hop nearer a start.
//
// Start assets may be given by id or any alias; each appears in the answer
// under the name given and under its canonical id, at distance 0, and the
// Next of its neighbours is the name given, so a caller finds its own
// names again. Every reached asset is keyed by its canonical id and by
// each of its aliases (dbt unique id, warehouse relation, OpenLineage
// name), so a lookup by any name another system uses succeeds. A start the
// graph does not know reaches nothing but is still returned at distance 0.
func (g *Graph) Upstream(ctx context.Context, start []string, maxDepth int) (map[string]Hop, error) {
	return g.hops(ctx, start, maxDepth, true)
}

// Downstream is Upstream along the edges' direction.
func (g *Graph) Downstream(ctx context.Context, start []string, maxDepth int) (map[string]Hop, error) {
	return g.hops(ctx, start, maxDepth, false)
}

// Reach is the set of assets a walk reached, as nodes of the index it
// walked: what FieldReadersWithin confines its walk to.
type Reach struct {
	idx *graphindex.Index
	in  []bool // by node
}

// UpstreamReach is Upstream that also returns what it reached as a Reach.
func (g *Graph) UpstreamReach(ctx context.Context, start []string, maxDepth int) (map[string]Hop, *Reach, error) {
	var reach *Reach
	out, err := g.walkHops(ctx, start, maxDepth, true, func(idx *graphindex.Index, w *graphindex.Walk) {
		reach = &Reach{idx: idx, in: make([]bool, idx.Len())}
		for _, n := range w.Order {
			reach.in[n] = true
		}
	})
	return out, reach, err
}

func (g *Graph) hops(ctx context.Context, start []string, maxDepth int, up bool) (map[string]Hop, error) {
	return g.walkHops(ctx, start, maxDepth, up, nil)
}

// walkHops walks and names what it reached; seen, when set, is shown the
// walk first.
func (g *Graph) walkHops(ctx context.Context, start []string, maxDepth int, up bool, seen func(*graphindex.Index, *graphindex.Walk)) (map[string]Hop, error) {
	if maxDepth < 0 || maxDepth > MaxWalkDepth {
		return nil, fmt.Errorf("max depth %d is out of range; use 0 to %d", maxDepth, MaxWalkDepth)
	}
	out := make(map[string]Hop, len(start))
	idx, err := g.Index(ctx)
	if err != nil {
		return nil, err
	}

	// given maps a start node to the first name the caller used for it.
	given := map[int32]string{}
	var nodes []int32
	for _, ref := range start {
		ref = strings.TrimSpace(ref)
		if ref == "" {
			continue
		}
		out[ref] = Hop{}
		r, ok, err := findAsset(ctx, g.db, ref)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		n, ok := idx.Node(r.seq)
		if !ok {
			continue // added after the index was built: it has no edges yet
		}
		if _, dup := given[n]; !dup {
			given[n] = ref
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		if seen != nil {
			seen(idx, &graphindex.Walk{}) // an empty reach
		}
		return out, nil
	}
	w := idx.BFS(ctx, nodes, up, graphindex.Limits{MaxDepth: maxDepth, MaxNodes: idx.Len()})
	defer idx.Release(w) // the answer keeps names, never the walk's arrays
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if seen != nil {
		seen(idx, w)
	}
	names, err := indexNames(ctx, idx, g.db, w.Order)
	if err != nil {
		return nil, err
	}
	nameOf := func(p int32) string {
		n := w.Order[p]
		if int(p) < w.Starts {
			return given[n]
		}
		return names[n][0]
	}
	parents := w.Parents()
	for p := range w.Order {
		pos := int32(p)
		h := Hop{Distance: int(w.Distance(pos))}
		if par := parents[pos]; par >= 0 {
			h.Next = nameOf(par)
		}
		n := w.Order[pos]
		for _, name := range names[n] {
			if _, taken := out[name]; !taken || pos < int32(w.Starts) {
				out[name] = h
			}
		}
	}
	return out, nil
}

// findAsset resolves a reference like Resolve does, but reports an unknown
// or unparsable name as not found instead of an error: a walk from assets
// outside the recorded lineage is a question with an empty answer.
func findAsset(ctx context.Context, q store.Querier, ref string) (resolved, bool, error) {
	if !strings.Contains(ref, "://") {
		if r, ok, err := byAlias(ctx, q, "dbt://"+ref); err != nil || ok {
			return r, ok, err
		}
		r, ok, err := byName(ctx, q, ref)
		if errors.Is(err, ErrUnknownAsset) {
			return r, false, nil // ambiguous bare name
		}
		return r, ok, err
	}
	tries := []string{ref}
	if c, err := CanonicalID(ref); err == nil && c != ref {
		tries = append(tries, c)
	}
	for _, t := range tries {
		if r, ok, err := byAlias(ctx, q, t); err != nil || ok {
			return r, ok, err
		}
	}
	return resolved{}, false, nil
}

// nameTable caches, per index, what answers read from the store about the
// assets walks reached: ids and aliases by node, list rows by seq and
// resolved references (the index itself keeps only numbers). All of it is
// fixed for one graph version, since every lineage write moves the version
// and a new version is a new index (one brought up to date from the log
// carries its predecessor's table, less what the writes changed,
// carryTable), so a warm call reads none of it again. It is loaded for the
// nodes an answer needs, so the cost follows what a walk reaches rather
// than the size of the graph, and it is emptied when it grows past
// maxCached entries.
type nameTable struct {
	mu      sync.Mutex
	ids     map[int32]string
	aliased map[int32]bool // nodes whose aliases are loaded
	aliases map[int32][]string
	rows    map[int64]*assetRow
	refs    map[string]resolved
	// exact holds findAsset's answers (no partial-name match, unlike
	// refs), for the field-reader walks a diagnosis makes per change.
	exact map[string]resolved
	// gen counts the times refs and exact were emptied after a write: a
	// reference resolved outside the lock is kept only if none came
	// between (it may predate the write that emptied them).
	gen int

	// queue guards the drops carryTable queued for lock to apply: the
	// entries of these nodes (ids, names) and seqs (rows), with dropRefs
	// the resolved references, with dropAll everything (the queue grew
	// past what the table may hold, with no call reading names between).
	queue     sync.Mutex
	dropNodes []int32
	dropSeqs  []int64
	dropRefs  bool
	dropAll   bool
}

// maxCached bounds a table's entries (ids, rows and references together).
const maxCached = 200_000

func (t *nameTable) reset() {
	t.ids, t.aliased, t.aliases = map[int32]string{}, map[int32]bool{}, map[int32][]string{}
	t.rows, t.refs, t.exact = map[int64]*assetRow{}, map[string]resolved{}, map[string]resolved{}
}

func (t *nameTable) full() bool { return len(t.ids)+len(t.rows)+len(t.refs)+len(t.exact) > maxCached }

// nameTables caches one table per live index; the weak key lets an index
// that is no longer used be collected, and its cleanup drops the entry.
var nameTables sync.Map // weak.Pointer[Index] -> *nameTable

func tableOf(ix *graphindex.Index) *nameTable {
	key := weak.Make(ix)
	if v, ok := nameTables.Load(key); ok {
		return v.(*nameTable)
	}
	t := &nameTable{}
	t.reset()
	v, loaded := nameTables.LoadOrStore(key, t)
	if !loaded {
		runtime.AddCleanup(ix, func(k weak.Pointer[graphindex.Index]) { nameTables.Delete(k) }, key)
	}
	return v.(*nameTable)
}

// carryTable lets to use from's table: to was derived from from by the
// logged changes, under the same node numbers. What the table holds of
// the assets the changes name (their ids, names and rows) is dropped, and
// with facts the references resolved too (a new or lost name may resolve
// elsewhere); everything else is still what the store says. The table is
// shared, so calls still on from drop the same entries: they read the
// store afresh, which is never wrong. The drop is queued, not done here:
// the caller holds the graph's lock, and a call reading names holds the
// table's for as long as its store reads take.
func carryTable(from, to *graphindex.Index, changes []graphindex.Change, facts bool) {
	t := tableOf(from)
	var nodes []int32
	var seqs []int64
	drop := func(seq int64) {
		seqs = append(seqs, seq)
		for _, ix := range []*graphindex.Index{from, to} {
			if n, ok := ix.Node(seq); ok {
				nodes = append(nodes, n)
			}
		}
	}
	for _, c := range changes {
		switch c.Op {
		case graphindex.NodeSet, graphindex.NodeDel:
			drop(c.From)
		case graphindex.Facts:
			for _, s := range c.Seqs {
				drop(s)
			}
		}
	}
	t.queue.Lock()
	t.dropNodes = append(t.dropNodes, nodes...)
	t.dropSeqs = append(t.dropSeqs, seqs...)
	t.dropRefs = t.dropRefs || facts
	if len(t.dropNodes)+len(t.dropSeqs) > maxCached {
		t.dropNodes, t.dropSeqs, t.dropAll = nil, nil, true
	}
	t.queue.Unlock()
	key := weak.Make(to)
	if _, loaded := nameTables.LoadOrStore(key, t); !loaded {
		runtime.AddCleanup(to, func(k weak.Pointer[graphindex.Index]) { nameTables.Delete(k) }, key)
	}
}

// lock takes the table's lock and applies the drops carryTable queued,
// before anything is read from or written to the table.
func (t *nameTable) lock() {
	t.mu.Lock()
	t.queue.Lock()
	nodes, seqs, refs, all := t.dropNodes, t.dropSeqs, t.dropRefs, t.dropAll
	t.dropNodes, t.dropSeqs, t.dropRefs, t.dropAll = nil, nil, false, false
	t.queue.Unlock()
	if all {
		t.reset()
		t.gen++
		return
	}
	for _, n := range nodes {
		delete(t.ids, n)
		delete(t.aliased, n)
		delete(t.aliases, n)
	}
	for _, s := range seqs {
		delete(t.rows, s)
	}
	if refs {
		t.refs, t.exact = map[string]resolved{}, map[string]resolved{}
		t.gen++
	}
}

// indexNames returns every name (id first, then aliases) of the given nodes,
// loading into the index's table those it does not hold yet. The answer is
// a copy: the table keeps growing under its lock while callers read.
func indexNames(ctx context.Context, ix *graphindex.Index, q store.Querier, nodes []int32) (map[int32][]string, error) {
	t := tableOf(ix)
	t.lock()
	defer t.mu.Unlock()
	if t.full() {
		t.reset()
	}
	var missing []any
	bySeq := map[int64]int32{}
	for _, n := range nodes {
		if !t.aliased[n] {
			if _, dup := bySeq[ix.Seq(n)]; !dup {
				bySeq[ix.Seq(n)] = n
				missing = append(missing, ix.Seq(n))
			}
		}
	}
	for start := 0; start < len(missing); start += 500 {
		chunk := missing[start:min(start+500, len(missing))]
		in := "(" + bindVars(len(chunk)) + ")"
		if err := scanPairs(ctx, q, "SELECT seq, id FROM lineage_assets WHERE seq IN "+in, chunk, func(seq int64, id string) {
			t.ids[bySeq[seq]] = id
		}); err != nil {
			return nil, fmt.Errorf("load asset ids: %w", err)
		}
		if err := scanPairs(ctx, q, "SELECT asset_seq, alias FROM lineage_aliases WHERE asset_seq IN "+in, chunk, func(seq int64, alias string) {
			if n := bySeq[seq]; alias != t.ids[n] {
				t.aliases[n] = append(t.aliases[n], alias)
			}
		}); err != nil {
			return nil, fmt.Errorf("load asset aliases: %w", err)
		}
		for _, seq := range chunk {
			// An asset removed since the index was built is named by its
			// seq, so answers stay well-formed.
			n := bySeq[seq.(int64)]
			if t.ids[n] == "" {
				t.ids[n] = fmt.Sprintf("#%d", seq)
			}
			t.aliased[n] = true
		}
	}
	out := make(map[int32][]string, len(nodes))
	for _, n := range nodes {
		out[n] = append([]string{t.ids[n]}, t.aliases[n]...)
	}
	return out, nil
}

// indexIDs returns the ids of the given nodes ("#seq" for one removed
// since the index was built), reading only those the index's table lacks.
func indexIDs(ctx context.Context, ix *graphindex.Index, q store.Querier, nodes []int32) (map[int32]string, error) {
	t := tableOf(ix)
	t.lock()
	defer t.mu.Unlock()
	if t.full() {
		t.reset()
	}
	var missing []int64
	bySeq := map[int64]int32{}
	for _, n := range nodes {
		if _, ok := t.ids[n]; !ok {
			if _, dup := bySeq[ix.Seq(n)]; !dup {
				bySeq[ix.Seq(n)] = n
				missing = append(missing, ix.Seq(n))
			}
		}
	}
	if len(missing) > 0 {
		ids, err := loadIDs(ctx, q, missing)
		if err != nil {
			return nil, err
		}
		for seq, n := range bySeq {
			id, ok := ids[seq]
			if !ok {
				id = fmt.Sprintf("#%d", seq)
			}
			t.ids[n] = id
		}
	}
	out := make(map[int32]string, len(nodes))
	for _, n := range nodes {
		out[n] = t.ids[n]
	}
	return out, nil
}

// indexListRows is loadListRows through the index's table. The rows are
// shared: callers must not modify them.
func indexListRows(ctx context.Context, ix *graphindex.Index, q store.Querier, seqs []int64) (map[int64]*assetRow, error) {
	t := tableOf(ix)
	t.lock()
	defer t.mu.Unlock()
	if t.full() {
		t.reset()
	}
	var missing []int64
	out := make(map[int64]*assetRow, len(seqs))
	for _, s := range seqs {
		if r, ok := t.rows[s]; ok {
			if r != nil {
				out[s] = r
			}
		} else {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	rows, err := loadListRows(ctx, q, missing)
	if err != nil {
		return nil, err
	}
	for _, s := range missing {
		r := rows[s] // nil: removed since the index was built
		t.rows[s] = r
		if r != nil {
			out[s] = r
		}
	}
	return out, nil
}

// indexResolve is resolveAsset through the index's table: a reference
// resolves the same way for one graph version. Errors are not kept.
func indexResolve(ctx context.Context, ix *graphindex.Index, q store.Querier, ref string) (resolved, error) {
	t := tableOf(ix)
	t.lock()
	r, ok := t.refs[ref]
	gen := t.gen
	t.mu.Unlock()
	if ok {
		return r, nil
	}
	r, err := resolveAsset(ctx, q, ref)
	if err != nil {
		return r, err
	}
	t.lock()
	if t.full() {
		t.reset()
	}
	if t.gen == gen {
		t.refs[ref] = r
	}
	t.mu.Unlock()
	return r, nil
}

// indexFind is findAsset through the index's table: a reference found
// once is not looked up in the store again for this graph version. One
// not found is asked again each time (the store may learn it, and the
// table stays bounded by what exists).
func indexFind(ctx context.Context, ix *graphindex.Index, q store.Querier, ref string) (resolved, bool, error) {
	t := tableOf(ix)
	t.lock()
	r, ok := t.exact[ref]
	gen := t.gen
	t.mu.Unlock()
	if ok {
		return r, true, nil
	}
	r, ok, err := findAsset(ctx, q, ref)
	if err != nil || !ok {
		return r, ok, err
	}
	t.lock()
	if t.full() {
		t.reset()
	}
	if t.gen == gen {
		t.exact[ref] = r
	}
	t.mu.Unlock()
	return r, true, nil
}

func scanPairs(ctx context.Context, q store.Querier, query string, args []any, fn func(int64, string)) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var seq int64
	var s string
	for rows.Next() {
		if err := rows.Scan(&seq, &s); err != nil {
			return err
		}
		fn(seq, s)
	}
	return rows.Err()
}

// FieldReaders lists the jobs and models downstream of asset, at most
// maxDepth hops, that read any of fields. Field names are followed along
// edges: where an edge has column lineage, a mapping with no target column
// means the target job reads the field, a mapping to another column carries
// the field on under that name (a rename or a derived column), and a field
// the edge's column lineage does not mention stops there; an edge without
// column lineage carries every name unchanged (a schema subject to its
// topic, a topic to the table it lands in). A reader is reported once per
// field, nearest first, with the reader's recorded SQL expression that
// uses the field as evidence, else the source of the column lineage.
//
// An asset the graph does not know is an error wrapping ErrUnknownAsset
// that lists the closest names.
func (g *Graph) FieldReaders(ctx context.Context, asset string, fields []string, maxDepth int) ([]FieldReader, error) {
	return g.FieldReadersWithin(ctx, asset, fields, maxDepth, nil)
}

// FieldReadersWithin is FieldReaders with the walk confined to a Reach (a
// diagnosis passes the symptoms' upstream): assets outside it are neither
// walked through nor reported, so the walk's cost follows what can reach
// the symptoms rather than all that lies downstream of the asset. A nil
// reach confines nothing; a reach from an index the graph has since
// replaced confines nothing either (its node numbers name other assets),
// which can only widen the answer.
func (g *Graph) FieldReadersWithin(ctx context.Context, asset string, fields []string, maxDepth int, within *Reach) ([]FieldReader, error) {
	if maxDepth < 0 || maxDepth > MaxWalkDepth {
		return nil, fmt.Errorf("max depth %d is out of range; use 0 to %d", maxDepth, MaxWalkDepth)
	}
	asset = strings.TrimSpace(asset)
	if asset == "" {
		return nil, fmt.Errorf("asset is required: give an id like schema://api-usage-value")
	}
	idx, err := g.Index(ctx)
	if err != nil {
		return nil, err
	}
	// Through the index's table: a diagnosis walks from each changed
	// asset, and a warm one resolves none of them in the store again.
	r, ok, err := indexFind(ctx, idx, g.db, asset)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, unknownAssetError(ctx, g.db, asset)
	}
	start := map[string]string{}
	for _, f := range fields {
		if f = strings.TrimSpace(f); f != "" {
			start[strings.ToLower(f)] = f
		}
	}
	if len(start) == 0 {
		return nil, fmt.Errorf("fields: give at least one field name of %s", r.id)
	}
	n, ok := idx.Node(r.seq)
	if !ok {
		return []FieldReader{}, nil // added after the index was built: no edges yet
	}
	var in []bool
	if within != nil && within.idx == idx {
		if !within.in[n] {
			return []FieldReader{}, nil
		}
		in = within.in
	}
	reads := idx.FieldReads(n, start, maxDepth, in)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return g.describeReads(ctx, idx, reads)
}

// describeReads names the reads and finds their evidence: the reader's
// recorded SQL where it uses the field, else where the column lineage came
// from.
func (g *Graph) describeReads(ctx context.Context, idx *graphindex.Index, reads []graphindex.FieldRead) ([]FieldReader, error) {
	out := make([]FieldReader, 0, len(reads))
	if len(reads) == 0 {
		return out, nil
	}
	var seqs []int64
	for _, rd := range reads {
		seqs = append(seqs, idx.Seq(rd.Reader), idx.Seq(rd.From))
	}
	rows, err := loadRows(ctx, g.db, seqs)
	if err != nil {
		return nil, err
	}
	for _, rd := range reads {
		reader, from := rows[idx.Seq(rd.Reader)], rows[idx.Seq(rd.From)]
		if reader == nil || from == nil {
			continue // removed since the index was built
		}
		var ev []string
		if rd.ReadAs != strings.ToLower(rd.Field) {
			ev = append(ev, fmt.Sprintf("reads %s, which column lineage derives from %s", rd.ReadAs, rd.Field))
		}
		if exprs := sqlscan.Expressions(reader.SQL, rd.ReadAs); len(exprs) > 0 {
			ev = append(ev, "recorded SQL: "+strings.Join(exprs, ", "))
		} else if len(sqlscan.Mentions(reader.SQL, []string{rd.ReadAs})) > 0 {
			ev = append(ev, "recorded SQL names "+rd.ReadAs)
		} else {
			src, err := columnSources(ctx, g.db, from.Seq, reader.Seq, rd.ReadAs, rd.To)
			if err != nil {
				return nil, err
			}
			how := "column lineage"
			if rd.To == "*" {
				how = "column lineage (as a filter or join key)"
			}
			if src != "" {
				how += " from " + src
			}
			ev = append(ev, how)
		}
		out = append(out, FieldReader{Reader: reader.ID, Field: rd.Field, From: from.ID, Evidence: strings.Join(ev, "; ")})
	}
	return out, nil
}

// columnSources names the ingestions (dbt, openlineage, note, connect)
// that recorded a column mapping.
func columnSources(ctx context.Context, q store.Querier, from, to int64, col, toCol string) (string, error) {
	rows, err := q.QueryContext(ctx, `SELECT DISTINCT source FROM lineage_edge_columns
		WHERE from_seq = ? AND to_seq = ? AND LOWER(from_col) = ? AND to_col = ? ORDER BY source`, from, to, col, toCol)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s sql.NullString
		if err := rows.Scan(&s); err != nil {
			return "", err
		}
		if s.String != "" {
			out = append(out, s.String)
		}
	}
	return strings.Join(out, "/"), rows.Err()
}
