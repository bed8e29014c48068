package lineage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/lineage/graphindex"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// indexView is what an index holds, by asset seq, so two indexes that
// number their nodes differently compare: each asset's kind, flags, owner
// and domain, its rows both ways in order with edge kinds and column
// lineage, and every walk from it both ways (order, distances, parents).
type indexView struct {
	Assets, Edges int
	Nodes         map[int64]string
	Out, In       map[int64][]string
	Down, Up      map[int64][]string
}

func viewOf(t *testing.T, ix *graphindex.Index) indexView {
	t.Helper()
	ctx := context.Background()
	v := indexView{Assets: ix.Assets(), Edges: ix.EdgeCount(), Nodes: map[int64]string{},
		Out: map[int64][]string{}, In: map[int64][]string{}, Down: map[int64][]string{}, Up: map[int64][]string{}}
	str := func(i int32) string {
		if i < 0 {
			return ""
		}
		return ix.Strs[i]
	}
	live := 0
	for n := int32(0); int(n) < ix.Len(); n++ {
		seq := ix.Seq(n)
		if m, ok := ix.Node(seq); !ok || m != n {
			continue // removed, keeping its number until compacted
		}
		live++
		m := ix.MetaOf(n)
		v.Nodes[seq] = fmt.Sprintf("%s %d %s %s", Kinds[m.Kind], m.Flags, str(m.Owner), str(m.Domain))
		outs, ok := ix.Out(n)
		for i, w := range outs {
			v.Out[seq] = append(v.Out[seq], fmt.Sprintf("%d %s %v", ix.Seq(w), EdgeKinds[ok[i]], ix.EdgeColumns(n, w)))
		}
		ins, ik := ix.In(n)
		for i, w := range ins {
			v.In[seq] = append(v.In[seq], fmt.Sprintf("%d %s", ix.Seq(w), EdgeKinds[ik[i]]))
		}
		if len(outs) == 0 && len(ins) == 0 {
			continue // walks nowhere either way; its rows say so
		}
		for _, up := range []bool{false, true} {
			w := ix.BFS(ctx, []int32{n}, up, graphindex.Limits{MaxDepth: 100, MaxNodes: ix.Len()})
			var walk []string
			for p := range w.Order {
				parent := int64(-1)
				if par := w.Parent(int32(p)); par >= 0 {
					parent = ix.Seq(w.Order[par])
				}
				walk = append(walk, fmt.Sprintf("%d@%d<%d", ix.Seq(w.Order[p]), w.Distance(int32(p)), parent))
			}
			if up {
				v.Up[seq] = walk
			} else {
				v.Down[seq] = walk
			}
			ix.Release(w)
		}
	}
	if live != v.Assets {
		t.Fatalf("index counts %d assets but holds %d", v.Assets, live)
	}
	return v
}

func diffViews(got, want indexView) string {
	if reflect.DeepEqual(got, want) {
		return ""
	}
	var b strings.Builder
	if got.Assets != want.Assets || got.Edges != want.Edges {
		fmt.Fprintf(&b, "assets %d edges %d; a fresh load has %d and %d\n", got.Assets, got.Edges, want.Assets, want.Edges)
	}
	for _, part := range []struct {
		name      string
		got, want any
	}{{"assets", got.Nodes, want.Nodes}, {"out rows", got.Out, want.Out}, {"in rows", got.In, want.In},
		{"walks down", got.Down, want.Down}, {"walks up", got.Up, want.Up}} {
		if !reflect.DeepEqual(part.got, part.want) {
			fmt.Fprintf(&b, "%s differ:\n held %.600v\nfresh %.600v\n", part.name, part.got, part.want)
		}
	}
	return b.String()
}

// refreshOp is one kind of random write the refresh test makes.
type refreshOp int

const (
	opEdge       refreshOp = iota // a path between two assets, either possibly new
	opFacts                       // a title or description: nothing the index holds
	opMeta                        // owner, domain, a money tag, a schedule
	opEdgeKind                    // a note overriding an edge's kind
	opColumns                     // column lineage on an edge
	opSQLReads                    // a job's SQL narrowing (or dropping) what it reads
	opMerge                       // two assets found to be one
	opSwap                        // a staged import: the graph swapped whole
	opUnchanged                   // a note the graph already holds
	opOtherDB                     // a table of another database: a partial name two assets may share
	opLegacy                      // a title written as a binary before the log named assets did (facts moved, none named)
	opLegacyEdge                  // the same, then an edge through the Writer before anyone catches up
	opCount
)

// TestHeldIndexRefreshedMatchesFreshLoad applies a random sequence of
// writes from two store handles (two processes) and, after each, checks
// that the indexes each process holds, brought up to date from the change
// log, hold and walk exactly what a fresh load of the store does, and that
// blast radius answers on them equal those of a graph loaded afresh. A
// third holder catches up only every few writes, applying several
// versions at once. Only writes that replace the graph whole (a staged
// import's swap, one write too large to log) may reload a held index; a
// write of facts the index does not hold must leave it as it is.
func TestHeldIndexRefreshedMatchesFreshLoad(t *testing.T) {
	storetest.EachTwice(t, func(t *testing.T, dbA, dbB *store.DB) {
		ctx := context.Background()
		gA, _ := newGraph(t, dbA)
		gB, _ := newGraph(t, dbB)
		lagging, _ := newGraph(t, dbB)
		rng := rand.New(rand.NewPCG(17, 18))
		// The id pool mixes platforms so assets differ in kind (and merges
		// pick survivors by kind); about half the pool exists at any time.
		pool := func() string {
			i := rng.IntN(14)
			switch rng.IntN(4) {
			case 0:
				return fmt.Sprintf("kafka://prod/t%d", i)
			case 1:
				return fmt.Sprintf("flink://job%d", i)
			case 2:
				return fmt.Sprintf("dbt://model.p.m%d", i)
			}
			return fmt.Sprintf("snowflake://db.s.t%d", i)
		}
		note := func(g *Graph, n Note) {
			t.Helper()
			if _, err := g.RecordLineage(ctx, n); err != nil {
				t.Fatalf("%+v: %v", n, err)
			}
		}
		note(gA, Note{Path: []string{pool(), pool()}})
		liveIDs := func() []string {
			var ids []string
			// The assets of the one large write stay out of the picks.
			rows, err := dbA.QueryContext(ctx, "SELECT id FROM lineage_assets WHERE id NOT LIKE '%.bulk.%' ORDER BY seq")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			return ids
		}
		anEdge := func() (string, string, bool) {
			var from, to string
			err := dbA.QueryRowContext(ctx, `SELECT a.id, b.id FROM lineage_edges e JOIN lineage_assets a ON a.seq = e.from_seq
				JOIN lineage_assets b ON b.seq = e.to_seq ORDER BY e.from_seq, e.to_seq LIMIT 1 OFFSET ?`,
				rng.IntN(max(1, lineageCount(t, dbA, "lineage_edges")))).Scan(&from, &to)
			return from, to, err == nil
		}
		// refs are every id the writes may use, live or folded into another,
		// and the bare names several of them share: what each resolves to
		// moves as assets come, merge and share names.
		var refs []string
		for i := 0; i < 14; i++ {
			refs = append(refs, fmt.Sprintf("kafka://prod/t%d", i), fmt.Sprintf("flink://job%d", i), fmt.Sprintf("dbt://model.p.m%d", i),
				fmt.Sprintf("snowflake://db.s.t%d", i), fmt.Sprintf("snowflake://db2.s.t%d", i), fmt.Sprintf("snowflake://db3.s.t%d", i),
				fmt.Sprintf("t%d", i), fmt.Sprintf("m%d", i), fmt.Sprintf("s.t%d", i))
		}
		bigDone, seq := false, 0
		counts := map[refreshOp]int{}
		const steps = 70
		for step := 0; step < steps; step++ {
			g := gA
			if rng.IntN(2) == 1 {
				g = gB
			}
			op := refreshOp(rng.IntN(int(opCount)))
			if step == steps-10 && !bigDone {
				op = -1 // one write too large to log
			}
			ids := liveIDs()
			pick := func() string { return ids[rng.IntN(len(ids))] }
			whole := false
			switch op {
			case -1:
				bigDone, whole = true, true
				var ins []*AssetInput
				for i := 0; i <= maxLoggedChanges; i++ {
					ins = append(ins, &AssetInput{ID: fmt.Sprintf("snowflake://db.bulk.t%d_%d", step, i), Source: SourceNote})
				}
				if _, err := g.Write(ctx, func(w *Writer) error { _, err := w.UpsertAssets(ins); return err }); err != nil {
					t.Fatal(err)
				}
			case opEdge:
				a, b := pool(), pool()
				if rng.IntN(2) == 0 {
					a = pick()
				}
				if a != b {
					note(g, Note{Path: []string{a, b}})
				}
			case opFacts:
				note(g, Note{Assets: []NoteAsset{{ID: pick(), Title: fmt.Sprintf("title %d", step), Description: fmt.Sprintf("step %d", step)}}})
			case opMeta:
				a := NoteAsset{ID: pick(), Owner: fmt.Sprintf("team-%d", rng.IntN(3)), Domain: fmt.Sprintf("d%d", rng.IntN(2))}
				switch rng.IntN(3) {
				case 0:
					a.Tags = []string{"money"}
				case 1:
					a.RemoveTags = []string{"money"}
				default:
					a.Schedule = &Schedule{Cron: "0 * * * *"}
				}
				note(g, Note{Assets: []NoteAsset{a}})
			case opEdgeKind:
				if from, to, ok := anEdge(); ok {
					note(g, Note{Edges: []NoteEdge{{From: from, To: to, Kind: string(EdgeKinds[rng.IntN(len(EdgeKinds))])}}})
				}
			case opColumns:
				if from, to, ok := anEdge(); ok {
					cols := []ColumnMapping{{From: "a", To: "b"}}
					if rng.IntN(2) == 0 {
						cols = append(cols, ColumnMapping{From: "b", To: "*"})
					}
					note(g, Note{Assets: []NoteAsset{{ID: from, Columns: []Column{{Name: "a"}, {Name: "b"}}}},
						Edges: []NoteEdge{{From: from, To: to, Columns: cols}}})
				}
			case opSQLReads:
				// The job reads a, or (SQL naming neither column) nothing of
				// its input: the note's earlier column lineage is dropped.
				if from, to, ok := anEdge(); ok {
					sql := "select a from x"
					if rng.IntN(2) == 0 {
						sql = "select 1"
					}
					note(g, Note{Assets: []NoteAsset{{ID: from, Columns: []Column{{Name: "a"}, {Name: "b"}}}, {ID: to, SQL: sql}}})
				}
			case opMerge:
				if x, y := pick(), pick(); x != y {
					note(g, Note{Assets: []NoteAsset{{ID: x, Aliases: []string{y}}}})
				}
			case opSwap:
				seq++
				id := fmt.Sprintf("kafka://prod/swapped%d", seq)
				stats, err := g.WriteBulk(ctx, stageMinRows, func(w *Writer) error {
					s, err := w.UpsertAsset(&AssetInput{ID: id, Source: SourceNote})
					if err != nil {
						return err
					}
					o, err := w.UpsertAsset(&AssetInput{ID: pick(), Source: SourceNote})
					if err != nil {
						return err
					}
					return w.LinkLater(s, o, SourceNote)
				}, BulkOptions{})
				if err != nil {
					t.Fatal(err)
				}
				whole = !stats.Unchanged
			case opUnchanged:
				if from, to, ok := anEdge(); ok {
					note(g, Note{Path: []string{from, to}})
				}
			case opOtherDB:
				note(g, Note{Path: []string{fmt.Sprintf("snowflake://db%d.s.t%d", 2+rng.IntN(2), rng.IntN(14)), pick()}})
			case opLegacy, opLegacyEdge:
				rawTitle(t, g.db, pick(), fmt.Sprintf("legacy %d", step), nil)
				if op == opLegacyEdge {
					if a, b := pick(), pool(); a != b {
						note(g, Note{Path: []string{a, b}})
					}
				}
			}
			counts[op]++

			fresh, err := ReadIndex(ctx, dbA)
			if err != nil {
				t.Fatal(err)
			}
			want := viewOf(t, fresh)
			holders := []*Graph{gA, gB}
			if step%4 == 3 || step == steps-1 {
				holders = append(holders, lagging)
			}
			for _, h := range holders {
				before := h.IndexStats()
				ix, err := h.Index(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if ix.Version != fresh.Version || ix.Topology != fresh.Topology {
					t.Fatalf("step %d (op %d): held index at version %d/%d, the store at %d/%d", step, op, ix.Version, ix.Topology, fresh.Version, fresh.Topology)
				}
				if d := diffViews(viewOf(t, ix), want); d != "" {
					t.Fatalf("step %d (op %d): the held index differs from a fresh load:\n%s", step, op, d)
				}
				// What Apply lays out once its overlay is large, on every
				// step's overlay here.
				if d := diffViews(viewOf(t, ix.Compact()), want); d != "" {
					t.Fatalf("step %d (op %d): the held index compacted differs from a fresh load:\n%s", step, op, d)
				}
				after := h.IndexStats()
				if before.Loads > 0 && h != lagging && after.Loads != before.Loads && !whole {
					t.Fatalf("step %d (op %d): the held index was loaded again (%+v -> %+v); only a whole-graph write may do that", step, op, before, after)
				}
				// A write naming the assets whose facts it changed keeps
				// the names read for answers (compareBlast below checks
				// they are still right); one that does not name them
				// leaves the index and drops them.
				if h != lagging && before.Loads > 0 {
					switch op {
					case opFacts:
						if after.Relabeled != before.Relabeled+1 || after.Applied != before.Applied {
							t.Fatalf("step %d: a write of facts the index does not hold changed it (%+v -> %+v)", step, before, after)
						}
					case opMeta:
						if after.Applied != before.Applied+1 || after.NamesKept != before.NamesKept+1 {
							t.Fatalf("step %d (op %d): %+v -> %+v, want the log applied and the names kept", step, op, before, after)
						}
					case opLegacy:
						if after.Relabeled != before.Relabeled+1 || after.Applied != before.Applied || after.NamesKept != before.NamesKept {
							t.Fatalf("step %d: a facts write naming no asset: %+v -> %+v, want the index relabelled and the names dropped", step, before, after)
						}
					case opLegacyEdge:
						if after.NamesKept != before.NamesKept {
							t.Fatalf("step %d: a facts write naming no asset, then an edge: %+v -> %+v, want the names dropped", step, before, after)
						}
					}
				}
			}
			compareBlast(t, gA, New(dbA, gA.clock), liveIDs())
			compareBlast(t, gB, New(dbA, gB.clock), liveIDs())
			// A third of them a step, in turn, until the large write
			// (past it, a reference that resolves to nothing asks for
			// suggestions among its 10,000 names).
			var some []string
			for i, ref := range refs {
				if (i+step)%3 == 0 && !bigDone {
					some = append(some, ref)
				}
			}
			compareRefs(t, gA, New(dbA, gA.clock), some)
			compareRefs(t, gB, New(dbA, gB.clock), some)
		}
		for _, h := range []*Graph{gA, gB} {
			st := h.IndexStats()
			if st.Applied < steps/3 || st.Relabeled == 0 || st.NamesKept < steps/4 {
				t.Errorf("held index kept current %+v over %d writes %v: expected most by the log", st, steps, counts)
			}
		}
		t.Logf("ops %v; holders %+v %+v %+v", counts, gA.IndexStats(), gB.IndexStats(), lagging.IndexStats())
	})
}

// compareBlast checks that blast radius answers on the held graph equal
// those of a graph loaded afresh, names and paths included, and so do the
// names a walk each way gives every asset (a held graph keeps the names it
// read across writes, less those of the assets the writes changed).
func compareBlast(t *testing.T, held, fresh *Graph, ids []string) {
	t.Helper()
	ctx := context.Background()
	for _, up := range []bool{false, true} {
		a, errA := held.hops(ctx, ids, MaxWalkDepth, up)
		b, errB := fresh.hops(ctx, ids, MaxWalkDepth, up)
		if errA != nil || errB != nil {
			t.Fatalf("walk (up %v): held %v, fresh %v", up, errA, errB)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("walk (up %v) from every asset differs:\n held %v\nfresh %v", up, a, b)
		}
	}
	for _, id := range ids {
		for _, cols := range [][]string{nil, {"a"}} {
			sameBlast(t, held, fresh, BlastParams{Asset: id, Columns: cols})
		}
	}
}

// sameBlast checks that a blast radius gives the held graph and a fresh
// one the same answer (bar the load time and the summary that reports
// it), or both a refusal.
func sameBlast(t *testing.T, held, fresh *Graph, p BlastParams) {
	t.Helper()
	ctx := context.Background()
	a, errA := held.BlastRadius(ctx, p)
	b, errB := fresh.BlastRadius(ctx, p)
	if (errA == nil) != (errB == nil) {
		t.Fatalf("blast radius of %s %v: held %v, fresh %v", p.Asset, p.Columns, errA, errB)
	}
	if errA != nil {
		return
	}
	a.IndexLoadMS, b.IndexLoadMS, a.Summary, b.Summary = 0, 0, "", ""
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("blast radius of %s %v differs:\n held %s\nfresh %s", p.Asset, p.Columns, ja, jb)
	}
}

// compareRefs checks that a blast radius from each reference (an id, a
// folded id, a bare name) gives the held graph and a fresh one the same
// answer, or both a refusal.
func compareRefs(t *testing.T, held, fresh *Graph, refs []string) {
	t.Helper()
	for _, ref := range refs {
		sameBlast(t, held, fresh, BlastParams{Asset: ref})
	}
}

func lineageCount(t *testing.T, db *store.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestIndexLogBounded: the log keeps at most logMaxRows rows, pruned
// whole versions at a time from its oldest end with the floor moved past
// them; a holder older than the floor loads the index again, one newer
// applies what is left.
func TestIndexLogBounded(t *testing.T) {
	storetest.EachTwice(t, func(t *testing.T, dbA, dbB *store.DB) {
		ctx := context.Background()
		writer, _ := newGraph(t, dbA)
		behind, _ := newGraph(t, dbB)
		recent, _ := newGraph(t, dbB)
		if _, err := behind.Index(ctx); err != nil {
			t.Fatal(err)
		}
		batch := func(b int) {
			t.Helper()
			var ins []*AssetInput
			for i := 0; i < maxLoggedChanges; i++ {
				ins = append(ins, &AssetInput{ID: fmt.Sprintf("kafka://prod/b%d_%d", b, i)})
			}
			if _, err := writer.Write(ctx, func(w *Writer) error { _, err := w.UpsertAssets(ins); return err }); err != nil {
				t.Fatal(err)
			}
		}
		batch(0)
		batch(1)
		if _, err := recent.Index(ctx); err != nil {
			t.Fatal(err)
		}
		// Past logMaxRows: the oldest versions go, and the floor moves to
		// the newest removed, the batch the recent holder has seen.
		if _, err := writer.RecordLineage(ctx, Note{Path: []string{"kafka://prod/new", "flink://new"}}); err != nil {
			t.Fatal(err)
		}
		var floor, logged, stored int64
		if err := dbA.QueryRowContext(ctx, "SELECT log_floor, log_rows FROM lineage_version WHERE id = 1").Scan(&floor, &logged); err != nil {
			t.Fatal(err)
		}
		stored = int64(lineageCount(t, dbA, "lineage_index_log"))
		if stored > logMaxRows || logged != stored || floor == 0 {
			t.Fatalf("log holds %d rows (counted %d) with floor %d; want at most %d, counted right, the floor moved", stored, logged, floor, logMaxRows)
		}
		var oldest int64
		if err := dbA.QueryRowContext(ctx, "SELECT MIN(version) FROM lineage_index_log").Scan(&oldest); err != nil {
			t.Fatal(err)
		}
		if oldest <= floor {
			t.Fatalf("log holds version %d at or below its floor %d", oldest, floor)
		}
		for _, h := range []*Graph{behind, recent} {
			before := h.IndexStats()
			ix, err := h.Index(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ix.Assets() != 2*maxLoggedChanges+2 || ix.EdgeCount() != 1 {
				t.Fatalf("held index has %d assets and %d edges, want %d and 1", ix.Assets(), ix.EdgeCount(), 2*maxLoggedChanges+2)
			}
			after := h.IndexStats()
			if h == behind && after.Loads != before.Loads+1 {
				t.Errorf("a holder behind the floor: %+v -> %+v, want one load", before, after)
			}
			if h == recent && (after.Loads != before.Loads || after.Applied != before.Applied+1) {
				t.Errorf("a holder after the floor: %+v -> %+v, want the log applied", before, after)
			}
		}
	})
}

// TestKeptNamesRightUnderConcurrentCalls has one process rename assets,
// give them names another already has and link them, while another
// answers blast radius and walks from every asset on several goroutines
// at once, each call catching up with whatever was written by then; once
// the writes stop, every answer of the held graph equals a fresh one's.
// Calls still on an older index share the table the newer one kept, and
// references resolved during a write must not survive into the answers
// after it.
func TestKeptNamesRightUnderConcurrentCalls(t *testing.T) {
	storetest.EachTwice(t, func(t *testing.T, dbA, dbB *store.DB) {
		ctx := context.Background()
		held, _ := newGraph(t, dbA)
		writer, _ := newGraph(t, dbB)
		var ids, refs []string
		for i := 0; i < 12; i++ {
			ids = append(ids, fmt.Sprintf("snowflake://db.s.t%d", i))
			refs = append(refs, fmt.Sprintf("t%d", i), fmt.Sprintf("s.t%d", i), fmt.Sprintf("snowflake://db2.s.t%d", i))
		}
		for i := 1; i < len(ids); i++ {
			if _, err := writer.RecordLineage(ctx, Note{Path: []string{ids[i/2], ids[i]}}); err != nil {
				t.Fatal(err)
			}
		}
		rng := rand.New(rand.NewPCG(5, 6))
		var writes []Note
		for step := 0; step < 40; step++ {
			a, b := ids[rng.IntN(len(ids))], ids[rng.IntN(len(ids))]
			switch rng.IntN(3) {
			case 0:
				writes = append(writes, Note{Assets: []NoteAsset{{ID: a, Title: fmt.Sprintf("title %d", step), Owner: fmt.Sprintf("team-%d", step%3)}}})
			case 1:
				writes = append(writes, Note{Path: []string{fmt.Sprintf("snowflake://db2.s.t%d", rng.IntN(len(ids))), a}})
			default:
				if a != b {
					writes = append(writes, Note{Path: []string{a, b}})
				}
			}
		}
		done := make(chan struct{})
		errs := make(chan error, 8)
		var wg sync.WaitGroup
		for r := 0; r < 4; r++ {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				for k := r; ; k++ {
					select {
					case <-done:
						return
					default:
					}
					ref := append(ids, refs...)[k%(len(ids)+len(refs))]
					if _, err := held.BlastRadius(ctx, BlastParams{Asset: ref}); err != nil && !errors.Is(err, ErrUnknownAsset) {
						errs <- err
						return
					}
					if _, err := held.Downstream(ctx, ids, MaxWalkDepth); err != nil {
						errs <- err
						return
					}
				}
			}(r)
		}
		for _, n := range writes {
			if _, err := writer.RecordLineage(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		close(done)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		var live []string
		rows, err := dbA.QueryContext(ctx, "SELECT id FROM lineage_assets ORDER BY seq")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			live = append(live, id)
		}
		rows.Close()
		compareBlast(t, held, New(dbA, held.clock), live)
		compareRefs(t, held, New(dbA, held.clock), append(ids, refs...))
		if st := held.IndexStats(); st.NamesKept == 0 {
			t.Errorf("the held graph never kept its names across a write: %+v", st)
		}
	})
}

// pairOfProcesses is a writer and a holder on two handles of one store
// (two processes), with five topics each feeding a job.
func pairOfProcesses(t *testing.T, dbA, dbB *store.DB) (writer, held *Graph) {
	t.Helper()
	writer, _ = newGraph(t, dbA)
	held, _ = newGraph(t, dbB)
	for i := 0; i < 5; i++ {
		if _, err := writer.RecordLineage(context.Background(), Note{Path: []string{fmt.Sprintf("kafka://prod/t%d", i), fmt.Sprintf("flink://j%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	return writer, held
}

// TestCallThatWaitedForARefreshKeepsTheIndex: a call reads the versions,
// another process writes an edge, and another call brings the held index
// up to that write while the first waits for the graph's lock. The first
// then finds the index ahead of what it read; it must take it, not load
// the whole index again (found by a review: it did, for any write racing
// a call).
func TestCallThatWaitedForARefreshKeepsTheIndex(t *testing.T) {
	storetest.EachTwice(t, func(t *testing.T, dbA, dbB *store.DB) {
		ctx := context.Background()
		writer, held := pairOfProcesses(t, dbA, dbB)
		if _, err := held.Index(ctx); err != nil {
			t.Fatal(err)
		}
		before := held.IndexStats()
		held.mu.Lock()
		done := make(chan error, 1)
		go func() {
			// Reads the versions now, before the write, then waits for
			// the lock.
			_, err := held.Index(ctx)
			done <- err
		}()
		// Time for it to read them (were it slower, the test would pass
		// without testing anything, never fail).
		time.Sleep(300 * time.Millisecond)
		if _, err := writer.RecordLineage(ctx, Note{Path: []string{"kafka://prod/t1", "flink://j3"}}); err != nil {
			held.mu.Unlock()
			t.Fatal(err)
		}
		v, err := readVersions(ctx, held.db)
		if err == nil {
			var next *graphindex.Index
			if next, err = held.refresh(ctx, held.idx, v); err == nil {
				held.idx, held.facts = next, v.facts
			}
		}
		held.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if after := held.IndexStats(); after.Loads != before.Loads {
			t.Fatalf("a call that waited for another's refresh loaded the whole index again: %+v -> %+v", before, after)
		}
	})
}

// TestRefreshDoesNotWaitForANameLoad: a call on the held index reading
// names from the store holds the table's lock for as long as its reads
// take (seconds, for a walk over a large graph). After another process's
// write, the next call's refresh runs under the graph's lock: it must not
// wait for the table's there, or every call would queue behind the name
// load (adopted from a review: it did).
func TestRefreshDoesNotWaitForANameLoad(t *testing.T) {
	storetest.EachTwice(t, func(t *testing.T, dbA, dbB *store.DB) {
		ctx := context.Background()
		writer, held := pairOfProcesses(t, dbA, dbB)
		idx, err := held.Index(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, write := range []Note{
			{Path: []string{"kafka://prod/t1", "flink://j3"}},  // edges only
			{Path: []string{"kafka://prod/new", "flink://j3"}}, // an edge and a new asset's names
		} {
			if _, err := writer.RecordLineage(ctx, write); err != nil {
				t.Fatal(err)
			}
			tab := tableOf(idx)
			tab.mu.Lock() // a call on the held index, reading names
			done := make(chan error, 1)
			go func() {
				_, err := held.Index(ctx)
				done <- err
			}()
			select {
			case err = <-done:
				tab.mu.Unlock()
			case <-time.After(10 * time.Second):
				tab.mu.Unlock()
				<-done
				t.Fatalf("after %+v: bringing the index up to date waited for another call's name load", write)
			}
			if err != nil {
				t.Fatal(err)
			}
			if idx, err = held.Index(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if st := held.IndexStats(); st.Loads != 1 || st.NamesKept != 2 {
			t.Fatalf("%+v: want one load, and the names kept across both writes", st)
		}
	})
}

// TestLargeFactsWritesKeepTheIndex: writes of thousands of titles with
// an edge each log one Facts row naming all their assets, so they neither
// pass the changes a holder applies before it would rather load the index
// (an eighth of the graph) nor prune the log past a holder that made no
// call between them (adopted from a review: with a row per asset, both
// loaded the index again); and a holder that missed more title-only
// writes than its budget relabels its index (those log nothing), where
// logging them would have made it load the index whole (another review).
func TestLargeFactsWritesKeepTheIndex(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		n, per, writes int
	}{{10_000, 6_000, 1}, {60_000, 9_000, 3}} {
		db := storetest.SQLite(t)
		if err := lineagetest.NewGraph(c.n).Load(ctx, db); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO lineage_aliases (alias, asset_seq, weak) SELECT id, seq, 0 FROM lineage_assets"); err != nil {
			t.Fatal(err)
		}
		held, _ := newGraph(t, db)
		writer, _ := newGraph(t, db)
		if _, err := held.BlastRadius(ctx, BlastParams{Asset: "bench://a1"}); err != nil {
			t.Fatal(err)
		}
		before := held.IndexStats()
		for k := 0; k < c.writes; k++ {
			var ins []*AssetInput
			for i := 1 + k*c.per; i < 1+(k+1)*c.per; i++ {
				ins = append(ins, &AssetInput{ID: fmt.Sprintf("bench://a%d", i), Title: fmt.Sprintf("title %d", k), Source: SourceNote})
			}
			if _, err := writer.Write(ctx, func(w *Writer) error {
				seqs, err := w.UpsertAssets(ins)
				if err != nil {
					return err
				}
				return w.Link(seqs[0], seqs[len(seqs)-1], EdgeFeeds, SourceNote, nil, false)
			}); err != nil {
				t.Fatal(err)
			}
		}
		compareBlast(t, held, New(db, held.clock), []string{"bench://a1", fmt.Sprintf("bench://a%d", c.per/2)})
		if after := held.IndexStats(); after.Loads != before.Loads || after.NamesKept != before.NamesKept+1 {
			t.Fatalf("%d assets, %d writes of %d titles and an edge: %+v -> %+v, want the log applied once and the names kept", c.n, c.writes, c.per, before, after)
		}
	}

	db := storetest.SQLite(t)
	g, _ := newGraph(t, db)
	var path []string
	for i := 0; i < 4000; i++ {
		path = append(path, fmt.Sprintf("kafka://prod/t%d", i))
	}
	if _, err := g.RecordLineage(ctx, Note{Path: path}); err != nil {
		t.Fatal(err)
	}
	held, _ := newGraph(t, db)
	if _, err := held.Index(ctx); err != nil {
		t.Fatal(err)
	}
	before := held.IndexStats()
	// Past the budget of a graph this size (1,024 changes).
	for i := 0; i < 1100; i++ {
		if _, err := g.RecordLineage(ctx, Note{Assets: []NoteAsset{{ID: path[i], Title: fmt.Sprintf("title %d", i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	compareBlast(t, held, New(db, held.clock), path[:3])
	if after := held.IndexStats(); after.Loads != before.Loads || after.Relabeled != before.Relabeled+1 {
		t.Fatalf("a holder behind 1,100 title writes: %+v -> %+v, want its index relabelled", before, after)
	}
}

// TestQueuedDropsBounded: writes that keep coming while no call reads
// names queue their drops; past what the table may hold, the queue
// becomes one drop of everything instead of growing with every write,
// and the next reader finds the table empty.
func TestQueuedDropsBounded(t *testing.T) {
	from := graphindex.FromEdges(4, []int32{0, 1}, []int32{1, 2}, []uint8{0, 0})
	to := from.Apply(2, 2, nil, indexCodes)
	tab := tableOf(from)
	tab.lock()
	tab.ids[0], tab.ids[3] = "kept? no", "kept? no"
	tab.rows[4] = &assetRow{ID: "x"}
	tab.refs["x"] = resolved{}
	gen := tab.gen
	tab.mu.Unlock()
	seqs := make([]int64, maxCached/2)
	for i := range seqs {
		seqs[i] = int64(i) + 100
	}
	for k := 0; k < 3; k++ {
		carryTable(from, to, []graphindex.Change{{Op: graphindex.Facts, Seqs: seqs}}, true)
	}
	tab.queue.Lock()
	queued, all := len(tab.dropNodes)+len(tab.dropSeqs), tab.dropAll
	tab.queue.Unlock()
	if !all || queued > maxCached {
		t.Fatalf("after three carries of %d seqs: %d queued, drop all %v", len(seqs), queued, all)
	}
	if tableOf(to) != tab {
		t.Fatal("the carried index has a table of its own")
	}
	tab.lock()
	defer tab.mu.Unlock()
	if len(tab.ids)+len(tab.rows)+len(tab.refs) != 0 || tab.gen == gen {
		t.Fatalf("after the queue overflowed, the next reader found %d ids, %d rows, %d refs (gen %d -> %d)", len(tab.ids), len(tab.rows), len(tab.refs), gen, tab.gen)
	}
}
