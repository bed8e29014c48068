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
