package lineage

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/dataworkers/dw/internal/lineage/graphindex"
	"github.com/dataworkers/dw/internal/store"
)

// The index change log. Every agent process holds a traversal index of the
// graph (Graph.Index); when any process writes the graph, the others must
// see the write on their next call. Reloading the index costs about a
// second at a million assets, so the Writer records, in the transaction
// of the write, what it changed in what the index holds: each asset and
// edge it touched, as it stands at commit (graphindex.Change), in
// lineage_index_log under the topology version the write produced. A
// holder reads the rows after its own version and applies them
// (graphindex.Index.Apply). A write that changes only facts the index does
// not hold (titles, names, SQL, sources) moves the facts version and logs
// nothing: the holder keeps its index and only reads names afresh. One
// that changes both logs, in one more row, the assets whose other facts
// it changed (graphindex.Facts), and the holder keeps what it read of the
// rest (Graph.refresh).
//
// Whole-graph operations (a staged import's swap) and writes too large to
// log move the log's floor to their version instead and empty it; so does
// pruning, past logMaxRows. A holder older than the floor, or one that
// finds a version without rows (a write that bypassed the Writer), loads
// the index again, as it did for every write before the log.

// maxLoggedChanges is the most assets, edges and edges' column lineage one
// write logs; a larger one (a first import) moves the floor, and each
// holder loads the index again, which then costs about what reading that
// many rows would. It is at most half of logMaxRows, so pruning never
// removes the version just written.
const maxLoggedChanges = 10_000

// logMaxRows is the log's size past which a write prunes it to its newest
// half.
const logMaxRows = 2 * maxLoggedChanges

// touchSet is what a Writer changed that the index holds, by asset seq
// and edge; what each is now is read back at commit.
type touchSet struct {
	nodes map[int64]struct{}
	edges map[pair]struct{}
	cols  map[pair]struct{}
	// whole: too much to log, or the graph replaced whole.
	whole bool
}

func (t *touchSet) size() int { return len(t.nodes) + len(t.edges) + len(t.cols) }

// touchAll marks the write as one that every holder reloads after.
func (w *Writer) touchAll() {
	w.touched = touchSet{whole: true}
}

func (w *Writer) touchNode(seq int64) {
	if w.touched.whole {
		return
	}
	if w.touched.nodes == nil {
		w.touched.nodes = map[int64]struct{}{}
	}
	w.touched.nodes[seq] = struct{}{}
	w.checkTouched()
}

func (w *Writer) touchEdge(from, to int64) {
	if w.touched.whole {
		return
	}
	if w.touched.edges == nil {
		w.touched.edges = map[pair]struct{}{}
	}
	w.touched.edges[pair{from, to}] = struct{}{}
	w.checkTouched()
}

func (w *Writer) touchCols(from, to int64) {
	if w.touched.whole {
		return
	}
	if w.touched.cols == nil {
		w.touched.cols = map[pair]struct{}{}
	}
	w.touched.cols[pair{from, to}] = struct{}{}
	w.checkTouched()
}

func (w *Writer) checkTouched() {
	if w.touched.size() > maxLoggedChanges {
		w.touchAll()
	}
}

// touchFacts marks a change of facts the index does not hold, of the
// assets seqs (none: facts no asset's row holds, such as an edge's
// sources). Past maxLoggedChanges assets the write stops naming them
// (factSeqs nil): holders then drop everything they read, as they did
// for every such write before the log named assets.
func (w *Writer) touchFacts(seqs ...int64) {
	if !w.facts {
		w.facts, w.factSeqs = true, map[int64]struct{}{}
	}
	if w.factSeqs == nil {
		return
	}
	for _, s := range seqs {
		if s > 0 {
			w.factSeqs[s] = struct{}{}
		}
	}
	if len(w.factSeqs) > maxLoggedChanges {
		w.factSeqs = nil
	}
}

// factChange is the one log row naming the assets whose facts a write
// changed (possibly none), so every write that moved the facts version
// and named what it changed has a row in its version (refresh counts
// those versions). One row, however many assets, keeps a large write of
// facts from filling the log and the holders' budget for applying it.
func (w *Writer) factChange() graphindex.Change {
	return graphindex.Change{Op: graphindex.Facts, Seqs: slices.Sorted(maps.Keys(w.factSeqs))}
}

// A Facts row keeps its seqs in the kind column, in decimal, comma
// separated: a binary from before Facts rows reads the column as a kind
// it never looks at, where anything else in cols (which it decodes as
// column pairs) would fail its refresh.
func factsText(seqs []int64) string {
	var b strings.Builder
	for i, s := range seqs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(s, 10))
	}
	return b.String()
}

func parseFacts(text string) ([]int64, error) {
	if text == "" {
		return nil, nil
	}
	parts := strings.Split(text, ",")
	out := make([]int64, len(parts))
	for i, p := range parts {
		s, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// publish ends a write in its transaction: when anything changed it moves
// the graph version, the topology version (when what the index holds
// changed) and the facts version (when anything else did), and logs the
// index's changes under the new topology version.
func (w *Writer) publish(ctx context.Context, tx *store.Tx) error {
	if !w.changed {
		if err := tx.QueryRowContext(ctx, "SELECT version FROM lineage_version WHERE id = 1").Scan(&w.stats.GraphVersion); err != nil {
			return fmt.Errorf("read graph version: %w", err)
		}
		return nil
	}
	var changes []graphindex.Change
	if !w.touched.whole {
		var err error
		if changes, err = w.readBack(ctx, tx); err != nil {
			return fmt.Errorf("log index changes: %w", err)
		}
	}
	topo := w.touched.whole || len(changes) > 0
	// A change the Writer did not classify counts as a fact: holders then
	// read names afresh, which is never wrong.
	facts := w.facts || !topo
	// A write that changes the index and facts it can name logs those in
	// one more row, so a holder drops only what it read of those assets
	// (within the one write's budget, so pruning never reaches the version
	// just written). One that changes only facts logs nothing and moves
	// only the facts version, as before: holders then drop what they read,
	// but a holder that missed many such writes only relabels its index,
	// where logged ones would use up its budget for applying and the log,
	// and load the index whole.
	if topo && w.facts && w.factSeqs != nil && !w.touched.whole && len(changes) < maxLoggedChanges {
		changes = append(changes, w.factChange())
	}
	var topology, logRows int64
	if err := tx.QueryRowContext(ctx, `UPDATE lineage_version SET version = version + 1, topology = topology + ?,
		facts = facts + ?, updated_ms = ? WHERE id = 1 RETURNING version, topology, log_rows`,
		b2i(topo), b2i(facts), w.now).Scan(&w.stats.GraphVersion, &topology, &logRows); err != nil {
		return fmt.Errorf("bump graph version: %w", err)
	}
	switch {
	case w.touched.whole:
		return floorLog(ctx, tx, topology)
	case topo:
		return appendLog(ctx, tx, topology, changes, logRows)
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// floorLog empties the log and moves its floor to version: every holder
// of an older index loads it again.
func floorLog(ctx context.Context, tx *store.Tx, version int64) error {
	if _, err := tx.ExecContext(ctx, "DELETE FROM lineage_index_log"); err != nil {
		return fmt.Errorf("empty the index log: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE lineage_version SET log_floor = ?, log_rows = 0 WHERE id = 1", version); err != nil {
		return fmt.Errorf("move the index log's floor: %w", err)
	}
	return nil
}

// logColsPerRow is lineage_index_log's columns; logRowsPerInsert rows per
// statement keep the parameters well under SQLite's limit.
const (
	logColsPerRow    = 10
	logRowsPerInsert = 200
)

// appendLog writes version's changes, and prunes the log to its newest
// half when it has grown past logMaxRows.
func appendLog(ctx context.Context, tx *store.Tx, version int64, changes []graphindex.Change, logRows int64) error {
	args := make([]any, 0, logRowsPerInsert*logColsPerRow)
	for start := 0; start < len(changes); start += logRowsPerInsert {
		chunk := changes[start:min(start+logRowsPerInsert, len(changes))]
		args = args[:0]
		for i, c := range chunk {
			cols := ""
			if c.Op == graphindex.ColsSet {
				b, err := json.Marshal(c.Cols)
				if err != nil {
					return err
				}
				cols = string(b)
			}
			kind := c.Kind
			if c.Op == graphindex.Facts {
				kind = factsText(c.Seqs)
			}
			args = append(args, version, start+i, int(c.Op), c.From, c.To, kind, int(c.Flags), c.Owner, c.Domain, cols)
		}
		q := "INSERT INTO lineage_index_log (version, n, op, from_seq, to_seq, kind, flags, owner, domain, cols) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?), ", len(chunk)), ", ")
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("log index changes: %w", err)
		}
	}
	logRows += int64(len(changes))
	if logRows <= logMaxRows {
		_, err := tx.ExecContext(ctx, "UPDATE lineage_version SET log_rows = ? WHERE id = 1", logRows)
		return err
	}
	// Whole versions go, oldest first, until at most half the rows are
	// left; the floor moves to the last version removed.
	var cut int64
	if err := tx.QueryRowContext(ctx, "SELECT version FROM lineage_index_log ORDER BY version DESC, n DESC LIMIT 1 OFFSET ?",
		logMaxRows/2).Scan(&cut); err != nil {
		return fmt.Errorf("prune the index log: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM lineage_index_log WHERE version <= ?", cut); err != nil {
		return fmt.Errorf("prune the index log: %w", err)
	}
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM lineage_index_log").Scan(&logRows); err != nil {
		return fmt.Errorf("prune the index log: %w", err)
	}
	_, err := tx.ExecContext(ctx, "UPDATE lineage_version SET log_floor = ?, log_rows = ? WHERE id = 1", cut, logRows)
	return err
}

// readBack reads what each touched asset and edge is at the end of the
// write: asset sets first (an edge's assets exist before it), then edges,
// then column lineage, and removed assets last (their edges gone before
// them).
func (w *Writer) readBack(ctx context.Context, tx *store.Tx) ([]graphindex.Change, error) {
	t := &w.touched
	var out, dels []graphindex.Change
	nodes := slices.Sorted(maps.Keys(t.nodes))
	for start := 0; start < len(nodes); start += 500 {
		chunk := nodes[start:min(start+500, len(nodes))]
		args := make([]any, len(chunk))
		for i, s := range chunk {
			args[i] = s
		}
		rows, err := tx.QueryContext(ctx, "SELECT seq, kind, flags, owner, domain FROM lineage_assets WHERE seq IN ("+bindVars(len(chunk))+")", args...)
		if err != nil {
			return nil, err
		}
		found := map[int64]graphindex.Change{}
		for rows.Next() {
			c := graphindex.Change{Op: graphindex.NodeSet}
			var flags int
			if err := rows.Scan(&c.From, &c.Kind, &flags, &c.Owner, &c.Domain); err != nil {
				rows.Close()
				return nil, err
			}
			c.Flags = uint8(flags)
			found[c.From] = c
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
		for _, s := range chunk {
			if c, ok := found[s]; ok {
				out = append(out, c)
			} else {
				dels = append(dels, graphindex.Change{Op: graphindex.NodeDel, From: s})
			}
		}
	}
	byPair := func(a, b pair) int {
		if c := cmp.Compare(a.from, b.from); c != 0 {
			return c
		}
		return cmp.Compare(a.to, b.to)
	}
	edges := slices.SortedFunc(maps.Keys(t.edges), byPair)
	var gone, set []graphindex.Change
	for start := 0; start < len(edges); start += edgeRows {
		chunk := edges[start:min(start+edgeRows, len(edges))]
		var q strings.Builder
		q.WriteString("SELECT from_seq, to_seq, kind FROM lineage_edges WHERE (from_seq, to_seq) IN (VALUES ")
		args := make([]any, 0, 2*len(chunk))
		for i, p := range chunk {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(CAST(? AS BIGINT), CAST(? AS BIGINT))")
			args = append(args, p.from, p.to)
		}
		q.WriteString(")")
		rows, err := tx.QueryContext(ctx, q.String(), args...)
		if err != nil {
			return nil, err
		}
		kinds := map[pair]string{}
		for rows.Next() {
			var p pair
			var k string
			if err := rows.Scan(&p.from, &p.to, &k); err != nil {
				rows.Close()
				return nil, err
			}
			kinds[p] = k
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
		for _, p := range chunk {
			if k, ok := kinds[p]; ok {
				set = append(set, graphindex.Change{Op: graphindex.EdgeSet, From: p.from, To: p.to, Kind: k})
			} else {
				gone = append(gone, graphindex.Change{Op: graphindex.EdgeDel, From: p.from, To: p.to})
			}
		}
	}
	out = append(append(out, gone...), set...)
	for _, p := range slices.SortedFunc(maps.Keys(t.cols), byPair) {
		rows, err := tx.QueryContext(ctx, "SELECT from_col, to_col FROM lineage_edge_columns WHERE from_seq = ? AND to_seq = ? ORDER BY from_col, to_col", p.from, p.to)
		if err != nil {
			return nil, err
		}
		c := graphindex.Change{Op: graphindex.ColsSet, From: p.from, To: p.to}
		for rows.Next() {
			var m [2]string
			if err := rows.Scan(&m[0], &m[1]); err != nil {
				rows.Close()
				return nil, err
			}
			c.Cols = append(c.Cols, m)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return append(out, dels...), nil
}

// versions is the store's row of graph versions.
type versions struct {
	version, topology, facts, floor int64
}

func readVersions(ctx context.Context, q store.Querier) (versions, error) {
	var v versions
	if err := q.QueryRowContext(ctx, "SELECT version, topology, facts, log_floor FROM lineage_version WHERE id = 1").
		Scan(&v.version, &v.topology, &v.facts, &v.floor); err != nil {
		return v, fmt.Errorf("read lineage graph version: %w", err)
	}
	return v, nil
}

// errLogGap: the log lacks a version it should hold (pruned meanwhile, or
// a write that bypassed the Writer).
var errLogGap = errors.New("the index log has no rows for a topology version")

// errLogLarge: more changes than applying them is worth.
var errLogLarge = errors.New("the index log holds more changes than a reload costs")

// readChanges reads the logged changes of topology versions after..upTo
// in order, at most limit of them, and counts the versions among them
// that name the assets whose facts they changed (graphindex.Facts rows).
func readChanges(ctx context.Context, q store.Querier, after, upTo int64, limit int) (_ []graphindex.Change, factVersions int64, _ error) {
	rows, err := q.QueryContext(ctx, `SELECT version, op, from_seq, to_seq, kind, flags, owner, domain, cols FROM lineage_index_log
		WHERE version > ? AND version <= ? ORDER BY version, n LIMIT ?`, after, upTo, limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("read the index log: %w", err)
	}
	defer rows.Close()
	var out []graphindex.Change
	last := after
	// A version is counted when it has a Facts row and every Facts row it
	// has parses: one that does not names nothing for sure, and the holder
	// then drops its names.
	var named, bad bool
	count := func() {
		if named && !bad {
			factVersions++
		}
		named, bad = false, false
	}
	for rows.Next() {
		var v int64
		var op, flags int
		var cols string
		var c graphindex.Change
		if err := rows.Scan(&v, &op, &c.From, &c.To, &c.Kind, &flags, &c.Owner, &c.Domain, &cols); err != nil {
			return nil, 0, fmt.Errorf("read the index log: %w", err)
		}
		if v != last && v != last+1 {
			return nil, 0, errLogGap
		}
		if v != last {
			count()
		}
		last = v
		if len(out) == limit {
			return nil, 0, errLogLarge
		}
		c.Op, c.Flags = graphindex.ChangeOp(op), uint8(flags)
		if c.Op == graphindex.Facts {
			seqs, err := parseFacts(c.Kind)
			named, bad = true, bad || err != nil
			if c.From != 0 {
				seqs = append(seqs, c.From)
			}
			c.Kind, c.Seqs = "", seqs
		}
		if cols != "" {
			if err := json.Unmarshal([]byte(cols), &c.Cols); err != nil {
				return nil, 0, fmt.Errorf("read the index log: version %d: %w", v, err)
			}
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("read the index log: %w", err)
	}
	if last != upTo {
		return nil, 0, errLogGap
	}
	count()
	return out, factVersions, nil
}
