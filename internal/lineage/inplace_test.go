package lineage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestInPlaceGivesWayWhole: an import in place that writes more rows than
// it may is rolled back whole (every asset, name, edge and seen time as it
// was, the version unmoved) and says so with errInPlaceFull, whatever the
// import's own code made of the error; the same import staged then leaves
// the store as one transaction does.
func TestInPlaceGivesWayWhole(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		bw := newBatchWorld(21, 200)
		g, c := bw.catalog(t, db)
		c.Advance(time.Hour)
		before, seenBefore := lineagetest.GraphDump(t, db), seenDump(t, db)
		v0, _, err := GraphVersion(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		var logged []string
		reimport := bw.reimport(true, &logged)
		// The import's code hides the error in its own words.
		hidden := func(w *Writer) error {
			if err := reimport(w); err != nil {
				return fmt.Errorf("import failed: %v", err)
			}
			return nil
		}
		for _, fn := range []func(w *Writer) error{reimport, hidden} {
			if _, err := g.writeInPlace(ctx, fn, nil, 5); !errors.Is(err, errInPlaceFull) {
				t.Fatalf("in place with room for 5 rows: %v, want errInPlaceFull", err)
			}
			v, _, err := GraphVersion(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			if got := lineagetest.GraphDump(t, db); !slices.Equal(got, before) || v != v0 {
				t.Fatalf("the rolled-back import changed the graph (version %d, was %d)\nnow: %q\nwas: %q", v, v0, got, before)
			}
			if got := seenDump(t, db); !slices.Equal(got, seenBefore) {
				t.Fatalf("the rolled-back import moved seen times\nnow: %q\nwas: %q", got, seenBefore)
			}
		}
		if _, err := g.writeStaged(ctx, reimport, nil); err != nil {
			t.Fatal(err)
		}
		one := otherStore(t, db)
		bw.build(t, one, false, oneTx)
		sameStore(t, db, one, "staged after the attempt in place")
	})
}

// sameStore fails t unless got holds what want does: every asset, name,
// edge and column mapping, and every first- and last-seen time.
func sameStore(t *testing.T, got, want *store.DB, what string) {
	t.Helper()
	if g, w := lineagetest.GraphDump(t, got), lineagetest.GraphDump(t, want); !slices.Equal(g, w) {
		t.Fatalf("%s: the graphs differ\ngot:  %q\nwant: %q", what, g, w)
	}
	if g, w := seenDump(t, got), seenDump(t, want); !slices.Equal(g, w) {
		t.Fatalf("%s: the seen times differ\ngot:  %q\nwant: %q", what, g, w)
	}
}

// TestInPlaceKeepsLaterSeenTimes: the last-seen times of what an import in
// place restated move to the import's time after its commit, except where
// another writer moved them further meanwhile; the import counts as
// unchanged and leaves the graph's version where it was.
func TestInPlaceKeepsLaterSeenTimes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		c := clock.NewFake(lineagetest.StoryTime)
		g := New(db, c)
		ids := []string{"pg://db.s.a", "pg://db.s.b", "pg://db.s.c"}
		var seqs []int64
		if _, err := g.Write(ctx, func(w *Writer) error {
			var err error
			if seqs, err = w.UpsertAssets([]*AssetInput{{ID: ids[0]}, {ID: ids[1]}, {ID: ids[2]}}); err != nil {
				return err
			}
			if err := w.LinkLater(seqs[0], seqs[1], SourceDBT); err != nil {
				return err
			}
			return w.LinkLater(seqs[1], seqs[2], SourceDBT)
		}); err != nil {
			t.Fatal(err)
		}
		v0, _, err := GraphVersion(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		later := store.Millis(lineagetest.StoryTime.Add(10 * time.Hour))
		if _, err := db.ExecContext(ctx, "UPDATE lineage_assets SET last_seen_ms = ? WHERE seq = ?", later, seqs[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "UPDATE lineage_edges SET last_seen_ms = ? WHERE from_seq = ?", later, seqs[0]); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Hour)
		stats, err := g.writeInPlace(ctx, func(w *Writer) error {
			got, err := w.UpsertAssets([]*AssetInput{{ID: ids[0]}, {ID: ids[1]}, {ID: ids[2]}})
			if err != nil {
				return err
			}
			if err := w.LinkLater(got[0], got[1], SourceDBT); err != nil {
				return err
			}
			return w.LinkLater(got[1], got[2], SourceDBT)
		}, nil, stageBatchRows)
		if err != nil {
			t.Fatal(err)
		}
		if !stats.Unchanged || stats.GraphVersion != v0 {
			t.Fatalf("a re-import restating everything: %+v, want unchanged at version %d", stats, v0)
		}
		now := store.Millis(lineagetest.StoryTime.Add(time.Hour))
		want := map[string]int64{ids[0]: later, ids[1]: now, ids[2]: now, ids[0] + " " + ids[1]: later, ids[1] + " " + ids[2]: now}
		got := map[string]int64{}
		for _, q := range []string{
			"SELECT id, last_seen_ms FROM lineage_assets",
			`SELECT f.id || ' ' || t.id, e.last_seen_ms FROM lineage_edges e
				JOIN lineage_assets f ON f.seq = e.from_seq JOIN lineage_assets t ON t.seq = e.to_seq`,
		} {
			rows, err := db.QueryContext(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var k string
				var last int64
				if err := rows.Scan(&k, &last); err != nil {
					t.Fatal(err)
				}
				got[k] = last
			}
			rows.Close()
		}
		if len(got) != len(want) {
			t.Fatalf("last seen %v, want %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s last seen %d, want %d", k, got[k], v)
			}
		}
	})
}

// TestInPlaceCountsWhatItWrites: an import in place counts the rows it
// writes (assets whose facts changed, edges that gained a source, new
// ones) and not those it merely restates, so it gives way to staging at
// exactly one row past its room.
func TestInPlaceCountsWhatItWrites(t *testing.T) {
	const n = 50
	cases := []struct {
		name        string
		owner       string // the re-import's owner for every asset
		src         Source // and source for every edge
		room        int
		wantGivesUp bool
	}{
		{"restated only", "", SourceDBT, 0, false},
		{"owners changed, one short", "team-b", SourceDBT, n - 1, true},
		{"owners changed, room enough", "team-b", SourceDBT, n, false},
		{"edges from another source, one short", "", SourceOpenLineage, n - 1, true},
		{"edges from another source, room enough", "", SourceOpenLineage, n, false},
		{"both, room for one kind", "team-b", SourceOpenLineage, n, true},
		{"both, room for both", "team-b", SourceOpenLineage, 2 * n, false},
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		for i, tc := range cases {
			g := New(db, clock.NewFake(lineagetest.StoryTime.Add(time.Duration(i)*time.Hour)))
			ins := func(owner string) []*AssetInput {
				var out []*AssetInput
				for k := range n + 1 {
					out = append(out, &AssetInput{ID: fmt.Sprintf("pg://db.s%d.t%d", i, k), Owner: owner})
				}
				return out
			}
			chain := func(owner string, src Source) func(w *Writer) error {
				return func(w *Writer) error {
					seqs, err := w.UpsertAssets(ins(owner))
					if err != nil {
						return err
					}
					for k := range n {
						if err := w.LinkLater(seqs[k], seqs[k+1], src); err != nil {
							return err
						}
					}
					return nil
				}
			}
			if _, err := g.Write(ctx, chain("", SourceDBT)); err != nil {
				t.Fatal(err)
			}
			// The owner change also touches the first asset: n+1 assets
			// changed, n edges; leave the first asset as it was.
			fn := func(w *Writer) error {
				in := ins(tc.owner)
				in[0].Owner = ""
				seqs, err := w.UpsertAssets(in)
				if err != nil {
					return err
				}
				for k := range n {
					if err := w.LinkLater(seqs[k], seqs[k+1], tc.src); err != nil {
						return err
					}
				}
				return nil
			}
			_, err := g.writeInPlace(ctx, fn, nil, tc.room)
			if gaveUp := errors.Is(err, errInPlaceFull); gaveUp != tc.wantGivesUp || (err != nil && !gaveUp) {
				t.Errorf("%s: room for %d rows: %v, want giving up %v", tc.name, tc.room, err, tc.wantGivesUp)
			}
		}
	})
}

// otherStore is a fresh store on db's engine.
func otherStore(t *testing.T, db *store.DB) *store.DB {
	t.Helper()
	if db.Dialect() == store.Postgres {
		return storetest.Postgres(t)
	}
	return storetest.SQLite(t)
}

// TestInPlaceMergeCarriesMovedEdgeTimes: an edge an import in place
// restates (its time deferred) and then re-points by merging its asset
// into another reaches the kept asset with the import's time, as in one
// transaction, where the time moved before the merge copied it.
func TestInPlaceMergeCarriesMovedEdgeTimes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		ids := []string{"pg://db.s.b", "pg://db.s.a", "pg://db.s.c"}
		run := func(db *store.DB, how writeMode) []string {
			c := clock.NewFake(lineagetest.StoryTime)
			g := New(db, c)
			if _, err := g.Write(ctx, func(w *Writer) error {
				var seqs []int64
				for _, id := range ids { // b first: the lowest seq, the one kept
					s, err := w.UpsertAsset(&AssetInput{ID: id})
					if err != nil {
						return err
					}
					seqs = append(seqs, s)
				}
				return w.Link(seqs[1], seqs[2], "", SourceDBT, nil, false)
			}); err != nil {
				t.Fatal(err)
			}
			c.Advance(time.Hour)
			fn := func(w *Writer) error {
				got, err := w.UpsertAssets([]*AssetInput{{ID: ids[1]}, {ID: ids[2]}})
				if err != nil {
					return err
				}
				if err := w.LinkLater(got[0], got[1], SourceDBT); err != nil {
					return err
				}
				// b is a too: a merges into b, and a -> c becomes b -> c.
				_, err = w.UpsertAsset(&AssetInput{ID: ids[0], Names: []string{ids[1]}})
				return err
			}
			var err error
			if how == inPlaceMode {
				_, err = g.writeInPlace(ctx, fn, nil, stageBatchRows)
			} else {
				_, err = g.Write(ctx, fn)
			}
			if err != nil {
				t.Fatal(err)
			}
			return seenDump(t, db)
		}
		want := run(otherStore(t, db), oneTx)
		if got := run(db, inPlaceMode); !slices.Equal(got, want) {
			t.Fatalf("seen times differ\nin place:        %q\none transaction: %q", got, want)
		}
	})
}

// TestInPlaceCountsMergesAndLinks: what a merge re-points (edges, names)
// and what the one-by-one calls write (UpsertAsset, Link with column
// lineage) count against an import in place's room like any other row.
func TestInPlaceCountsMergesAndLinks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		c := clock.NewFake(lineagetest.StoryTime)
		g := New(db, c)
		const n, k = 10, 30
		if _, err := g.Write(ctx, func(w *Writer) error {
			var ins []*AssetInput
			for i := range n {
				ins = append(ins, &AssetInput{ID: fmt.Sprintf("pg://db.s.t%d", i)}, &AssetInput{ID: fmt.Sprintf("dbt://model.p.m%d", i), Kind: KindDBTModel})
				for j := range k {
					ins = append(ins, &AssetInput{ID: fmt.Sprintf("pg://db.s.x%d_%d", i, j)})
				}
			}
			seqs, err := w.UpsertAssets(ins)
			if err != nil {
				return err
			}
			for i := range n {
				for j := range k {
					if err := w.LinkLater(seqs[i*(k+2)], seqs[i*(k+2)+2+j], SourceOpenLineage); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Hour)
		// n merges, each re-pointing k edges: hundreds of rows.
		merges := func(w *Writer) error {
			var ins []*AssetInput
			for i := range n {
				ins = append(ins, &AssetInput{ID: fmt.Sprintf("dbt://model.p.m%d", i), Kind: KindDBTModel, Names: []string{fmt.Sprintf("pg://db.s.t%d", i)}})
			}
			_, err := w.UpsertAssets(ins)
			return err
		}
		links := func(w *Writer) error {
			var prev int64
			for i := range 50 {
				s, err := w.UpsertAsset(&AssetInput{ID: fmt.Sprintf("pg://db.s.u%d", i)})
				if err != nil {
					return err
				}
				if prev != 0 {
					if err := w.Link(prev, s, "", SourceDBT, []ColumnMapping{{From: "a", To: "b"}}, false); err != nil {
						return err
					}
				}
				prev = s
			}
			return nil
		}
		before := lineagetest.GraphDump(t, db)
		for name, fn := range map[string]func(w *Writer) error{"merges": merges, "links": links} {
			if _, err := g.writeInPlace(ctx, fn, nil, 2*n); !errors.Is(err, errInPlaceFull) {
				t.Errorf("%s with room for %d rows: %v, want errInPlaceFull", name, 2*n, err)
			}
			if got := lineagetest.GraphDump(t, db); !slices.Equal(got, before) {
				t.Fatalf("%s: the rolled-back import changed the graph", name)
			}
		}
	})
}

// TestInPlaceSwallowedErrorRollsBack: an import whose code drops the
// error of passing its room still rolls back whole.
func TestInPlaceSwallowedErrorRollsBack(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		bw := newBatchWorld(21, 200)
		g, c := bw.catalog(t, db)
		c.Advance(time.Hour)
		before, seenBefore := lineagetest.GraphDump(t, db), seenDump(t, db)
		var logged []string
		reimport := bw.reimport(true, &logged)
		swallow := func(w *Writer) error {
			_ = reimport(w) // say, a caller that logs it as a warning
			return nil
		}
		if _, err := g.writeInPlace(ctx, swallow, nil, 5); !errors.Is(err, errInPlaceFull) {
			t.Fatalf("in place with room for 5 rows, error swallowed: %v, want errInPlaceFull", err)
		}
		if got := lineagetest.GraphDump(t, db); !slices.Equal(got, before) {
			t.Fatalf("the import committed though it passed its room\nnow: %q\nwas: %q", got, before)
		}
		if got := seenDump(t, db); !slices.Equal(got, seenBefore) {
			t.Fatalf("seen times moved though the import passed its room")
		}
	})
}

// TestInPlaceRetryStartsAfresh: a transaction retried (a serialization
// failure on PostgreSQL, here made to happen at the end of the first
// attempt) runs the import again from nothing: the first attempt's count
// and deferred times do not carry over, so room for exactly what the
// import writes is enough, and the times come out as in one transaction.
func TestInPlaceRetryStartsAfresh(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		bw := newBatchWorld(21, 200)
		g, c := bw.catalog(t, db)
		c.Advance(time.Hour)
		var logged []string
		reimport := bw.reimport(true, &logged)
		// What the re-import writes, measured and rolled back.
		measure := &inPlace{max: 1 << 30}
		if _, err := g.write(ctx, func(w *Writer) error {
			if err := reimport(w); err != nil {
				return err
			}
			return errors.New("measured")
		}, nil, measure); err == nil || measure.rows == 0 {
			t.Fatalf("measuring: %v, %d rows", err, measure.rows)
		}
		attempts := 0
		flaky := func(w *Writer) error {
			attempts++
			if err := reimport(w); err != nil {
				return err
			}
			if attempts == 1 {
				return errors.New("ERROR: could not serialize access due to read/write dependencies among transactions (SQLSTATE 40001)")
			}
			return nil
		}
		if _, err := g.writeInPlace(ctx, flaky, nil, measure.rows); err != nil || attempts != 2 {
			t.Fatalf("retried import with room for its %d rows: %v after %d attempts", measure.rows, err, attempts)
		}
		one := otherStore(t, db)
		bw.build(t, one, false, oneTx)
		sameStore(t, db, one, "a retried import in place")
	})
}
