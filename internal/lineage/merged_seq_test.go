package lineage

import (
	"context"
	"fmt"
	"testing"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestLinksFromSeqsALaterMergeTook: in one write, seqs returned by
// earlier upserts are held while a later upsert merges their assets into
// one; Link and LinkLater on the held seqs then link the asset they went
// into, and UpsertAssets returns each input's asset as it stands after
// the merges of its own call.
func TestLinksFromSeqsALaterMergeTook(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g, _ := newGraph(t, db)
		ctx := context.Background()
		var a, b, sink, other int64
		var seqs []int64
		_, err := g.Write(ctx, func(w *Writer) error {
			var err error
			if a, err = w.UpsertAsset(&AssetInput{ID: "test://a", Names: []string{"test://a", "test://shared-1"}}); err != nil {
				return err
			}
			if b, err = w.UpsertAsset(&AssetInput{ID: "test://b", Names: []string{"test://b", "test://shared-2"}}); err != nil {
				return err
			}
			if sink, err = w.UpsertAsset(&AssetInput{ID: "test://sink"}); err != nil {
				return err
			}
			if other, err = w.UpsertAsset(&AssetInput{ID: "test://other"}); err != nil {
				return err
			}
			// c names both a and b: the two are one asset from here on.
			if _, err = w.UpsertAsset(&AssetInput{ID: "test://c", Names: []string{"test://c", "test://shared-1", "test://shared-2"}}); err != nil {
				return err
			}
			if err := w.Link(a, sink, "", SourceNote, nil, false); err != nil {
				return err
			}
			if err := w.LinkLater(b, other, SourceNote); err != nil {
				return err
			}
			// Within one call: the first input is given a new asset, the
			// second's names merge it with b's.
			seqs, err = w.UpsertAssets([]*AssetInput{
				{ID: "test://d", Names: []string{"test://d", "test://shared-3"}},
				{ID: "test://e", Names: []string{"test://e", "test://shared-3", "test://b"}},
			})
			return err
		})
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		var assets int
		if err := db.SQL().QueryRowContext(ctx, "SELECT COUNT(*) FROM lineage_assets WHERE seq IN ("+
			"SELECT asset_seq FROM lineage_aliases WHERE alias IN ('test://a', 'test://b', 'test://c', 'test://d', 'test://e'))").Scan(&assets); err != nil {
			t.Fatal(err)
		}
		if assets != 1 {
			t.Fatalf("a, b, c, d and e are %d assets, want one", assets)
		}
		one, err := g.Resolve(ctx, "test://a")
		if err != nil {
			t.Fatal(err)
		}
		for _, to := range []string{"test://sink", "test://other"} {
			up, err := g.GetLineage(ctx, LineageParams{Asset: to})
			if err != nil {
				t.Fatal(err)
			}
			if len(up.Upstream) != 1 || up.Upstream[0].Asset.ID != one {
				t.Errorf("upstream of %s = %+v, want only %s", to, up.Upstream, one)
			}
		}
		if len(seqs) != 2 || seqs[0] != seqs[1] {
			t.Errorf("UpsertAssets returned %v, want one seq for both inputs (their names met)", seqs)
		}
		var stored int
		if err := db.SQL().QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM lineage_assets WHERE seq = %d", seqs[0])).Scan(&stored); err != nil || stored != 1 {
			t.Errorf("UpsertAssets returned seq %d, which is not stored (%d, %v)", seqs[0], stored, err)
		}
	})
}

// TestSurvivorFollowsAChainOfMerges: b is merged into a, then a into z,
// all in one write; a link from b's held seq lands on z.
func TestSurvivorFollowsAChainOfMerges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g, _ := newGraph(t, db)
		ctx := context.Background()
		_, err := g.Write(ctx, func(w *Writer) error {
			up := func(id string, names ...string) int64 {
				seq, err := w.UpsertAsset(&AssetInput{ID: id, Names: append([]string{id}, names...)})
				if err != nil {
					t.Fatalf("upsert %s: %v", id, err)
				}
				return seq
			}
			up("test://z", "test://z-name")      // the lowest seq: kept by every merge it is in
			up("test://a", "test://a-name")      // kept when merged with b
			b := up("test://b", "test://b-name") // merged into a, then with a into z
			sink := up("test://sink")
			up("test://ab", "test://a-name", "test://b-name")
			up("test://az", "test://a-name", "test://z-name")
			return w.Link(b, sink, "", SourceNote, nil, false)
		})
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		up, err := g.GetLineage(ctx, LineageParams{Asset: "test://sink"})
		if err != nil {
			t.Fatal(err)
		}
		if len(up.Upstream) != 1 || up.Upstream[0].Asset.ID != "test://z" {
			t.Errorf("upstream of test://sink = %+v, want test://z (b went into a, a into z)", up.Upstream)
		}
	})
}

// TestNoteWhoseAliasesMergeItsOwnAssets: a note's assets section may say
// that an asset its path or edges name is the same as another stored one
// (a dashboard is a dbt exposure); the merge happens after the path's
// asset was upserted. The edges, the fields the note gives and the job's
// reads then go to the asset they went into; an edge whose two ends the
// note's aliases make one asset is refused, and the note changes nothing.
func TestNoteWhoseAliasesMergeItsOwnAssets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g, _ := newGraph(t, db)
		ctx := context.Background()
		if _, err := g.RecordLineage(ctx, Note{Assets: []NoteAsset{
			{ID: "kafka://prod/a", Columns: []Column{{Name: "x"}, {Name: "y"}}},
			{ID: "kafka://prod/b"},
			{ID: "kafka://prod/c"},
		}}); err != nil {
			t.Fatal(err)
		}
		res, err := g.RecordLineage(ctx, Note{
			Edges: []NoteEdge{{From: "kafka://prod/b", To: "flink://job", ReadsFields: []string{"x"}}},
			Assets: []NoteAsset{
				{ID: "kafka://prod/a", Aliases: []string{"kafka://prod/b"}},
				{ID: "flink://job", SQL: "SELECT y FROM a"},
			},
		})
		if err != nil {
			t.Fatalf("a note whose alias merges its edge's source: %v", err)
		}
		one, err := g.Resolve(ctx, "kafka://prod/b")
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Edges) != 1 || res.Edges[0].From != one || res.Edges[0].To != "flink://job" {
			t.Errorf("the note reports edges %+v, want %s -> flink://job", res.Edges, one)
		}
		cols, ok := edgeCols(t, g, one, "flink://job")
		if !ok {
			t.Fatalf("no edge %s -> flink://job stored", one)
		}
		var from []string
		for _, c := range cols {
			from = append(from, c.From)
		}
		if len(from) != 1 || from[0] != "x" {
			t.Errorf("the edge reads %v, want the note's own [x], not the job SQL's", from)
		}

		var before int
		if err := db.SQL().QueryRowContext(ctx, "SELECT COUNT(*) FROM lineage_assets").Scan(&before); err != nil {
			t.Fatal(err)
		}
		_, err = g.RecordLineage(ctx, Note{
			Path:   []string{"kafka://prod/c", "kafka://prod/d"},
			Assets: []NoteAsset{{ID: "kafka://prod/e", Aliases: []string{"kafka://prod/c", "kafka://prod/d"}}},
		})
		if err == nil {
			t.Fatal("a note whose aliases make its edge's two ends one asset was recorded")
		}
		var after int
		if err := db.SQL().QueryRowContext(ctx, "SELECT COUNT(*) FROM lineage_assets").Scan(&after); err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Errorf("the refused note changed the assets: %d, then %d", before, after)
		}
		if _, err := g.Resolve(ctx, "kafka://prod/e"); err == nil {
			t.Error("the refused note's asset kafka://prod/e is stored")
		}
	})
}
