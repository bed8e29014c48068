package lineage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/page/pagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestGetLineageWalkSurvivesWrites: neighbours added (sorting before and
// after the first page's last) and one edge removed between page 1 and
// page 2 make the walk over both lists neither skip nor repeat one. Two
// neighbours share their first 100 characters, past the bounded prefix
// the order uses, and are still told apart.
func TestGetLineageWalkSurvivesWrites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		hub := "duckdb://w.hub"
		long := "duckdb://w." + strings.Repeat("l", 100)
		link := func(from, to string) {
			t.Helper()
			if _, err := g.RecordLineage(ctx, Note{Path: []string{from, to}}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 6 {
			link(hub, fmt.Sprintf("duckdb://w.d%d", i))
			link(fmt.Sprintf("duckdb://w.u%d", i), hub)
		}
		link(hub, long+"_b")
		link(hub, long+"_a")
		all, err := g.GetLineage(ctx, LineageParams{Asset: hub, Params: page.Params{Limit: 100}})
		if err != nil || all.DownstreamTotal != 8 || all.UpstreamTotal != 6 {
			t.Fatalf("lineage: %+v, %v", all, err)
		}
		upSeen := map[string]int{}
		seen := pagetest.Walk(t, neighborIDs(all.Downstream), func(cursor string) ([]string, string, error) {
			res, err := g.GetLineage(ctx, LineageParams{Asset: hub, Params: page.Params{Limit: 3, Cursor: cursor}})
			if err != nil {
				return nil, "", err
			}
			for _, n := range res.Upstream {
				upSeen[n.Asset.ID]++
			}
			return neighborIDs(res.Downstream), res.NextCursor, nil
		}, func() []string {
			link(hub, "duckdb://w.a_first") // sorts before the cursor
			link(hub, "duckdb://w.z_last")  // sorts after it
			link("duckdb://w.u_new", hub)
			if _, err := db.ExecContext(ctx, `DELETE FROM lineage_edges WHERE from_seq = (SELECT seq FROM lineage_assets WHERE id = ?)
				AND to_seq = (SELECT seq FROM lineage_assets WHERE id = ?)`, hub, "duckdb://w.d4"); err != nil {
				t.Fatal(err)
			}
			return []string{"duckdb://w.d4"}
		})
		if !slices.Contains(seen, "duckdb://w.z_last") || slices.Contains(seen, "duckdb://w.a_first") {
			t.Errorf("walk %v: want z_last (after the cursor), not a_first", seen)
		}
		for _, n := range all.Upstream {
			if upSeen[n.Asset.ID] != 1 {
				t.Errorf("upstream %s listed %d times", n.Asset.ID, upSeen[n.Asset.ID])
			}
		}
		if upSeen["duckdb://w.u_new"] != 1 {
			t.Errorf("upstream u_new (after every listed one) listed %d times", upSeen["duckdb://w.u_new"])
		}
	})
}

// TestSearchWalkSurvivesWrites: assets added that rank before and after
// the first page's last, and one removed, make the walk neither skip nor
// repeat a hit.
func TestSearchWalkSurvivesWrites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		add := func(id, title string) {
			t.Helper()
			if _, err := g.RecordLineage(ctx, Note{Assets: []NoteAsset{{ID: id, Kind: "table", Title: title}}}); err != nil {
				t.Fatal(err)
			}
		}
		// Names matching "orders" score above titles matching it.
		for i := range 4 {
			add(fmt.Sprintf("duckdb://w.orders_%d", i), "")
			add(fmt.Sprintf("duckdb://w.t%d", i), "orders")
		}
		ids := func(r *SearchResult) []string {
			out := make([]string, len(r.Assets))
			for i, h := range r.Assets {
				out[i] = h.ID
			}
			return out
		}
		all, err := g.SearchAssets(ctx, SearchParams{Query: "orders", Limit: 100})
		if err != nil || all.Total != 8 {
			t.Fatalf("search: %+v, %v", all, err)
		}
		victim := all.Assets[5].ID
		seen := pagetest.Walk(t, ids(all), func(cursor string) ([]string, string, error) {
			r, err := g.SearchAssets(ctx, SearchParams{Query: "orders", Limit: 3, Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return ids(r), r.NextCursor, nil
		}, func() []string {
			add("duckdb://w.orders_1b", "") // ranks before the cursor
			add("duckdb://w.t_z", "orders") // after it
			if _, err := db.ExecContext(ctx, "DELETE FROM lineage_assets WHERE id = ?", victim); err != nil {
				t.Fatal(err)
			}
			return []string{victim}
		})
		if !slices.Contains(seen, "duckdb://w.t_z") || slices.Contains(seen, "duckdb://w.orders_1b") {
			t.Errorf("walk %v: want t_z (after the cursor), not orders_1b", seen)
		}
		if _, err := g.SearchAssets(ctx, SearchParams{Query: "order", Cursor: all.NextCursor}); all.NextCursor != "" && !errors.Is(err, page.ErrBadCursor) {
			t.Errorf("cursor of another query: %v", err)
		}
	})
}
