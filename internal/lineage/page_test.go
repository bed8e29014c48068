package lineage

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// maxAnswer is the size no tool answer may reach by default (about 20k
// tokens; Claude Code warns above 25k).
const maxAnswer = 80_000

func answerSize(t *testing.T, v any) int {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestWideAssetIsPaged builds a hub with 20,000 downstream and 300
// upstream neighbours and checks that get_lineage, blast_radius_analysis,
// trace_cross_platform_lineage and search_assets answer in bounded pages,
// and that following next_cursor visits every neighbour exactly once.
func TestWideAssetIsPaged(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		const down, up = 20_000, 300
		var edges [][2]int32
		for i := int32(1); i <= down; i++ {
			edges = append(edges, [2]int32{0, i})
		}
		for i := int32(down + 1); i <= down+up; i++ {
			edges = append(edges, [2]int32{i, 0})
		}
		lineagetest.BulkLoad(t, db, down+up+1, edges)

		first, err := g.GetLineage(ctx, LineageParams{Asset: "bench://a1"})
		if err != nil {
			t.Fatal(err)
		}
		if n := answerSize(t, first); n > maxAnswer {
			t.Errorf("get_lineage default answer is %d characters", n)
		}
		if first.DownstreamTotal != down || first.UpstreamTotal != up || len(first.Downstream) != page.DefaultLimit || first.NextCursor == "" {
			t.Fatalf("first page: totals %d/%d, listed %d, cursor %q", first.UpstreamTotal, first.DownstreamTotal, len(first.Downstream), first.NextCursor)
		}
		seenDown, seenUp := map[string]int{}, map[string]int{}
		p := LineageParams{Asset: "bench://a1", Params: page.Params{Limit: page.MaxLimit}}
		pages := 0
		for {
			res, err := g.GetLineage(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			// A page of the largest limit ends early rather than grow
			// past the answer bound.
			if n := answerSize(t, res); n > maxAnswer {
				t.Errorf("page %d is %d characters", pages, n)
			}
			for _, n := range res.Downstream {
				seenDown[n.Asset.ID]++
			}
			for _, n := range res.Upstream {
				seenUp[n.Asset.ID]++
			}
			if res.NextCursor == "" {
				break
			}
			p.Cursor = res.NextCursor
		}
		if pages < down/page.MaxLimit || len(seenDown) != down || len(seenUp) != up {
			t.Fatalf("%d pages visited %d downstream and %d upstream", pages, len(seenDown), len(seenUp))
		}
		for id, n := range seenDown {
			if n != 1 {
				t.Fatalf("%s listed %d times", id, n)
			}
		}
		for id, n := range seenUp {
			if n != 1 {
				t.Fatalf("%s listed %d times", id, n)
			}
		}

		// A cursor is bound to its asset and refuses edits.
		if _, err := g.GetLineage(ctx, LineageParams{Asset: "bench://a2", Params: page.Params{Cursor: first.NextCursor}}); !errors.Is(err, page.ErrBadCursor) {
			t.Errorf("cursor for another asset: %v", err)
		}
		bad := []byte(first.NextCursor)
		bad[len(bad)/2] ^= 2
		if _, err := g.GetLineage(ctx, LineageParams{Asset: "bench://a1", Params: page.Params{Cursor: string(bad)}}); !errors.Is(err, page.ErrBadCursor) {
			t.Errorf("tampered cursor: %v", err)
		}

		// Blast radius: counts cover everything, pages list each asset once.
		br, err := g.BlastRadius(ctx, BlastParams{Asset: "bench://a1", MaxAssets: 100_000})
		if err != nil {
			t.Fatal(err)
		}
		if n := answerSize(t, br); n > maxAnswer || br.Total != down || len(br.Assets) != page.DefaultLimit || br.NextCursor == "" {
			t.Fatalf("blast: %d characters, total %d, listed %d", n, br.Total, len(br.Assets))
		}
		seen := map[string]int{}
		bp := BlastParams{Asset: "bench://a1", MaxAssets: 100_000, Limit: page.MaxLimit}
		for {
			res, err := g.BlastRadius(ctx, bp)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range res.Assets {
				seen[a.ID]++
			}
			if res.NextCursor == "" {
				break
			}
			bp.Cursor = res.NextCursor
		}
		if len(seen) != down {
			t.Fatalf("blast pages visited %d of %d", len(seen), down)
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("blast listed %s %d times", id, n)
			}
		}

		tr, err := g.Trace(ctx, TraceParams{Asset: "bench://a1", MaxAssets: 100_000})
		if err != nil {
			t.Fatal(err)
		}
		if n := answerSize(t, tr); n > maxAnswer || tr.NodesTotal != down+up+1 || len(tr.Nodes) != page.DefaultLimit {
			t.Fatalf("trace: %d characters, nodes %d of %d", n, len(tr.Nodes), tr.NodesTotal)
		}

		sr, err := g.SearchAssets(ctx, SearchParams{Query: "a1"})
		if err != nil {
			t.Fatal(err)
		}
		if n := answerSize(t, sr); n > maxAnswer || len(sr.Assets) != page.DefaultLimit || sr.NextCursor == "" || sr.Total <= page.DefaultLimit {
			t.Fatalf("search: %d characters, %d of %d", n, len(sr.Assets), sr.Total)
		}
		hits := map[string]int{}
		sp := SearchParams{Query: "a1", Limit: 200}
		for {
			res, err := g.SearchAssets(ctx, sp)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range res.Assets {
				hits[h.ID]++
			}
			if res.NextCursor == "" {
				break
			}
			sp.Cursor = res.NextCursor
		}
		if len(hits) != sr.Total {
			t.Fatalf("search pages visited %d of %d", len(hits), sr.Total)
		}
		for id, n := range hits {
			if n != 1 {
				t.Fatalf("search listed %s %d times", id, n)
			}
		}
	})
}

// TestSearchRefusesHostileQueries: a huge query, too many words or a NUL
// get a clear error naming the query, never a database error.
func TestSearchRefusesHostileQueries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g, _ := newGraph(t, db)
		huge := make([]byte, 1<<20)
		for i := range huge {
			huge[i] = "ab "[i%3]
		}
		for name, q := range map[string]string{
			"1 MiB":     string(huge),
			"300 words": string(huge[:900]),
			"NUL":       "usage\x00hourly",
		} {
			_, err := g.SearchAssets(context.Background(), SearchParams{Query: q})
			if err == nil {
				t.Errorf("%s: accepted", name)
				continue
			}
			msg := err.Error()
			if len(msg) > 300 || !containsAny(msg, "query") || containsAny(msg, "SQL", "sqlite", "LIKE", "pq:") {
				t.Errorf("%s: error is not clear: %.300s", name, msg)
			}
		}
		if _, err := g.SearchAssets(context.Background(), SearchParams{Query: "x", Limit: -1}); err == nil {
			t.Error("limit -1 accepted")
		}
	})
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
