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
		one := storetest.SQLite(t)
		if db.Dialect() == store.Postgres {
			one = storetest.Postgres(t)
		}
		bw.build(t, one, false, oneTx)
		if got, want := lineagetest.GraphDump(t, db), lineagetest.GraphDump(t, one); !slices.Equal(got, want) {
			t.Fatalf("staged after the attempt in place\ngot:  %q\nwant: %q", got, want)
		}
		if got, want := seenDump(t, db), seenDump(t, one); !slices.Equal(got, want) {
			t.Fatalf("seen times staged after the attempt in place\ngot:  %q\nwant: %q", got, want)
		}
	})
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
