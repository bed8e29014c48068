package lineage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// batchWorld is a seeded catalog and a re-import into it: tables with two
// strong names each (the first their id), partial names some of them
// share, owners, tags and edges from two sources. The re-import restates
// some tables as they are, changes others, adds new ones, names two
// stored tables in one input (a merge), lists a name twice, and links
// pairs of its tables.
type batchWorld struct {
	seed  uint64
	setup []*AssetInput
	links [][2]int // setup[i] -> setup[j]
	srcs  []Source // per link
	again []*AssetInput
	edges [][2]int // again[i] -> again[j]
	esrcs []Source
}

func newBatchWorld(seed uint64, tables int) *batchWorld {
	rng := rand.New(rand.NewPCG(seed, 7))
	// Table k is pg://db1.s.tk, except every seventh, which is a table of
	// the same schema and name in another database: the two share their
	// partial name pg://s.tk.
	strong := func(k int) []string {
		id := fmt.Sprintf("pg://db1.s.t%d", k)
		if k%7 == 0 && k > 0 {
			id = fmt.Sprintf("pg://db2.s.t%d", k-7)
		}
		return []string{id, fmt.Sprintf("dbt://model.p.t%d", k)}
	}
	weak := func(k int) []string { return []string{weakOf(strong(k)[0])} }
	// Every fifth table is known by its dbt name and its partial
	// warehouse name only, so an input naming just the partial name
	// finds it.
	names := func(k int) []string {
		if k%5 == 4 {
			return strong(k)[1:]
		}
		return strong(k)
	}
	owners := []string{"", "team-a", "team-b"}
	tags := [][]string{nil, {"money"}, {"pii", "regulator"}}
	input := func(k int, names []string) *AssetInput {
		return &AssetInput{ID: names[0], Names: slices.Clone(names), Weak: weak(k), Owner: owners[k%3], Tags: slices.Clone(tags[k%3]),
			Title: fmt.Sprintf("table %d", k), KindIfNew: KindTable, Source: SourceDBT}
	}
	sources := []Source{SourceDBT, SourceOpenLineage}
	w := &batchWorld{seed: seed}
	stored := map[int]bool{}
	for k := range tables {
		if rng.IntN(3) == 0 {
			continue
		}
		stored[k] = true
		ns := names(k)
		if len(ns) > 1 && rng.IntN(4) == 0 {
			ns = ns[:1] // the dbt name not yet known
		}
		// A name of the table's the re-import lists only in a late
		// input of its own.
		ns = append(ns, fmt.Sprintf("snowflake://acct.db.s.t%d", k))
		w.setup = append(w.setup, input(k, ns))
	}
	for range len(w.setup) * 2 {
		i, j := rng.IntN(len(w.setup)), rng.IntN(len(w.setup))
		w.links = append(w.links, [2]int{i, j})
		w.srcs = append(w.srcs, sources[rng.IntN(2)])
	}
	for k := range tables {
		if rng.IntN(4) == 0 {
			continue
		}
		in := input(k, names(k))
		if k%5 == 4 {
			in.Names = append(in.Names, fmt.Sprintf("snowflake://acct.db.s.t%d", k))
		}
		switch rng.IntN(7) {
		case 0:
			in.Owner = "team-new" // a changed fact
		case 1:
			in.Tags = append(in.Tags, "customer-facing")
		case 2:
			in.Weak = append(in.Weak, fmt.Sprintf("pg://s.v%d", k)) // a partial name not stored yet
		case 3:
			in.Names, in.Weak = append(in.Names, in.Weak...), nil // the partial name, now as a full one
		case 4:
			in.Weak = append(in.Weak, weak(rng.IntN(tables))...) // another table's partial name
		}
		w.again = append(w.again, in)
	}
	// One input naming two stored tables, and one listing a name another
	// input lists too. They come first: a merge later in the import would
	// drop an asset whose seq an earlier input already returned.
	var special []*AssetInput
	var keys []int
	for k := range stored {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) >= 3 {
		a, b := keys[rng.IntN(len(keys))], keys[rng.IntN(len(keys))]
		if a != b {
			special = append(special, &AssetInput{ID: strong(a)[1], Names: []string{strong(a)[1], strong(b)[0]}, KindIfNew: KindDBTModel})
		}
		c := keys[rng.IntN(len(keys))]
		special = append(special, &AssetInput{ID: fmt.Sprintf("looker://view.t%d", c), Names: []string{strong(c)[0]}})
	}
	w.again = append(special, w.again...)
	// Late inputs restating a stored table under another of its names,
	// or naming it only by its partial name, with an owner of their own:
	// the one written last decides it.
	for range 3 {
		if len(keys) > 0 {
			d := keys[rng.IntN(len(keys))]
			id := fmt.Sprintf("snowflake://acct.db.s.t%d", d)
			w.again = append(w.again, &AssetInput{ID: id, Owner: "team-late"})
			d = keys[rng.IntN(len(keys))]
			w.again = append(w.again, &AssetInput{ID: fmt.Sprintf("looker://explore.t%d", d), Weak: weak(d), Owner: "team-partial"})
		}
	}
	// An import links its pairs as one source, some of them stored
	// already as another.
	// The special inputs are not linked: a later input may merge the
	// asset one of them returned into another.
	src := sources[rng.IntN(2)]
	for range len(w.again) * 2 {
		i, j := len(special)+rng.IntN(len(w.again)-len(special)), len(special)+rng.IntN(len(w.again)-len(special))
		w.edges = append(w.edges, [2]int{i, j})
		w.esrcs = append(w.esrcs, src)
	}
	return w
}

// clones gives each path inputs of its own: the writer rewrites names.
func clones(ins []*AssetInput) []*AssetInput {
	out := make([]*AssetInput, len(ins))
	for i, in := range ins {
		c := *in
		c.Names, c.Weak, c.Tags = slices.Clone(in.Names), slices.Clone(in.Weak), slices.Clone(in.Tags)
		out[i] = &c
	}
	return out
}

// build writes the world's catalog into db one asset and one edge at a
// time, then its re-import: batched (UpsertAssets, LinkLater) or one by
// one (UpsertAsset, Link). It returns the re-import's stats.
func (bw *batchWorld) build(t *testing.T, db *store.DB, batched bool, how writeMode) (ImportStats, []string) {
	t.Helper()
	ctx := context.Background()
	g, c := bw.catalog(t, db)
	c.Advance(3600e9) // the re-import comes an hour later: every last-seen time moves
	var logged []string
	reimport := bw.reimport(batched, &logged)
	var stats ImportStats
	var err error
	switch how {
	case oneTx:
		stats, err = g.Write(ctx, reimport)
	case staged:
		stats, err = g.writeStaged(ctx, reimport, nil)
	case inPlaceMode:
		stats, err = g.writeInPlace(ctx, reimport, nil, stageBatchRows)
	}
	if err != nil {
		t.Fatalf("seed %d: re-import (batched %v): %v", bw.seed, batched, err)
	}
	return stats, logged
}

// catalog writes the world's catalog into db one asset and one edge at a
// time, on a fake clock.
func (bw *batchWorld) catalog(t *testing.T, db *store.DB) (*Graph, *clock.Fake) {
	t.Helper()
	c := clock.NewFake(lineagetest.StoryTime)
	g := New(db, c)
	_, err := g.Write(context.Background(), func(w *Writer) error {
		seqs := make([]int64, len(bw.setup))
		var err error
		for i, in := range clones(bw.setup) {
			if seqs[i], err = w.UpsertAsset(in); err != nil {
				return err
			}
		}
		for i, l := range bw.links {
			if err := w.Link(seqs[l[0]], seqs[l[1]], "", bw.srcs[i], nil, false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("seed %d: setup: %v", bw.seed, err)
	}
	return g, c
}

// reimport is the world's re-import, batched or one by one; it puts what
// the write logged for held indexes in logged.
func (bw *batchWorld) reimport(batched bool, logged *[]string) func(w *Writer) error {
	return func(w *Writer) error {
		ins := clones(bw.again)
		seqs := make([]int64, len(ins))
		var err error
		if batched {
			if seqs, err = w.UpsertAssets(ins); err != nil {
				return fmt.Errorf("upsert assets: %w", err)
			}
		} else {
			for i, in := range ins {
				if seqs[i], err = w.UpsertAsset(in); err != nil {
					return err
				}
			}
		}
		for i, e := range bw.edges {
			if batched {
				err = w.LinkLater(seqs[e[0]], seqs[e[1]], bw.esrcs[i])
			} else {
				err = w.Link(seqs[e[0]], seqs[e[1]], "", bw.esrcs[i], nil, false)
			}
			if err != nil {
				return fmt.Errorf("edge %d %v (%s -> %s): %w", i, e, bw.again[e[0]].ID, bw.again[e[1]].ID, err)
			}
		}
		if err := w.flushEdges(); err != nil {
			return err
		}
		*logged = changeLog(w)
		return nil
	}
}

// writeMode is how a test's bulk write is written: one transaction
// (Write), staged (stage.go) or in place (inplace.go).
type writeMode int

const (
	oneTx writeMode = iota
	staged
	inPlaceMode
)

func (m writeMode) String() string { return [...]string{"one transaction", "staged", "in place"}[m] }

// changeLog is what w logged for held indexes to catch up with (nodes,
// edges, column lineage and facts touched), by asset id: the two ways
// number new assets differently.
func changeLog(w *Writer) []string {
	id := func(seq int64) string {
		var s string
		if err := w.queryRow("SELECT id FROM lineage_assets WHERE seq = ?", seq).Scan(&s); err != nil {
			return "(gone)"
		}
		return s
	}
	out := []string{fmt.Sprintf("whole %v facts %v", w.touched.whole, w.facts)}
	for seq := range w.touched.nodes {
		out = append(out, "node "+id(seq))
	}
	for p := range w.touched.edges {
		out = append(out, "edge "+id(p.from)+" "+id(p.to))
	}
	for p := range w.touched.cols {
		out = append(out, "cols "+id(p.from)+" "+id(p.to))
	}
	for seq := range w.factSeqs {
		out = append(out, "facts "+id(seq))
	}
	slices.Sort(out)
	return out
}

// seenDump is every asset's and edge's first- and last-seen times, by id.
func seenDump(t *testing.T, db *store.DB) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, q := range []string{
		"SELECT id, '', first_seen_ms, last_seen_ms FROM lineage_assets",
		`SELECT f.id, t.id, e.first_seen_ms, e.last_seen_ms FROM lineage_edges e
			JOIN lineage_assets f ON f.seq = e.from_seq JOIN lineage_assets t ON t.seq = e.to_seq`,
	} {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var a, b string
			var first, last int64
			if err := rows.Scan(&a, &b, &first, &last); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s %s %d %d", a, b, first, last))
		}
		rows.Close()
	}
	slices.Sort(out)
	return out
}

// TestBatchedReimportIsOneByOne: a re-import through UpsertAssets and
// LinkLater (which reads stored assets and edges a few hundred at a time
// and moves their last-seen times in one statement per batch) leaves the
// store exactly as the same inputs written one at a time through
// UpsertAsset and Link do: every asset, name, edge and column mapping,
// every first- and last-seen time, the same counts and the same change
// log for held indexes. Seeded worlds the batching was not written
// against, on both engines; one large enough to cross every batch
// boundary; each written in one transaction, staged (the statements
// rewritten to the staging tables, committed in batches) or in place (the
// restated rows' last-seen times moved after the commit).
func TestBatchedReimportIsOneByOne(t *testing.T) {
	type world struct {
		seed   uint64
		tables int
		how    writeMode
	}
	var worlds []world
	for seed := range uint64(12) {
		worlds = append(worlds, world{seed, 60, writeMode(seed % 3)})
	}
	worlds = append(worlds, world{12, 3000, oneTx}, world{13, 3000, staged}, world{14, 3000, inPlaceMode})
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		for _, wd := range worlds {
			bw := newBatchWorld(wd.seed, wd.tables)
			one := otherStore(t, db)
			batchedStats, batchedLog := bw.build(t, db, true, wd.how)
			// In place is held to one plain transaction; staged, to the
			// one-by-one writes staged.
			oneHow := wd.how
			if oneHow == inPlaceMode {
				oneHow = oneTx
			}
			oneStats, oneLog := bw.build(t, one, false, oneHow)
			// db holds the earlier worlds' versions too.
			batchedStats.GraphVersion, oneStats.GraphVersion = 0, 0
			if !reflect.DeepEqual(batchedStats, oneStats) {
				t.Errorf("seed %d (%v): batched re-import counted %+v, one by one %+v", wd.seed, wd.how, batchedStats, oneStats)
			}
			if got, want := lineagetest.GraphDump(t, db), lineagetest.GraphDump(t, one); !slices.Equal(got, want) {
				t.Errorf("seed %d (%v): the stores differ\nbatched:    %q\none by one: %q", wd.seed, wd.how, got, want)
			}
			if got, want := seenDump(t, db), seenDump(t, one); !slices.Equal(got, want) {
				t.Errorf("seed %d (%v): seen times differ\nbatched:    %q\none by one: %q", wd.seed, wd.how, got, want)
			}
			if !slices.Equal(batchedLog, oneLog) {
				t.Errorf("seed %d (%v): change logs differ\nbatched:    %q\none by one: %q", wd.seed, wd.how, batchedLog, oneLog)
			}
			// The next world starts from an empty catalog.
			for _, table := range []string{"lineage_edge_columns", "lineage_edges", "lineage_aliases", "lineage_assets"} {
				if _, err := db.ExecContext(context.Background(), "DELETE FROM "+table); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

// TestEdgesQueuedBeforeRestatedAssets: an edge queued before a batch of
// plainly restated assets is written before them, as UpsertAsset writes
// queued edges before touching a stored asset, so the same pair queued
// again after under another source adds that source.
func TestEdgesQueuedBeforeRestatedAssets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g := New(db, clock.NewFake(lineagetest.StoryTime))
		var a, b int64
		if _, err := g.Write(ctx, func(w *Writer) error {
			var err error
			if a, err = w.UpsertAsset(&AssetInput{ID: "pg://db.s.a"}); err != nil {
				return err
			}
			b, err = w.UpsertAsset(&AssetInput{ID: "pg://db.s.b"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		stats, err := g.Write(ctx, func(w *Writer) error {
			if err := w.LinkLater(a, b, SourceDBT); err != nil {
				return err
			}
			if _, err := w.UpsertAssets([]*AssetInput{{ID: "pg://db.s.a", Owner: "team-a"}}); err != nil {
				return err
			}
			return w.LinkLater(a, b, SourceOpenLineage)
		})
		if err != nil {
			t.Fatal(err)
		}
		var sources string
		if err := db.QueryRowContext(ctx, "SELECT sources FROM lineage_edges WHERE from_seq = ? AND to_seq = ?", a, b).Scan(&sources); err != nil {
			t.Fatal(err)
		}
		if sources != "dbt,openlineage" || stats.EdgesCreated != 1 || stats.EdgesUpdated != 1 || stats.AssetsUpdated != 1 {
			t.Fatalf("edge sources %q, stats %+v; want dbt,openlineage, one edge created and updated, one asset updated", sources, stats)
		}
	})
}
