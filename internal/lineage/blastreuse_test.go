package lineage

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestBlastRadiusReusedWalkArrays asks blast radius from starts of very
// different reach, interleaved, so each call walks on the arrays the
// previous one released (a large walk's arrays under a small one and back):
// every answer must equal the first answer for the same start, so nothing
// of an earlier walk leaks into a later one.
func TestBlastRadiusReusedWalkArrays(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		// a1 fans out to 1,500 assets three levels deep; a2000 reaches a
		// chain of five; a3000 reaches nothing.
		var edges [][2]int32
		for i := int32(1); i < 1500; i++ {
			edges = append(edges, [2]int32{(i - 1) / 12, i})
		}
		for i := int32(1999); i < 2004; i++ {
			edges = append(edges, [2]int32{i, i + 1})
		}
		lineagetest.BulkLoad(t, db, 3000, edges)
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
