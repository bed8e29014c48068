package lineage

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// loadFanAndChain stores 3,000 assets of very different reach: a1 fans
// out to 1,499 assets three levels deep (each asset has 12 children), a2000
// reaches a chain of five, a3000 reaches nothing.
func loadFanAndChain(t *testing.T, db *store.DB) {
	t.Helper()
	var edges [][2]int32
	for i := int32(1); i < 1500; i++ {
		edges = append(edges, [2]int32{(i - 1) / 12, i})
	}
	for i := int32(1999); i < 2004; i++ {
		edges = append(edges, [2]int32{i, i + 1})
	}
	lineagetest.BulkLoad(t, db, 3000, edges)
}

// TestBlastRadiusReusedWalkArrays asks blast radius from starts of very
// different reach, interleaved, so each call walks on the arrays the
// previous one released (a large walk's arrays under a small one and back):
// every answer must equal the first answer for the same start, so nothing
// of an earlier walk leaks into a later one.
func TestBlastRadiusReusedWalkArrays(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		loadFanAndChain(t, db)
		// The first answer after the load says how long loading the index
		// took; the next, on the held index, says nothing of it. The
		// rounds below then compare answers on the held index.
		loaded, err := g.BlastRadius(ctx, BlastParams{Asset: "bench://a1"})
		if err != nil {
			t.Fatal(err)
		}
		held, err := g.BlastRadius(ctx, BlastParams{Asset: "bench://a1"})
		if err != nil {
			t.Fatal(err)
		}
		if loaded.IndexLoadMS <= 0 || held.IndexLoadMS != 0 || loaded.Total != held.Total {
			t.Fatalf("index_load_ms %v on the first call, %v on the next (totals %d, %d): want it only on the call that loaded",
				loaded.IndexLoadMS, held.IndexLoadMS, loaded.Total, held.Total)
		}
		starts := []string{"bench://a1", "bench://a2000", "bench://a3000"}
		first := map[string]string{}
		for round := 0; round < 3; round++ {
			for _, s := range starts {
				for _, limit := range []int{0, 500} {
					res, err := g.BlastRadius(ctx, BlastParams{Asset: s, Limit: limit})
					if err != nil {
						t.Fatal(err)
					}
					b, err := json.Marshal(res)
					if err != nil {
						t.Fatal(err)
					}
					key := s + "/" + string(rune('0'+limit/100))
					if round == 0 {
						first[key] = string(b)
						var want int
						switch s {
						case "bench://a1":
							want = 1499
						case "bench://a2000":
							want = 5
						}
						if res.Total != want {
							t.Fatalf("%s reached %d, want %d", s, res.Total, want)
						}
						continue
					}
					if string(b) != first[key] {
						t.Fatalf("round %d, %s limit %d: answer changed\nfirst: %.300s\nnow:   %.300s", round, s, limit, first[key], b)
					}
				}
			}
		}
	})
}

// TestWalksOfEveryKindOnReusedArrays does for trace, upstream and
// downstream hops and owners what TestBlastRadiusReusedWalkArrays does for
// blast radius: each now hands its walk's arrays on when done, so every
// answer, asked again and again in another order after walks of very
// different reach, must equal the same question's answer from a graph
// whose index has never walked.
func TestWalksOfEveryKindOnReusedArrays(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, clk := newGraph(t, db)
		loadFanAndChain(t, db)
		// a1499 and its parent a125 own nothing, so Owners walks up two
		// hops from a1499 to the nearest owner (a11, team-11).
		if _, err := db.ExecContext(ctx, "UPDATE lineage_assets SET owner = '' WHERE id IN ('bench://a1499', 'bench://a125')"); err != nil {
			t.Fatal(err)
		}
		asks := []struct {
			name string
			ask  func(*Graph) (any, error)
		}{
			{"blast a1", func(g *Graph) (any, error) { return g.BlastRadius(ctx, BlastParams{Asset: "bench://a1"}) }},
			{"trace a1", func(g *Graph) (any, error) { return g.Trace(ctx, TraceParams{Asset: "bench://a1"}) }},
			{"trace a1499 up", func(g *Graph) (any, error) {
				return g.Trace(ctx, TraceParams{Asset: "bench://a1499", Direction: "up"})
			}},
			{"trace a2000", func(g *Graph) (any, error) { return g.Trace(ctx, TraceParams{Asset: "bench://a2000"}) }},
			{"down a1", func(g *Graph) (any, error) { return g.Downstream(ctx, []string{"bench://a1"}, 10) }},
			{"up a1499", func(g *Graph) (any, error) { return g.Upstream(ctx, []string{"bench://a1499"}, 10) }},
			{"down a2000", func(g *Graph) (any, error) { return g.Downstream(ctx, []string{"bench://a2000"}, 10) }},
			{"owners", func(g *Graph) (any, error) {
				return g.Owners(ctx, OwnersParams{Assets: []string{"bench://a1499", "bench://a2003", "bench://a5", "bench://a2999"}})
			}},
		}
		answer := func(g *Graph, name string, ask func(*Graph) (any, error)) string {
			t.Helper()
			res, err := ask(g)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		// Each question once on a graph of its own, its index loaded
		// (which the first answer after a load reports) but never walked.
		want := map[string]string{}
		for _, a := range asks {
			fresh := New(db, clk)
			if _, err := fresh.Index(ctx); err != nil {
				t.Fatal(err)
			}
			want[a.name] = answer(fresh, a.name, a.ask)
		}
		if _, err := g.Index(ctx); err != nil {
			t.Fatal(err)
		}
		for round := 0; round < 4; round++ {
			for k := range asks {
				a := asks[k]
				if round%2 == 1 {
					a = asks[len(asks)-1-k]
				}
				if got := answer(g, a.name, a.ask); got != want[a.name] {
					t.Fatalf("round %d, %s: answer differs from a fresh graph's\nwant: %.300s\ngot:  %.300s", round, a.name, want[a.name], got)
				}
			}
		}
		// The same questions from four goroutines at once, on the held
		// graph: a walk released while another call still reads it shows
		// here (and under -race).
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range asks {
					a := asks[(k+w)%len(asks)]
					res, err := a.ask(g)
					if err != nil {
						t.Errorf("%s: %v", a.name, err)
						return
					}
					if b, _ := json.Marshal(res); string(b) != want[a.name] {
						t.Errorf("at once, %s: answer differs from a fresh graph's", a.name)
					}
				}
			}()
		}
		wg.Wait()
		var owners OwnersResult
		if err := json.Unmarshal([]byte(want["owners"]), &owners); err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(owners.Assets, func(a AssetOwner) bool { return a.Asset == "bench://a1499" }); i < 0 ||
			owners.Assets[i].UpstreamOwner != "team-11" || owners.Assets[i].UpstreamOwnerAsset != "bench://a11" {
			t.Fatalf("owners of a1499: %+v, want the nearest owner upstream, team-11 at bench://a11", owners.Assets)
		}
		// The answers are about the graph, not empty: a1 reaches 1,499
		// assets, and the trace up from a1499 finds its chain to a0.
		var down map[string]Hop
		if err := json.Unmarshal([]byte(want["down a1"]), &down); err != nil || len(down) < 1499 {
			t.Fatalf("downstream of a1 names %d assets (%v), want at least 1,499", len(down), err)
		}
		var up TraceResult
		if err := json.Unmarshal([]byte(want["trace a1499 up"]), &up); err != nil || len(up.Nodes) < 3 {
			t.Fatalf("trace up from a1499: %d nodes (%v)", len(up.Nodes), err)
		}
		// A trace both ways walks twice in one call, so the second walk
		// could take the first's arrays while the first is still read: each
		// side must be what a trace of that side alone finds, and what the
		// edges say (a13: a1 above, its 12 children below; a2001: a2000
		// above, a chain of three below).
		for _, c := range []struct {
			asset      string
			ups, downs int // paths each way
		}{{"bench://a13", 1, 12}, {"bench://a2001", 1, 1}} {
			trace := func(dir string) *TraceResult {
				tr, err := g.Trace(ctx, TraceParams{Asset: c.asset, Direction: dir})
				if err != nil {
					t.Fatal(err)
				}
				return tr
			}
			both, up, down := trace("both"), trace("up"), trace("down")
			bothUp, _ := json.Marshal(both.Upstream)
			upOnly, _ := json.Marshal(up.Upstream)
			bothDown, _ := json.Marshal(both.Downstream)
			downOnly, _ := json.Marshal(down.Downstream)
			if string(bothUp) != string(upOnly) || string(bothDown) != string(downOnly) || both.UpstreamTotal != c.ups || both.DownstreamTotal != c.downs {
				t.Fatalf("%s both ways: %d paths up %s, %d down %s; alone: up %s, down %s; want %d and %d",
					c.asset, both.UpstreamTotal, bothUp, both.DownstreamTotal, bothDown, upOnly, downOnly, c.ups, c.downs)
			}
		}
	})
}
