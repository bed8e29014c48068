package lineage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// AssetInput is what one ingestion says about one asset. Names are every
// canonical name it knows the asset by (ID among them); Weak are partial
// names (schema.table) that link it to an asset named without a database
// only when that is unambiguous.
type AssetInput struct {
	ID          string
	Names       []string
	Weak        []string
	Kind        Kind
	Platform    string
	Title       string
	Owner       string
	OwnerEmail  string
	Domain      string
	Description string
	URL         string
	SQL         string
	Tags        []string
	RemoveTags  []string
	Schedule    *Schedule
	Columns     []Column
	Source      Source
	// KindIfNew is the kind guessed from the id's platform, used only when
	// the asset is new: a guess never overrides what a source said.
	KindIfNew Kind
}

// checkText applies the asset id rule (CheckIDText) to every name the
// input registers. Each source checks its ids where it reads them, naming
// its own fields; this is the writer's guarantee that no path stores one
// the rule refuses.
func (in *AssetInput) checkText() error {
	if err := CheckIDText("asset id", in.ID); err != nil {
		return err
	}
	for _, n := range in.Names {
		if err := CheckIDText("asset name", n); err != nil {
			return err
		}
	}
	for _, n := range in.Weak {
		if err := CheckIDText("asset partial name", n); err != nil {
			return err
		}
	}
	return nil
}

// assetRow is a stored asset.
type assetRow struct {
	Seq         int64
	ID          string
	Title       string
	Kind        Kind
	Platform    string
	Owner       string
	OwnerEmail  string
	Domain      string
	Description string
	Tags        []string
	Cron        string
	Timezone    string
	Columns     []Column
	SQL         string
	URL         string
	Sources     []string
	FirstSeen   int64
	LastSeen    int64
}

func (r *assetRow) flags() uint8 {
	f := tagFlags(r.Tags)
	if r.Cron != "" {
		f |= flagScheduled
	}
	return f
}

// same reports whether two rows hold the same graph facts; last-seen times
// are bookkeeping and don't count as a change.
func (r *assetRow) same(o *assetRow) bool {
	return r.ID == o.ID && r.Title == o.Title && r.Kind == o.Kind && r.Platform == o.Platform &&
		r.Owner == o.Owner && r.OwnerEmail == o.OwnerEmail && r.Domain == o.Domain &&
		r.Description == o.Description && slices.Equal(r.Tags, o.Tags) && r.Cron == o.Cron &&
		r.Timezone == o.Timezone && slices.Equal(r.Columns, o.Columns) && r.SQL == o.SQL &&
		r.URL == o.URL && slices.Equal(r.Sources, o.Sources)
}

const assetCols = `seq, id, title, kind, platform, owner, owner_email, domain, description, tags, cron, timezone, columns_json, sql_text, url, sources, first_seen_ms, last_seen_ms`

func scanAsset(sc interface{ Scan(...any) error }) (*assetRow, error) {
	var r assetRow
	var kind, tags, cols, sources string
	if err := sc.Scan(&r.Seq, &r.ID, &r.Title, &kind, &r.Platform, &r.Owner, &r.OwnerEmail, &r.Domain,
		&r.Description, &tags, &r.Cron, &r.Timezone, &cols, &r.SQL, &r.URL, &sources, &r.FirstSeen, &r.LastSeen); err != nil {
		return nil, err
	}
	r.Kind = Kind(kind)
	if err := json.Unmarshal([]byte(tags), &r.Tags); err != nil {
		return nil, fmt.Errorf("asset %s: stored tags: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(cols), &r.Columns); err != nil {
		return nil, fmt.Errorf("asset %s: stored columns: %w", r.ID, err)
	}
	if sources != "" {
		r.Sources = strings.Split(sources, ",")
	}
	return &r, nil
}

func loadAsset(ctx context.Context, q store.Querier, seq int64) (*assetRow, error) {
	r, err := scanAsset(q.QueryRowContext(ctx, "SELECT "+assetCols+" FROM lineage_assets WHERE seq = ?", seq))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("asset #%d: %w", seq, store.ErrNotFound)
	}
	return r, err
}

func (r *assetRow) asset() Asset {
	a := Asset{
		ID: r.ID, Kind: r.Kind, Platform: r.Platform, Name: shortName(r.ID), Title: r.Title,
		Owner: r.Owner, OwnerEmail: r.OwnerEmail, Domain: r.Domain, Description: r.Description,
		Tags: r.Tags, Columns: r.Columns, SQL: r.SQL, URL: r.URL,
		FirstSeen: store.FromMillis(r.FirstSeen), LastSeen: store.FromMillis(r.LastSeen),
	}
	if r.Cron != "" {
		a.Schedule = &Schedule{Cron: r.Cron, Timezone: r.Timezone}
	}
	for _, s := range r.Sources {
		a.Sources = append(a.Sources, Source(s))
	}
	return a
}

// ImportStats counts what a write changed.
type ImportStats struct {
	AssetsCreated int      `json:"assets_created" jsonschema:"assets new to the graph"`
	AssetsUpdated int      `json:"assets_updated" jsonschema:"existing assets whose facts changed"`
	AssetsMerged  int      `json:"assets_merged,omitempty" jsonschema:"assets found to be another asset under a different name and folded into it"`
	EdgesCreated  int      `json:"edges_created" jsonschema:"edges new to the graph"`
	EdgesUpdated  int      `json:"edges_updated" jsonschema:"existing edges whose kind, sources or column lineage changed"`
	Unchanged     bool     `json:"unchanged" jsonschema:"true when the graph already held everything (an idempotent re-import)"`
	GraphVersion  int64    `json:"graph_version" jsonschema:"graph version after the write"`
	Warnings      []string `json:"warnings,omitempty" jsonschema:"parts of the input that were skipped, and why, and dbt models a dbt import made one asset (a model renamed, or a table that changed hands): the first 20 (warnings_total counts them all)"`
	WarningsTotal int      `json:"warnings_total,omitempty" jsonschema:"warnings in all"`
}

// Bounds on an import's warnings: a manifest of 3,000 models on a package
// the import does not take warns 3,000 times.
const (
	maxWarnings    = 20
	warningsBudget = 4000
)

// AddWarnings records warnings: every one is counted, and the first ones
// are kept within maxWarnings and warningsBudget characters. Every import
// adds its warnings here, so no import's answer lists them all.
func (s *ImportStats) AddWarnings(ws ...string) {
	used := 0
	for _, w := range s.Warnings {
		used += len(w)
	}
	for _, w := range ws {
		s.WarningsTotal++
		if len(s.Warnings) < maxWarnings && (used+len(w) <= warningsBudget || len(s.Warnings) == 0) {
			s.Warnings = append(s.Warnings, w)
			used += len(w)
		}
	}
}

// Writer applies ingested facts inside one store transaction: the ingest
// formats (internal/lineage/ingest) and notes write the graph through it.
type Writer struct {
	ctx     context.Context
	tx      *store.Tx
	now     int64
	changed bool
	stats   ImportStats
	// stmts holds the transaction's prepared statements by text: an
	// import runs the same few statements hundreds of thousands of times,
	// and preparing each anew was half of its time.
	stmts map[string]*sql.Stmt
	// kinds caches asset kinds the writer wrote or read, for the default
	// edge kind of every link.
	kinds map[int64]Kind
	// cols caches asset column names the writer read (columnsOf), until
	// it writes the asset: a note of thousands of edges out of one
	// asset checks each edge against its columns, and decoding them per
	// edge made a 4,000-edge note out of a 3,000-column topic take a
	// minute.
	cols map[int64][]string
	// pending holds edges LinkLater queued, written in multi-row
	// statements by flushEdges before anything else reads or writes edges.
	pending []edgeInput
	// merged maps each asset a merge of this write deleted to the asset
	// it went into (mergeInto). A caller may hold a seq an earlier upsert
	// returned that a later one merged away: a dbt re-import whose model
	// moved to the table another model's new name now also gives is
	// merged with it after the first was upserted, and its edges, linked
	// after every node, named a deleted asset ("no rows in result set").
	merged map[int64]int64
	// stage, when set, is a staged bulk import (WriteBulk): statements
	// name the staging tables and the work commits every stageBatchRows.
	stage *stager
	// place, when set, is a bulk import written in place (inplace.go):
	// last-seen times are moved after the commit, and the import gives
	// way to staging once it has written more than a batch.
	place *inPlace
	// touched is what the write changed that the traversal index holds,
	// logged at commit for every process holding one (indexlog.go); facts
	// says it changed something else, and factSeqs the assets whose facts
	// those were (also logged, so holders drop only what they read of
	// those assets).
	touched  touchSet
	facts    bool
	factSeqs map[int64]struct{}
}

// edgeRows is pairs per statement in flushEdges: 6 parameters a row, well
// under SQLite's 32,766 and PostgreSQL's 65,535.
const edgeRows = 400

// LinkLater is Link with the kind chosen from the two assets' kinds, no
// column lineage and no override, queued so a bulk import writes its new
// edges a few hundred per statement.
func (w *Writer) LinkLater(from, to int64, src Source) error {
	from, to = w.survivor(from), w.survivor(to)
	fk, err := w.kindOf(from)
	if err != nil {
		return err
	}
	tk, err := w.kindOf(to)
	if err != nil {
		return err
	}
	w.pending = append(w.pending, edgeInput{From: from, To: to, Kind: defaultEdgeKind(fk, tk), Source: src})
	return nil
}

// ExpectLinks makes room for n more edges queued by LinkLater: a bulk
// import queues hundreds of thousands, and regrowing the queue as it
// filled cost about 5% of a first import's time.
func (w *Writer) ExpectLinks(n int) {
	if n > 0 {
		w.pending = slices.Grow(w.pending, n)
	}
}

// flushEdges writes the queued edges: the ones already stored go through
// upsertEdge one by one (their sources and kind may need merging); the new
// ones, first mention of a pair kept, in multi-row INSERTs.
func (w *Writer) flushEdges() error {
	if len(w.pending) == 0 {
		return nil
	}
	queued := w.pending
	w.pending = nil
	seen := make(map[pair]bool, len(queued))
	edges := make([]edgeInput, 0, len(queued))
	for _, e := range queued {
		p := pair{e.From, e.To}
		if e.From == e.To || seen[p] {
			continue
		}
		seen[p] = true
		edges = append(edges, e)
	}
	// Into an empty edge table (a first import, or a staged one into a
	// new catalog) every pair is new: the pairs are distinct, so no chunk
	// meets one an earlier chunk wrote, and reading back is skipped.
	none, err := w.empty("lineage_edges")
	if err != nil {
		return fmt.Errorf("read edges: %w", err)
	}
	args := make([]any, 0, edgeRows*6)
	stored := map[pair]storedEdge{}
	var again []any // last_seen_ms, then the pairs only seen again
	for start := 0; start < len(edges); start += edgeRows {
		chunk := edges[start:min(start+edgeRows, len(edges))]
		clear(stored)
		if !none {
			if err := w.storedEdges(chunk, stored); err != nil {
				return err
			}
		}
		var ins strings.Builder
		ins.Grow(len(edgeInsertSQL) + len(chunk)*len(", (?, ?, ?, ?, ?, ?)"))
		ins.WriteString(edgeInsertSQL)
		args, again = args[:0], append(again[:0], w.now)
		n := 0
		for _, e := range chunk {
			if st, ok := stored[pair{e.From, e.To}]; ok {
				// What upsertEdge would do with an edge stored with the
				// same kind and source: move its last-seen time, here
				// for the whole chunk in one statement.
				if !e.override && e.Columns == nil && mergeSourceList(st.sources, string(e.Source)) == st.sources {
					if st.lastSeen != w.now {
						again = append(again, e.From, e.To)
					}
					continue
				}
				if err := w.upsertEdge(e); err != nil {
					return err
				}
				continue
			}
			if n > 0 {
				ins.WriteString(", ")
			}
			ins.WriteString("(?, ?, ?, ?, ?, ?)")
			args = append(args, e.From, e.To, string(e.Kind), string(e.Source), w.now, w.now)
			w.touchEdge(e.From, e.To)
			n++
		}
		switch {
		case w.place != nil:
			// In place, the restated edges' times move after the commit.
			for i := 1; i < len(again); i += 2 {
				w.place.edges = append(w.place.edges, pair{again[i].(int64), again[i+1].(int64)})
			}
		case len(again) == 1:
		default:
			if _, err := w.execOnce("UPDATE lineage_edges SET last_seen_ms = ? WHERE (from_seq, to_seq) IN (VALUES "+pairVars((len(again)-1)/2)+")", again...); err != nil {
				return fmt.Errorf("update edges: %w", err)
			}
		}
		if n > 0 {
			if _, err := w.exec(ins.String(), args...); err != nil {
				return fmt.Errorf("insert edges: %w", err)
			}
			w.changed = true
			w.stats.EdgesCreated += n
		}
		if err := w.batched(len(chunk)); err != nil {
			return err
		}
	}
	return nil
}

const edgeInsertSQL = "INSERT INTO lineage_edges (from_seq, to_seq, kind, sources, first_seen_ms, last_seen_ms) VALUES "

type pair struct{ from, to int64 }

// storedEdge is what flushEdges reads of a stored edge.
type storedEdge struct {
	sources  string
	lastSeen int64
}

// pairVars is n (from_seq, to_seq) pairs' bind variables, typed so
// PostgreSQL compares them with the BIGINT columns.
func pairVars(n int) string {
	return strings.TrimSuffix(strings.Repeat("(CAST(? AS BIGINT), CAST(? AS BIGINT)), ", n), ", ")
}

// storedEdges puts in stored the pairs of chunk the edge table holds.
func (w *Writer) storedEdges(chunk []edgeInput, stored map[pair]storedEdge) error {
	args := make([]any, 0, len(chunk)*2)
	for _, e := range chunk {
		args = append(args, e.From, e.To)
	}
	rows, err := w.query("SELECT from_seq, to_seq, sources, last_seen_ms FROM lineage_edges WHERE (from_seq, to_seq) IN (VALUES "+pairVars(len(chunk))+")", args...)
	if err != nil {
		return fmt.Errorf("read edges: %w", err)
	}
	for rows.Next() {
		var p pair
		var st storedEdge
		if err := rows.Scan(&p.from, &p.to, &st.sources, &st.lastSeen); err != nil {
			rows.Close()
			return fmt.Errorf("read edges: %w", err)
		}
		stored[p] = st
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return fmt.Errorf("read edges: %w", err)
	}
	return nil
}

// empty reports whether table holds no rows.
func (w *Writer) empty(table string) (bool, error) {
	var one int
	err := w.queryRow("SELECT 1 FROM " + table + " LIMIT 1").Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	return false, err
}

// stmt returns the prepared statement for query, preparing it once.
func (w *Writer) stmt(query string) (*sql.Stmt, error) {
	if st, ok := w.stmts[query]; ok {
		return st, nil
	}
	key := query
	if w.stage != nil {
		query = stageTables.Replace(query)
	}
	st, err := w.tx.PrepareContext(w.ctx, query)
	if err != nil {
		return nil, err
	}
	if w.stmts == nil {
		w.stmts = map[string]*sql.Stmt{}
	}
	w.stmts[key] = st
	return st, nil
}

func (w *Writer) exec(query string, args ...any) (sql.Result, error) {
	st, err := w.stmt(query)
	if err != nil {
		return nil, err
	}
	return w.count(st.ExecContext(w.ctx, args...))
}

// execOnce runs a statement whose text is seldom repeated (a list of as
// many values as a batch happened to need) without keeping it prepared.
func (w *Writer) execOnce(query string, args ...any) (sql.Result, error) {
	if w.stage != nil {
		query = stageTables.Replace(query)
	}
	return w.count(w.tx.ExecContext(w.ctx, query, args...))
}

// count adds the rows a statement wrote to an import in place's count
// (inplace.go), failing once they pass its room: every write of the
// Writer but its INSERT … RETURNING (counted where they run) goes through
// here, a merge's re-pointed edges and names included.
func (w *Writer) count(res sql.Result, err error) (sql.Result, error) {
	if err != nil || w.place == nil {
		return res, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return res, err
	}
	return res, w.place.wrote(int(n))
}

func (w *Writer) query(query string, args ...any) (*sql.Rows, error) {
	st, err := w.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(w.ctx, args...)
}

func (w *Writer) queryRow(query string, args ...any) *sql.Row {
	st, err := w.stmt(query)
	if err != nil {
		// The unprepared query reports the same error through its Row.
		if w.stage != nil {
			query = stageTables.Replace(query)
		}
		return w.tx.QueryRowContext(w.ctx, query, args...)
	}
	return st.QueryRowContext(w.ctx, args...)
}

// close releases the prepared statements.
func (w *Writer) close() {
	for _, st := range w.stmts {
		st.Close()
	}
	w.stmts = nil
}

// Write runs fn in a transaction and, when it changed anything, moves the
// graph's versions and logs what changed in the traversal index, so every
// agent's index catches up on its next call (indexlog.go).
func (g *Graph) Write(ctx context.Context, fn func(w *Writer) error) (ImportStats, error) {
	return g.write(ctx, fn, nil, nil)
}

// write is Write with inSwap (BulkOptions.InSwap) run last in the
// transaction; place, when set, makes it a bulk import in place
// (inplace.go), reset at every attempt.
func (g *Graph) write(ctx context.Context, fn func(w *Writer) error, inSwap func(tx *store.Tx) error, place *inPlace) (ImportStats, error) {
	var stats ImportStats
	err := g.db.InTx(ctx, func(tx *store.Tx) error {
		w := &Writer{ctx: ctx, tx: tx, now: store.Millis(g.clock.Now())}
		if place != nil {
			*place = inPlace{now: w.now, max: place.max}
			w.place = place
		}
		defer w.close()
		// An import in place that passed its room rolls back, even if
		// fn made light of the error.
		full := func(err error) error {
			if place != nil && place.full {
				return errInPlaceFull
			}
			return err
		}
		if err := full(fn(w)); err != nil {
			return err
		}
		if err := full(w.flushEdges()); err != nil {
			return err
		}
		if err := w.publish(ctx, tx); err != nil {
			return err
		}
		if inSwap != nil {
			if err := inSwap(tx); err != nil {
				return err
			}
		}
		w.stats.Unchanged = !w.changed
		stats = w.stats
		return nil
	})
	return stats, err
}

func bindVars(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// lookupAliases returns alias -> (seq, weak) for the names present.
func (w *Writer) lookupAliases(names []string) (map[string]aliasHit, error) {
	out := map[string]aliasHit{}
	if len(names) == 0 {
		return out, nil
	}
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	rows, err := w.query("SELECT alias, asset_seq, weak FROM lineage_aliases WHERE alias IN ("+bindVars(len(names))+")", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var a string
		var h aliasHit
		if err := rows.Scan(&a, &h.seq, &h.weak); err != nil {
			return nil, err
		}
		out[a] = h
	}
	return out, rows.Err()
}

// scanMinKeys is how many keys a look-up needs before reading the whole
// table may be cheaper: below it the look-ups take a few milliseconds.
const scanMinKeys = 2_000

// worthScanning reports whether looking up keys rows of table one by one
// costs more than reading the table whole: a re-import of a project
// looks up nearly every name the store holds, and on SQLite a look-up by
// key costs about what four rows read in order do. (Edges were measured
// too: their look-ups cost what reading the table does.)
func (w *Writer) worthScanning(table string, keys int) (bool, error) {
	if keys < scanMinKeys {
		return false, nil
	}
	var n int
	if err := w.queryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
		return false, err
	}
	return 4*keys >= n, nil
}

// scanAliases puts in hits every stored name that uses counts, reading the
// alias table whole (worthScanning).
func (w *Writer) scanAliases(uses map[string]int, hits map[string]aliasHit) error {
	rows, err := w.query("SELECT alias, asset_seq, weak FROM lineage_aliases")
	if err != nil {
		return err
	}
	defer rows.Close()
	var a string
	var h aliasHit
	for rows.Next() {
		if err := rows.Scan(&a, &h.seq, &h.weak); err != nil {
			return err
		}
		if uses[a] > 0 {
			hits[a] = h
		}
	}
	return rows.Err()
}

type aliasHit struct {
	seq  int64
	weak int
}

// conflictsWithWeak reports whether asset seq already carries a full name
// on the same platform that shares our partial name but not our full names:
// then the partial name is someone else's table, not ours.
func (w *Writer) conflictsWithWeak(seq int64, in *AssetInput) (bool, error) {
	rows, err := w.query("SELECT alias FROM lineage_aliases WHERE asset_seq = ? AND weak = 0", seq)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	ours := map[string]bool{}
	for _, n := range in.Names {
		ours[n] = true
	}
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return false, err
		}
		if ours[a] {
			continue
		}
		if wk := weakOf(a); wk != "" && slices.Contains(in.Weak, wk) {
			return true, nil
		}
	}
	return false, rows.Err()
}

// UpsertAsset finds the asset the input describes (through any of its
// names), creates it when new, folds in the new facts and registers the
// names. It returns the asset's seq.
func (w *Writer) UpsertAsset(in *AssetInput) (int64, error) {
	if in.ID == "" {
		return 0, errors.New("asset id is empty")
	}
	if err := in.checkText(); err != nil {
		return 0, err
	}
	if !slices.Contains(in.Names, in.ID) {
		in.Names = append([]string{in.ID}, in.Names...)
	}
	in.Weak = slices.DeleteFunc(slices.Clone(in.Weak), func(s string) bool { return s == "" || slices.Contains(in.Names, s) })
	hits, err := w.lookupAliases(append(slices.Clone(in.Names), in.Weak...))
	if err != nil {
		return 0, fmt.Errorf("look up asset %s: %w", in.ID, err)
	}
	var found []int64
	for _, n := range in.Names {
		if h, ok := hits[n]; ok && h.seq > 0 && !slices.Contains(found, h.seq) {
			found = append(found, h.seq)
		}
	}
	if len(found) == 0 {
		var cands []int64
		for _, n := range in.Weak {
			if h, ok := hits[n]; ok && h.seq > 0 && !slices.Contains(cands, h.seq) {
				cands = append(cands, h.seq)
			}
		}
		for _, c := range cands {
			bad, err := w.conflictsWithWeak(c, in)
			if err != nil {
				return 0, err
			}
			if !bad {
				found = append(found, c)
			}
		}
		if len(found) > 1 {
			found = nil // several tables share the partial name: link none
		}
	}
	var seq int64
	switch len(found) {
	case 0:
		seq, err = w.insertAsset(in)
		if err != nil {
			return 0, err
		}
	default:
		orig, merged, err := w.mergeInto(found, in)
		if err != nil {
			return 0, err
		}
		if _, known := hits[in.ID]; !known && len(found) == 1 && importsBuilder(in) && builds(orig) && orig.ID != in.ID {
			w.stats.AddWarnings(fmt.Sprintf("%s is recorded as %s, which builds the same table: a model renamed, or a table that changed hands "+
				"(then the two models are one asset now); docs/ASSET_IDS.md, \"A table that changes hands\"", in.ID, orig.ID))
		}
		seq = orig.Seq
		applyInput(merged, in)
		if !merged.same(orig) {
			if err := w.saveAsset(merged, orig); err != nil {
				return 0, err
			}
		} else if orig.LastSeen != w.now {
			if _, err := w.exec("UPDATE lineage_assets SET last_seen_ms = ? WHERE seq = ?", w.now, seq); err != nil {
				return 0, err
			}
		}
	}
	if err := w.registerAliases(seq, in, hits); err != nil {
		return 0, err
	}
	return seq, nil
}

func (w *Writer) insertAsset(in *AssetInput) (int64, error) {
	r := w.newRow(in)
	var seq int64
	err := w.queryRow(insertAssetSQL+assetRowSQL+" RETURNING seq", assetArgs(r)...).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("insert asset %s: %w", in.ID, err)
	}
	if w.place != nil {
		if err := w.place.wrote(1); err != nil {
			return 0, err
		}
	}
	w.changed = true
	w.touchNode(seq)
	w.touchFacts(seq)
	w.stats.AssetsCreated++
	w.setKind(seq, r.Kind)
	return seq, nil
}

const (
	insertAssetSQL = `INSERT INTO lineage_assets (id, name, name_key, title, kind, platform, owner, owner_email,
		domain, description, tags, flags, cron, timezone, columns_json, sql_text, url, sources, first_seen_ms, last_seen_ms) VALUES `
	assetRowSQL  = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	assetRowArgs = 20
	// assetRows is rows per multi-row INSERT: 20 parameters a row.
	assetRows = 200
)

// newRow is the stored form of a new asset described by in.
func (w *Writer) newRow(in *AssetInput) *assetRow {
	r := &assetRow{ID: in.ID, FirstSeen: w.now, LastSeen: w.now, Kind: in.KindIfNew}
	applyInput(r, in)
	if r.Kind == "" {
		r.Kind = KindDataset
	}
	if r.Platform == "" {
		r.Platform, _, _ = SplitID(r.ID)
	}
	return r
}

func assetArgs(r *assetRow) []any {
	return appendAssetArgs(make([]any, 0, assetRowArgs), r)
}

// appendAssetArgs appends r's insertAssetSQL parameters to args.
func appendAssetArgs(args []any, r *assetRow) []any {
	name := shortName(r.ID) // parses the id: once, not once per column
	return append(args, r.ID, name, strings.ToLower(name), r.Title, string(r.Kind), r.Platform, r.Owner, r.OwnerEmail,
		r.Domain, r.Description, mustJSON(r.Tags), int(r.flags()), r.Cron, r.Timezone, mustJSON(r.Columns), r.SQL, r.URL,
		strings.Join(r.Sources, ","), r.FirstSeen, r.LastSeen)
}

// UpsertAssets is UpsertAsset over many inputs, returning their seqs in
// order. The inputs none of whose names (strong or partial) is stored or
// shared with another input are plainly new: they and their names are
// inserted a few hundred per statement. The rest go through UpsertAsset
// one by one, in order; they share no name with the new ones, so the
// order between the two groups does not matter.
func (w *Writer) UpsertAssets(ins []*AssetInput) ([]int64, error) {
	seqs := make([]int64, len(ins))
	// An empty alias table (a first import, or a staged one into a new
	// catalog) holds none of the names: looking each up is skipped.
	none, err := w.empty("lineage_aliases")
	if err != nil {
		return nil, fmt.Errorf("look up assets: %w", err)
	}
	uses := make(map[string]int, 2*len(ins))
	var names []string
	count := func(n string) {
		if uses[n] == 0 && !none {
			names = append(names, n)
		}
		uses[n]++
	}
	for _, in := range ins {
		if in.ID == "" {
			return nil, errors.New("asset id is empty")
		}
		if err := in.checkText(); err != nil {
			return nil, err
		}
		if !slices.Contains(in.Names, in.ID) {
			in.Names = append([]string{in.ID}, in.Names...)
		}
		if slices.ContainsFunc(in.Weak, func(s string) bool { return s == "" || slices.Contains(in.Names, s) }) {
			in.Weak = slices.DeleteFunc(slices.Clone(in.Weak), func(s string) bool { return s == "" || slices.Contains(in.Names, s) })
		}
		for _, n := range in.Names {
			count(n)
		}
		for _, n := range in.Weak {
			count(n)
		}
	}
	hits := make(map[string]aliasHit, len(names))
	scan, err := w.worthScanning("lineage_aliases", len(names))
	if err != nil {
		return nil, fmt.Errorf("look up assets: %w", err)
	}
	if scan {
		if err := w.scanAliases(uses, hits); err != nil {
			return nil, fmt.Errorf("look up assets: %w", err)
		}
		names = nil
	}
	for start := 0; start < len(names); start += 500 {
		part, err := w.lookupAliases(names[start:min(start+500, len(names))])
		if err != nil {
			return nil, fmt.Errorf("look up assets: %w", err)
		}
		maps.Copy(hits, part)
	}
	// A name listed twice (by two inputs, or twice by one, which counts
	// once per listing) sends its inputs down the careful path too.
	known := func(names []string) bool {
		for _, n := range names {
			if _, ok := hits[n]; ok || uses[n] > 1 {
				return true
			}
		}
		return false
	}
	// How many inputs reach each stored asset through their names: an
	// asset only one input reaches is changed by that input alone, so
	// its input can be written apart from the others, in any order.
	reach := map[int64]int{}
	for _, in := range ins {
		for _, s := range reachedSeqs(in, hits) {
			reach[s]++
		}
	}
	fresh := make([]int, 0, len(ins))
	var plain []int
	for i, in := range ins {
		if !known(in.Names) && !known(in.Weak) {
			fresh = append(fresh, i)
			continue
		}
		if s := plainlyStored(in, hits); s > 0 && reach[s] == 1 {
			seqs[i] = s
			plain = append(plain, i)
			continue
		}
		seq, err := w.UpsertAsset(in)
		if err != nil {
			return nil, err
		}
		seqs[i] = seq
		if err := w.batched(1); err != nil {
			return nil, err
		}
	}
	// One input's merge may have taken an asset an input before it was
	// given.
	for i, s := range seqs {
		seqs[i] = w.survivor(s)
	}
	if err := w.refreshStored(ins, plain, seqs); err != nil {
		return nil, err
	}
	if w.kinds == nil {
		w.kinds = make(map[int64]Kind, len(fresh))
	}
	// Buffers reused by every chunk: a chunk's rows and names are
	// hundreds of values each.
	args := make([]any, 0, assetRows*assetRowArgs)
	kinds := make([]Kind, 0, assetRows)
	byID := make(map[string]int64, assetRows)
	var aliases []any // alias, seq, weak
	for start := 0; start < len(fresh); start += assetRows {
		chunk := fresh[start:min(start+assetRows, len(fresh))]
		var q strings.Builder
		q.Grow(len(insertAssetSQL) + len(chunk)*(len(assetRowSQL)+2) + 20)
		q.WriteString(insertAssetSQL)
		args, kinds = args[:0], kinds[:0]
		for j, i := range chunk {
			if j > 0 {
				q.WriteString(", ")
			}
			q.WriteString(assetRowSQL)
			r := w.newRow(ins[i])
			kinds = append(kinds, r.Kind)
			args = appendAssetArgs(args, r)
		}
		q.WriteString(" RETURNING seq, id")
		rows, err := w.query(q.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("insert assets: %w", err)
		}
		clear(byID)
		for rows.Next() {
			var seq int64
			var id string
			if err := rows.Scan(&seq, &id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("insert assets: %w", err)
			}
			byID[id] = seq
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("insert assets: %w", err)
		}
		if w.place != nil {
			if err := w.place.wrote(len(chunk)); err != nil {
				return nil, err
			}
		}
		aliases = aliases[:0]
		for j, i := range chunk {
			seq, ok := byID[ins[i].ID]
			if !ok {
				return nil, fmt.Errorf("insert asset %s: no seq returned", ins[i].ID)
			}
			seqs[i] = seq
			w.setKind(seq, kinds[j])
			w.touchNode(seq)
			for _, n := range ins[i].Names {
				aliases = append(aliases, n, seq, 0)
			}
			for _, n := range ins[i].Weak {
				aliases = append(aliases, n, seq, 1)
			}
		}
		for a := 0; a < len(aliases); a += 3 * 1000 {
			part := aliases[a:min(a+3*1000, len(aliases))]
			q := "INSERT INTO lineage_aliases (alias, asset_seq, weak) VALUES " + strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", len(part)/3), ", ")
			if _, err := w.exec(q, part...); err != nil {
				return nil, fmt.Errorf("register names: %w", err)
			}
		}
		w.changed = true
		for _, i := range chunk {
			w.touchFacts(seqs[i])
		}
		w.stats.AssetsCreated += len(chunk)
		if err := w.batched(len(chunk) + len(aliases)/3); err != nil {
			return nil, err
		}
	}
	return seqs, nil
}

// reachedSeqs is the stored assets any of in's names (strong or partial)
// points at, each once.
func reachedSeqs(in *AssetInput, hits map[string]aliasHit) []int64 {
	var out []int64
	for _, names := range [][]string{in.Names, in.Weak} {
		for _, n := range names {
			if h, ok := hits[n]; ok && h.seq > 0 && !slices.Contains(out, h.seq) {
				out = append(out, h.seq)
			}
		}
	}
	return out
}

// plainlyStored is the seq of the stored asset in describes when in is a
// plain re-statement of it, else 0: every strong name is stored as that
// asset's, and every partial name is stored for that asset or for none.
// UpsertAsset would then merge nothing and register no name; it would
// only fold in's facts into that one row. (A name another input lists
// too makes that input reach the asset as well, which UpsertAssets
// checks.)
func plainlyStored(in *AssetInput, hits map[string]aliasHit) int64 {
	var seq int64
	for _, n := range in.Names {
		h, ok := hits[n]
		if !ok || h.weak != 0 || h.seq <= 0 || (seq != 0 && h.seq != seq) {
			return 0
		}
		seq = h.seq
	}
	for _, n := range in.Weak {
		if h, ok := hits[n]; !ok || (h.seq != 0 && h.seq != seq) {
			return 0
		}
	}
	return seq
}

// refreshStored is UpsertAsset for the inputs at idx, each a plain
// re-statement of the stored asset seqs[i] that no other input reaches
// (plainlyStored): their rows read and their last-seen times moved a few
// hundred per statement, the rare changed row saved on its own. A
// re-import of a whole project otherwise paid four statements per asset.
func (w *Writer) refreshStored(ins []*AssetInput, idx []int, seqs []int64) error {
	if len(idx) == 0 {
		return nil
	}
	// As UpsertAsset does for a stored asset (mergeInto): edges queued
	// before are written first, so one queued again after merges its
	// source into theirs rather than being dropped as a repeat.
	if err := w.flushEdges(); err != nil {
		return err
	}
	const chunkRows = 500
	args := make([]any, 0, chunkRows+1)
	byseq := make(map[int64]*assetRow, chunkRows)
	for start := 0; start < len(idx); start += chunkRows {
		chunk := idx[start:min(start+chunkRows, len(idx))]
		args = args[:0]
		for _, i := range chunk {
			args = append(args, seqs[i])
		}
		rows, err := w.query("SELECT "+assetCols+" FROM lineage_assets WHERE seq IN ("+bindVars(len(args))+")", args...)
		if err != nil {
			return fmt.Errorf("read assets: %w", err)
		}
		clear(byseq)
		for rows.Next() {
			r, err := scanAsset(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("read assets: %w", err)
			}
			byseq[r.Seq] = r
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("read assets: %w", err)
		}
		args = append(args[:0], w.now)
		for _, i := range chunk {
			orig, ok := byseq[seqs[i]]
			if !ok {
				return fmt.Errorf("asset #%d: %w", seqs[i], store.ErrNotFound)
			}
			merged := *orig
			applyInput(&merged, ins[i])
			w.setKind(orig.Seq, orig.Kind)
			switch {
			case !merged.same(orig):
				if err := w.saveAsset(&merged, orig); err != nil {
					return err
				}
			case orig.LastSeen != w.now:
				args = append(args, orig.Seq)
			}
		}
		switch {
		case w.place != nil:
			// In place, the restated assets' times move after the commit.
			for _, a := range args[1:] {
				w.place.assets = append(w.place.assets, a.(int64))
			}
		case len(args) == 1:
		default:
			if _, err := w.execOnce("UPDATE lineage_assets SET last_seen_ms = ? WHERE seq IN ("+bindVars(len(args)-1)+")", args...); err != nil {
				return fmt.Errorf("update assets: %w", err)
			}
		}
		if err := w.batched(len(chunk)); err != nil {
			return err
		}
	}
	return nil
}

func mustJSON(v any) string {
	// Most assets have no tags or columns: no encoder for those.
	switch x := v.(type) {
	case []string:
		if len(x) == 0 {
			return "[]"
		}
	case []Column:
		if len(x) == 0 {
			return "[]"
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only slices of strings and Columns reach here
	}
	if string(b) == "null" {
		return "[]"
	}
	return string(b)
}

// applyInput folds an ingestion's facts into a row. The last non-empty
// value wins for single facts; tags and columns accumulate; a kind only
// moves to one that says more (a table stays a dbt model once dbt says so).
func applyInput(r *assetRow, in *AssetInput) {
	newRank, oldRank := kindRank(in.Kind), kindRank(r.Kind)
	if isExposureID(r.ID) && in.ID != "" && !strings.HasPrefix(in.ID, "dbt://") {
		// A dbt exposure only declares a dashboard, app or job that lives in
		// another tool; once that tool's id is known it names the asset and
		// the exposure id stays an alias.
		r.ID = in.ID
		r.Platform, _, _ = SplitID(in.ID)
	}
	if isExposureID(in.ID) && r.ID != "" && !isExposureID(r.ID) {
		// The exposure describes an asset known by its own tool's id: its
		// kind guess (application for a Dagster job) and platform "dbt" do
		// not overwrite what that tool or a team said.
		in = exposureFacts(in)
	}
	if in.Kind != "" && (r.Kind == "" || newRank >= oldRank) {
		if newRank == 3 && oldRank < 3 && r.ID != "" && in.ID != "" {
			// dbt nodes are known by their dbt id; the table name stays an alias.
			r.ID = in.ID
		}
		r.Kind = in.Kind
	}
	if in.Platform != "" && (r.Platform == "" || newRank >= oldRank) {
		r.Platform = in.Platform
	}
	set := func(dst *string, v string) {
		if v = strings.TrimSpace(v); v != "" {
			*dst = v
		}
	}
	set(&r.Title, in.Title)
	set(&r.Owner, in.Owner)
	set(&r.OwnerEmail, in.OwnerEmail)
	set(&r.Domain, in.Domain)
	set(&r.Description, in.Description)
	set(&r.URL, in.URL)
	set(&r.SQL, in.SQL)
	if in.Schedule != nil && strings.TrimSpace(in.Schedule.Cron) != "" {
		r.Cron = strings.TrimSpace(in.Schedule.Cron)
		r.Timezone = strings.TrimSpace(in.Schedule.Timezone)
	}
	tags := normalizeTags(append(slices.Clone(r.Tags), in.Tags...))
	if len(in.RemoveTags) > 0 {
		rm := normalizeTags(in.RemoveTags)
		tags = slices.DeleteFunc(tags, func(t string) bool { return slices.Contains(rm, t) })
	}
	r.Tags = tags
	r.Columns = MergeColumns(r.Columns, in.Columns)
	if in.Source != "" && !slices.Contains(r.Sources, string(in.Source)) {
		r.Sources = append(slices.Clone(r.Sources), string(in.Source))
		sort.Strings(r.Sources)
	}
}

func isExposureID(id string) bool { return strings.HasPrefix(id, "dbt://exposure.") }

// exposureFacts is what an exposure may still add to an asset another tool
// names: everything but its kind and platform.
func exposureFacts(in *AssetInput) *AssetInput {
	c := *in
	c.Kind, c.Platform = "", ""
	return &c
}

// MergeColumns keeps existing columns in order, refreshes their type and
// description from the new list and appends new ones.
func MergeColumns(old, add []Column) []Column {
	out := slices.Clone(old)
	for _, c := range add {
		c.Name = strings.TrimSpace(c.Name)
		if c.Name == "" {
			continue
		}
		i := slices.IndexFunc(out, func(o Column) bool { return strings.EqualFold(o.Name, c.Name) })
		if i < 0 {
			out = append(out, c)
			continue
		}
		if c.Type != "" {
			out[i].Type = c.Type
		}
		if c.Description != "" {
			out[i].Description = c.Description
		}
	}
	return out
}

// indexMeta is what of a row the traversal index holds.
func (r *assetRow) indexMeta() [4]string {
	return [4]string{string(r.Kind), fmt.Sprint(r.flags()), r.Owner, r.Domain}
}

// saveAsset stores r, the new facts of the asset stored as was.
func (w *Writer) saveAsset(r, was *assetRow) error {
	_, err := w.exec(`UPDATE lineage_assets SET id = ?, name = ?, name_key = ?, title = ?, kind = ?, platform = ?,
		owner = ?, owner_email = ?, domain = ?, description = ?, tags = ?, flags = ?, cron = ?, timezone = ?, columns_json = ?,
		sql_text = ?, url = ?, sources = ?, first_seen_ms = ?, last_seen_ms = ? WHERE seq = ?`,
		r.ID, shortName(r.ID), strings.ToLower(shortName(r.ID)), r.Title, string(r.Kind), r.Platform, r.Owner, r.OwnerEmail,
		r.Domain, r.Description, mustJSON(r.Tags), int(r.flags()), r.Cron, r.Timezone, mustJSON(r.Columns), r.SQL, r.URL,
		strings.Join(r.Sources, ","), r.FirstSeen, w.now, r.Seq)
	if err != nil {
		return fmt.Errorf("update asset %s: %w", r.ID, err)
	}
	delete(w.cols, r.Seq)
	w.setKind(r.Seq, r.Kind)
	w.changed = true
	w.touchFacts(r.Seq)
	if r.indexMeta() != was.indexMeta() {
		w.touchNode(r.Seq)
	}
	w.stats.AssetsUpdated++
	return nil
}

// registerAliases points every strong name at seq and records the partial
// names, marking a partial name two assets share as ambiguous (seq 0).
// hits are the names' owners before (UpsertAsset's lookup): an owner that
// loses a name has changed facts too.
func (w *Writer) registerAliases(seq int64, in *AssetInput, hits map[string]aliasHit) error {
	for _, n := range in.Names {
		res, err := w.exec(`INSERT INTO lineage_aliases (alias, asset_seq, weak) VALUES (?, ?, 0)
			ON CONFLICT (alias) DO UPDATE SET asset_seq = excluded.asset_seq, weak = 0
			WHERE lineage_aliases.asset_seq <> excluded.asset_seq OR lineage_aliases.weak <> 0`, n, seq)
		if err != nil {
			return fmt.Errorf("register name %s: %w", n, err)
		}
		if k, _ := res.RowsAffected(); k > 0 {
			w.changed = true
			w.touchFacts(seq, hits[n].seq)
		}
	}
	for _, n := range in.Weak {
		res, err := w.exec(`INSERT INTO lineage_aliases (alias, asset_seq, weak) VALUES (?, ?, 1)
			ON CONFLICT (alias) DO UPDATE SET asset_seq = 0
			WHERE lineage_aliases.weak = 1 AND lineage_aliases.asset_seq <> excluded.asset_seq AND lineage_aliases.asset_seq <> 0`, n, seq)
		if err != nil {
			return fmt.Errorf("register partial name %s: %w", n, err)
		}
		if k, _ := res.RowsAffected(); k > 0 {
			w.changed = true
			w.touchFacts(seq, hits[n].seq)
		}
	}
	return nil
}

// survivor is the asset seq is now: itself, or the one a merge of this
// write put it into (merges chain forward: a deleted seq is never given
// again, so a chain has no loop).
func (w *Writer) survivor(seq int64) int64 {
	for {
		next, ok := w.merged[seq]
		if !ok {
			return seq
		}
		seq = next
	}
}

// mergeInto folds several assets that turned out to be one into the one
// that says most (a dbt node over a table, then the oldest), re-pointing
// names, edges and column lineage. It returns the survivor as stored and
// the survivor with the others' facts folded in, not yet saved.
func (w *Writer) mergeInto(seqs []int64, in *AssetInput) (orig, merged *assetRow, err error) {
	if err := w.flushEdges(); err != nil {
		return nil, nil, err
	}
	// The merge re-points edges with their stored times: an import in
	// place moves the times it deferred of these assets' edges first.
	if err := w.moveDeferredEdgesOf(seqs); err != nil {
		return nil, nil, err
	}
	rows := make([]*assetRow, 0, len(seqs))
	for _, s := range seqs {
		r, err := scanAsset(w.queryRow("SELECT "+assetCols+" FROM lineage_assets WHERE seq = ?", s))
		if errors.Is(err, sql.ErrNoRows) {
			err = fmt.Errorf("asset #%d: %w", s, store.ErrNotFound)
		}
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if a, b := kindRank(rows[i].Kind), kindRank(rows[j].Kind); a != b {
			return a > b
		}
		if a, b := isExposureID(rows[i].ID), isExposureID(rows[j].ID); a != b {
			return b // the tool's own id over a dbt exposure's
		}
		return rows[i].Seq < rows[j].Seq
	})
	keep := rows[0]
	m := *keep
	for _, d := range rows[1:] {
		// The dropped asset fills gaps; the survivor's own facts win.
		applyInput(&m, &AssetInput{Kind: d.Kind, Platform: d.Platform, Title: d.Title, Owner: d.Owner,
			OwnerEmail: d.OwnerEmail, Domain: d.Domain, Description: d.Description, URL: d.URL, SQL: d.SQL, Tags: d.Tags,
			Schedule: scheduleOf(d), Columns: d.Columns})
		applyInput(&m, &AssetInput{Kind: keep.Kind, Platform: keep.Platform, Title: keep.Title, Owner: keep.Owner,
			OwnerEmail: keep.OwnerEmail, Domain: keep.Domain, Description: keep.Description, URL: keep.URL, SQL: keep.SQL,
			Schedule: scheduleOf(keep)})
		for _, s := range d.Sources {
			if !slices.Contains(m.Sources, s) {
				m.Sources = append(m.Sources, s)
			}
		}
		sort.Strings(m.Sources)
		if err := w.repoint(d.Seq, keep.Seq); err != nil {
			return nil, nil, err
		}
		delete(w.cols, d.Seq)
		if _, err := w.exec("DELETE FROM lineage_assets WHERE seq = ?", d.Seq); err != nil {
			return nil, nil, err
		}
		delete(w.kinds, d.Seq)
		if w.merged == nil {
			w.merged = map[int64]int64{}
		}
		w.merged[d.Seq] = keep.Seq
		w.stats.AssetsMerged++
		if importsBuilder(in) && builds(keep) && builds(d) && keep.ID != d.ID {
			w.stats.AddWarnings(fmt.Sprintf("%s and %s are now one asset, %s: a table one of them builds was recorded for the other "+
				"(as when two models trade tables); docs/ASSET_IDS.md, \"A table that changes hands\"", d.ID, keep.ID, keep.ID))
		}
		w.changed = true
		w.touchNode(d.Seq)
		// The survivor took the dropped asset's names.
		w.touchFacts(d.Seq, keep.Seq)
	}
	m.ID = keep.ID
	m.FirstSeen = minFirstSeen(rows)
	return keep, &m, nil
}

// builds reports whether a stored row is a dbt node that builds a table
// (a model, seed or snapshot known by its dbt id), and importsBuilder
// whether a dbt import's input is one. dbt refuses two nodes of a project
// on one table, so when a dbt import makes two of them one asset (a merge,
// or a new node joining another's asset through the table) it is no two
// spellings of one asset found out but a model renamed or a table that
// changed hands, which the graph cannot yet tell apart (an alias carries
// no record of who gave it): the write says so rather than doing it
// silently.
func builds(r *assetRow) bool { return kindRank(r.Kind) == 3 && strings.HasPrefix(r.ID, "dbt://") }

func importsBuilder(in *AssetInput) bool {
	return in.Source == SourceDBT && kindRank(in.Kind) == 3 && strings.HasPrefix(in.ID, "dbt://")
}

func minFirstSeen(rows []*assetRow) int64 {
	m := rows[0].FirstSeen
	for _, r := range rows {
		m = min(m, r.FirstSeen)
	}
	return m
}

func scheduleOf(r *assetRow) *Schedule {
	if r.Cron == "" {
		return nil
	}
	return &Schedule{Cron: r.Cron, Timezone: r.Timezone}
}

// repoint moves names, edges and column lineage from asset drop to keep.
func (w *Writer) repoint(drop, keep int64) error {
	if _, err := w.exec("UPDATE lineage_aliases SET asset_seq = ? WHERE asset_seq = ?", keep, drop); err != nil {
		return err
	}
	type edgeRow struct {
		from, to        int64
		kind, sources   string
		first, lastSeen int64
	}
	rows, err := w.query("SELECT from_seq, to_seq, kind, sources, first_seen_ms, last_seen_ms FROM lineage_edges WHERE from_seq = ? OR to_seq = ?", drop, drop)
	if err != nil {
		return err
	}
	var edges []edgeRow
	for rows.Next() {
		var e edgeRow
		if err := rows.Scan(&e.from, &e.to, &e.kind, &e.sources, &e.first, &e.lastSeen); err != nil {
			rows.Close()
			return err
		}
		edges = append(edges, e)
	}
	rows.Close()
	remap := func(s int64) int64 {
		if s == drop {
			return keep
		}
		return s
	}
	for _, e := range edges {
		nf, nt := remap(e.from), remap(e.to)
		w.touchEdge(e.from, e.to)
		w.touchCols(e.from, e.to)
		if nf != nt {
			w.touchEdge(nf, nt)
			w.touchCols(nf, nt)
			if _, err := w.exec(`INSERT INTO lineage_edges (from_seq, to_seq, kind, sources, first_seen_ms, last_seen_ms)
				VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (from_seq, to_seq) DO NOTHING`, nf, nt, e.kind, e.sources, e.first, e.lastSeen); err != nil {
				return err
			}
			var cur string
			if err := w.queryRow("SELECT sources FROM lineage_edges WHERE from_seq = ? AND to_seq = ?", nf, nt).Scan(&cur); err != nil {
				return err
			}
			if merged := mergeSourceList(cur, e.sources); merged != cur {
				if _, err := w.exec("UPDATE lineage_edges SET sources = ? WHERE from_seq = ? AND to_seq = ?", merged, nf, nt); err != nil {
					return err
				}
			}
			if _, err := w.exec(`INSERT INTO lineage_edge_columns (from_seq, to_seq, from_col, to_col, source)
				SELECT ?, ?, from_col, to_col, source FROM lineage_edge_columns WHERE from_seq = ? AND to_seq = ?
				ON CONFLICT DO NOTHING`, nf, nt, e.from, e.to); err != nil {
				return err
			}
		}
		if _, err := w.exec("DELETE FROM lineage_edge_columns WHERE from_seq = ? AND to_seq = ?", e.from, e.to); err != nil {
			return err
		}
		if _, err := w.exec("DELETE FROM lineage_edges WHERE from_seq = ? AND to_seq = ?", e.from, e.to); err != nil {
			return err
		}
	}
	return nil
}

func mergeSourceList(a, b string) string {
	set := map[string]bool{}
	for _, s := range strings.Split(a+","+b, ",") {
		if s != "" {
			set[s] = true
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// edgeInput is what one ingestion says about one edge. Columns, when not
// nil, replace the column lineage this source gave the edge before.
type edgeInput struct {
	From, To int64
	Kind     EdgeKind
	Source   Source
	Columns  []ColumnMapping
	// override lets a team's note correct the kind another source chose.
	override bool
}

// upsertEdge records an edge; the first kind recorded stays unless a note
// overrides it, so sources that name the same edge differently don't
// flip it on every import.
func (w *Writer) upsertEdge(e edgeInput) error {
	if e.From == e.To {
		return nil
	}
	var kind, sources string
	err := w.queryRow("SELECT kind, sources FROM lineage_edges WHERE from_seq = ? AND to_seq = ?", e.From, e.To).Scan(&kind, &sources)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := w.exec(`INSERT INTO lineage_edges (from_seq, to_seq, kind, sources, first_seen_ms, last_seen_ms)
			VALUES (?, ?, ?, ?, ?, ?)`, e.From, e.To, string(e.Kind), string(e.Source), w.now, w.now); err != nil {
			return fmt.Errorf("insert edge: %w", err)
		}
		w.changed = true
		w.touchEdge(e.From, e.To)
		w.stats.EdgesCreated++
	case err != nil:
		return fmt.Errorf("read edge: %w", err)
	default:
		newKind := kind
		if e.override && e.Kind != "" {
			newKind = string(e.Kind)
		}
		newSources := mergeSourceList(sources, string(e.Source))
		if newKind != kind || newSources != sources {
			if _, err := w.exec("UPDATE lineage_edges SET kind = ?, sources = ?, last_seen_ms = ? WHERE from_seq = ? AND to_seq = ?",
				newKind, newSources, w.now, e.From, e.To); err != nil {
				return err
			}
			w.changed = true
			if newKind != kind {
				w.touchEdge(e.From, e.To)
			}
			if newSources != sources {
				w.touchFacts() // an edge's sources: no asset's facts
			}
			w.stats.EdgesUpdated++
		} else if _, err := w.exec("UPDATE lineage_edges SET last_seen_ms = ? WHERE from_seq = ? AND to_seq = ? AND last_seen_ms <> ?",
			w.now, e.From, e.To, w.now); err != nil {
			return err
		}
	}
	if e.Columns != nil {
		return w.replaceEdgeColumns(e)
	}
	return nil
}

func (w *Writer) replaceEdgeColumns(e edgeInput) error {
	want := normalizeMappings(e.Columns)
	rows, err := w.query("SELECT from_col, to_col FROM lineage_edge_columns WHERE from_seq = ? AND to_seq = ? AND source = ?", e.From, e.To, string(e.Source))
	if err != nil {
		return err
	}
	var have []ColumnMapping
	for rows.Next() {
		var m ColumnMapping
		if err := rows.Scan(&m.From, &m.To); err != nil {
			rows.Close()
			return err
		}
		have = append(have, m)
	}
	rows.Close()
	if slices.Equal(normalizeMappings(have), want) {
		return nil
	}
	if _, err := w.exec("DELETE FROM lineage_edge_columns WHERE from_seq = ? AND to_seq = ? AND source = ?", e.From, e.To, string(e.Source)); err != nil {
		return err
	}
	for _, m := range want {
		if _, err := w.exec("INSERT INTO lineage_edge_columns (from_seq, to_seq, from_col, to_col, source) VALUES (?, ?, ?, ?, ?)",
			e.From, e.To, m.From, m.To, string(e.Source)); err != nil {
			return err
		}
	}
	w.changed = true
	w.touchCols(e.From, e.To)
	w.stats.EdgesUpdated++
	return nil
}

func normalizeMappings(ms []ColumnMapping) []ColumnMapping {
	out := make([]ColumnMapping, 0, len(ms))
	for _, m := range ms {
		m.From, m.To = strings.TrimSpace(m.From), strings.TrimSpace(m.To)
		if m.From == "" {
			continue
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].From != out[j].From {
			return out[i].From < out[j].From
		}
		return out[i].To < out[j].To
	})
	return out
}

// kindOf reads a stored asset's kind, for default edge kinds.
func (w *Writer) kindOf(seq int64) (Kind, error) {
	if k, ok := w.kinds[seq]; ok {
		return k, nil
	}
	var k string
	if err := w.queryRow("SELECT kind FROM lineage_assets WHERE seq = ?", seq).Scan(&k); err != nil {
		return "", err
	}
	w.setKind(seq, Kind(k))
	return Kind(k), nil
}

func (w *Writer) setKind(seq int64, k Kind) {
	if w.kinds == nil {
		w.kinds = map[int64]Kind{}
	}
	w.kinds[seq] = k
}

// Link records from -> to with the given kind, or one chosen from the two
// assets' kinds when kind is "".
func (w *Writer) Link(from, to int64, kind EdgeKind, src Source, cols []ColumnMapping, override bool) error {
	if err := w.flushEdges(); err != nil {
		return err
	}
	from, to = w.survivor(from), w.survivor(to)
	if kind == "" {
		fk, err := w.kindOf(from)
		if err != nil {
			return err
		}
		tk, err := w.kindOf(to)
		if err != nil {
			return err
		}
		kind = defaultEdgeKind(fk, tk)
	}
	return w.upsertEdge(edgeInput{From: from, To: to, Kind: kind, Source: src, Columns: cols, override: override})
}

// GraphVersion reads the store's graph version: it moves on every write
// that changes the graph (the topology and facts versions under it say
// what kind of change, indexlog.go).
func GraphVersion(ctx context.Context, q store.Querier) (int64, time.Time, error) {
	var v, ms int64
	if err := q.QueryRowContext(ctx, "SELECT version, updated_ms FROM lineage_version WHERE id = 1").Scan(&v, &ms); err != nil {
		return 0, time.Time{}, fmt.Errorf("read lineage graph version: %w", err)
	}
	return v, store.FromMillis(ms), nil
}
