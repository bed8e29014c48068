package packload

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/demo"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestLoadStoreTwiceChangesNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		now := time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)
		clk := clock.NewFake(now)
		for _, name := range demo.Packs() {
			p, _, err := Read(name, now)
			if err != nil {
				t.Fatal(err)
			}
			first, err := LoadStore(ctx, db, clk, p, "demo")
			if err != nil {
				t.Fatal(err)
			}
			if first.GraphAssets == 0 || first.Changes == 0 {
				t.Errorf("%s: nothing loaded: %+v", name, first)
			}
			again, err := LoadStore(ctx, db, clk, p, "demo")
			if err != nil {
				t.Fatal(err)
			}
			if again.GraphAssets != 0 || again.GraphEdges != 0 || again.Changes != 0 || again.Metrics != 0 || again.Versions != 0 {
				t.Errorf("%s: second load wrote again: %+v", name, again)
			}
		}
		// The billing story's path: the schema subject reaches the Stripe DAG.
		br, err := lineage.New(db, clk).BlastRadius(ctx, lineage.BlastParams{Asset: "schema://api-usage-value", Columns: []string{"response_bytes"}})
		if err != nil {
			t.Fatal(err)
		}
		found := map[string]bool{}
		for _, a := range br.Assets {
			found[a.ID] = true
		}
		t.Log(br.Summary)
		for _, a := range br.Assets {
			t.Log(a.ID, a.Distance, a.Critical, a.NextRun, a.AffectedColumns)
		}
		for _, want := range []string{"flink://usage-hourly-rollup", "airflow://dag/sync_metered_usage_to_stripe"} {
			if !found[want] {
				t.Errorf("blast radius misses %s: %s", want, br.Summary)
			}
		}
	})
}
