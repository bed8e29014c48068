package lineage

import (
	"context"
	"errors"
	"github.com/dataworkers/dw/internal/lineage/graphindex"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestBlastRadiusBudgetsAndCycles(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		// 0 -> 1 -> 2 -> 0 is a cycle; 2 -> 3 -> ... -> 2999 a long chain;
		// 0 -> 3000..4999 a wide fan.
		var edges [][2]int32
		edges = append(edges, [2]int32{0, 1}, [2]int32{1, 2}, [2]int32{2, 0})
		for i := int32(2); i < 2999; i++ {
			edges = append(edges, [2]int32{i, i + 1})
		}
		for i := int32(3000); i < 5000; i++ {
			edges = append(edges, [2]int32{0, i})
		}
		lineagetest.BulkLoad(t, db, 5000, edges)

		full, err := g.BlastRadius(ctx, BlastParams{Asset: "bench://a1", MaxDepth: 5000, MaxAssets: 100000, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if full.Total != 4999 || full.Partial || len(full.Assets) != 10 {
			t.Errorf("full: total %d partial %v listed %d", full.Total, full.Partial, len(full.Assets))
		}
		if !strings.Contains(full.Summary, "Listed 10 of 4999") {
			t.Errorf("summary does not say the list is cut: %s", full.Summary)
		}
		// Money and scheduled assets come first whatever their distance.
		if len(full.Assets[0].Critical) == 0 {
			t.Errorf("first listed %+v is not critical", full.Assets[0])
		}

		depth, _ := g.BlastRadius(ctx, BlastParams{Asset: "bench://a1", MaxDepth: 5, MaxAssets: 100000})
		if !depth.Partial || depth.Budget != graphindex.BudgetDepth || depth.Total != 2000+5 {
			t.Errorf("depth: total %d partial %v budget %q", depth.Total, depth.Partial, depth.Budget)
		}
		if !strings.Contains(depth.Summary, "PARTIAL: the depth budget") {
			t.Errorf("summary: %s", depth.Summary)
		}
		size, _ := g.BlastRadius(ctx, BlastParams{Asset: "bench://a1", MaxDepth: 5000, MaxAssets: 100})
		if !size.Partial || size.Budget != graphindex.BudgetSize || size.Total != 100 {
			t.Errorf("size: total %d partial %v budget %q", size.Total, size.Partial, size.Budget)
		}
		tm, _ := g.BlastRadius(ctx, BlastParams{Asset: "bench://a1", MaxDepth: 5000, MaxAssets: 100000, Timeout: "1ns"})
		if !tm.Partial || tm.Budget != graphindex.BudgetTime || tm.Total >= 4999 {
			t.Errorf("time: total %d partial %v budget %q", tm.Total, tm.Partial, tm.Budget)
		}
		// A budget that is reached exactly but leaves nothing out is not partial.
		exact, _ := g.BlastRadius(ctx, BlastParams{Asset: "bench://a2999", MaxDepth: 1})
		if exact.Partial || exact.Total != 1 {
			t.Errorf("exact: %+v", exact)
		}
		// The cycle is walked once: from a2, a0 and a1 are reached through it.
		cyc, _ := g.BlastRadius(ctx, BlastParams{Asset: "bench://a3", MaxDepth: 3})
		var ids []string
		for _, a := range cyc.Assets {
			ids = append(ids, a.ID)
		}
		slices.Sort(ids)
		if !slices.Contains(ids, "bench://a1") || !slices.Contains(ids, "bench://a2") || slices.Contains(ids, "bench://a3") {
			t.Errorf("cycle from a3: %v", ids)
		}

		for _, bad := range []BlastParams{{Asset: "bench://a1", MaxDepth: -1}, {Asset: "bench://a1", MaxAssets: -3},
			{Asset: "bench://a1", Timeout: "soon"}, {Asset: "bench://a1", Limit: 1 << 20}} {
			if _, err := g.BlastRadius(ctx, bad); err == nil {
				t.Errorf("%+v accepted", bad)
			}
		}
	})
}

func TestColumnWalkCycleTerminates(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		_, err := g.RecordLineage(ctx, Note{Edges: []NoteEdge{
			{From: "postgres://db.s.a", To: "postgres://db.s.b", Columns: []ColumnMapping{{From: "x", To: "y"}}},
			{From: "postgres://db.s.b", To: "postgres://db.s.a", Columns: []ColumnMapping{{From: "y", To: "z"}}},
			{From: "postgres://db.s.a", To: "postgres://db.s.c", Columns: []ColumnMapping{{From: "z", To: "w"}}},
			{From: "postgres://db.s.a", To: "postgres://db.s.d", Columns: []ColumnMapping{{From: "q", To: "q"}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.BlastRadius(ctx, BlastParams{Asset: "postgres://db.s.a", Columns: []string{"x"}})
		if err != nil {
			t.Fatal(err)
		}
		// x -> b.y -> a.z (back round the cycle) -> c.w; d reads only q.
		got := map[string][]string{}
		for _, a := range res.Assets {
			got[a.ID] = a.AffectedColumns
		}
		if !slices.Equal(got["postgres://db.s.b"], []string{"y"}) || !slices.Equal(got["postgres://db.s.c"], []string{"w"}) {
			t.Errorf("column walk: %v", got)
		}
		if _, ok := got["postgres://db.s.d"]; ok || res.Total != 2 || len(res.NoColumnLineage) != 0 {
			t.Errorf("column walk reached %v (total %d, no-cll %v)", got, res.Total, res.NoColumnLineage)
		}
	})
}

func TestResolveErrors(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		if _, err := g.Resolve(ctx, "usage_hourly"); !errors.Is(err, ErrUnknownAsset) || !strings.Contains(err.Error(), "empty") {
			t.Errorf("empty graph: %v", err)
		}
		buildBillingStory(t, g)
		_, err := g.Resolve(ctx, "fct_billable_egres")
		if !errors.Is(err, ErrUnknownAsset) || !strings.Contains(err.Error(), "closest: dbt://model.billing.fct_billable_egress") {
			t.Errorf("typo: %v", err)
		}
		_, err = g.BlastRadius(ctx, BlastParams{Asset: "kafka://prod/usage-hourlyy"})
		if !errors.Is(err, ErrUnknownAsset) || !strings.Contains(err.Error(), "kafka://prod/usage-hourly") {
			t.Errorf("unknown id: %v", err)
		}
		// Two assets share the name usage-hourly... once a second cluster has it.
		if _, err := g.RecordLineage(ctx, Note{Assets: []NoteAsset{{ID: "kafka://dr/usage-hourly"}}}); err != nil {
			t.Fatal(err)
		}
		_, err = g.Resolve(ctx, "usage-hourly")
		if err == nil || !strings.Contains(err.Error(), "kafka://dr/usage-hourly") || !strings.Contains(err.Error(), "kafka://prod/usage-hourly") {
			t.Errorf("ambiguous: %v", err)
		}
		if _, err := g.Resolve(ctx, "usage.usage_hourly"); err != nil {
			t.Errorf("dotted tail: %v", err)
		}
	})
}

func TestIndexReloadsAcrossProcesses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a, _ := newGraph(t, db)
		b, _ := newGraph(t, db) // another agent process on the same store
		buildBillingStory(t, a)
		i1, err := b.Index(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i2, _ := b.Index(ctx); i2 != i1 {
			t.Error("index reloaded without a write")
		}
		before, _ := b.BlastRadius(ctx, BlastParams{Asset: "fct_billable_egress"})
		if _, err := a.RecordLineage(ctx, Note{Path: []string{"airflow://dag/sync_metered_usage_to_stripe", "stripe://meter/egress"}}); err != nil {
			t.Fatal(err)
		}
		i3, _ := b.Index(ctx)
		if i3 == i1 || i3.Version <= i1.Version {
			t.Errorf("index not reloaded: version %d -> %d", i1.Version, i3.Version)
		}
		after, _ := b.BlastRadius(ctx, BlastParams{Asset: "fct_billable_egress"})
		if after.Total != before.Total+1 {
			t.Errorf("other process's write not seen: %d -> %d", before.Total, after.Total)
		}
		// A note that repeats what the graph knows does not move the version.
		v := i3.Version
		if _, err := a.RecordLineage(ctx, Note{Path: []string{"airflow://dag/sync_metered_usage_to_stripe", "stripe://meter/egress"}}); err != nil {
			t.Fatal(err)
		}
		if i4, _ := b.Index(ctx); i4.Version != v {
			t.Errorf("no-op note moved the version %d -> %d", v, i4.Version)
		}
	})
}

// Agents answer questions concurrently while another process writes.
func TestConcurrentQueriesAndWrites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		buildBillingStory(t, g)
		writer, _ := newGraph(t, db)
		done := make(chan error, 9)
		for i := 0; i < 8; i++ {
			go func() {
				for j := 0; j < 20; j++ {
					res, err := g.BlastRadius(ctx, BlastParams{Asset: "schema://api-usage-value", Columns: []string{"response_bytes"}})
					if err != nil {
						done <- err
						return
					}
					if res.Total < 6 {
						done <- errors.New("blast radius lost assets under concurrent writes")
						return
					}
				}
				done <- nil
			}()
		}
		go func() {
			for j := 0; j < 10; j++ {
				if _, err := writer.RecordLineage(ctx, Note{Path: []string{"dbt://model.billing.fct_billable_egress", "looker://explore/egress-" + string(rune('a'+j))}}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for i := 0; i < 9; i++ {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		res, _ := g.BlastRadius(ctx, BlastParams{Asset: "schema://api-usage-value", Columns: []string{"response_bytes"}})
		if res.Total != 16 {
			t.Errorf("after writes total = %d, want 16", res.Total)
		}
	})
}

// The walk's distances and paths agree with a reference BFS, also when a
// size or depth budget stops it midway.
func TestWalkDistancesMatchReference(t *testing.T) {
	const n = 3000
	rng := rand.New(rand.NewPCG(1, 2))
	var src, dst []int32
	adj := make([][]int32, n)
	for i := 0; i < n; i++ {
		for k := 0; k < 2; k++ {
			j := int32(rng.IntN(n))
			src, dst = append(src, int32(i)), append(dst, j)
			adj[i] = append(adj[i], j)
		}
	}
	ix := graphindex.FromEdges(n, src, dst, make([]uint8, len(src)))
	ref := make([]int32, n)
	for i := range ref {
		ref[i] = -1
	}
	ref[0] = 0
	queue := []int32{0}
	for h := 0; h < len(queue); h++ {
		for _, v := range adj[queue[h]] {
			if ref[v] < 0 {
				ref[v] = ref[queue[h]] + 1
				queue = append(queue, v)
			}
		}
	}
	for _, lim := range []graphindex.Limits{{MaxDepth: 1000, MaxNodes: n}, {MaxDepth: 1000, MaxNodes: 700}, {MaxDepth: 3, MaxNodes: n}} {
		w := ix.BFS(context.Background(), []int32{0}, false, lim)
		for p := range w.Order {
			node, d := w.Order[p], w.Distance(int32(p))
			if d != ref[node] {
				t.Fatalf("limits %+v: node %d at distance %d, reference %d", lim, node, d, ref[node])
			}
			path := w.Path(int32(p))
			if len(path) != int(d)+1 || path[0] != 0 || path[len(path)-1] != node {
				t.Fatalf("limits %+v: path to %d is %v", lim, node, path)
			}
			if d > int32(lim.MaxDepth) {
				t.Fatalf("node beyond the depth budget")
			}
		}
		if lim.MaxNodes < n && (w.Budget != graphindex.BudgetSize || len(w.Order) != lim.MaxNodes+1) {
			t.Errorf("size budget: %q, %d", w.Budget, len(w.Order))
		}
	}
}

func TestResolveDottedNames(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		if _, err := g.RecordLineage(ctx, Note{Path: []string{"kafka://prod/io.acme.orders", "snowflake://analytics.sales.orders"}}); err != nil {
			t.Fatal(err)
		}
		for ref, want := range map[string]string{
			"io.acme.orders": "kafka://prod/io.acme.orders",
			"sales.orders":   "snowflake://analytics.sales.orders",
			"SALES.ORDERS":   "snowflake://analytics.sales.orders",
		} {
			if id, err := g.Resolve(ctx, ref); err != nil || id != want {
				t.Errorf("Resolve(%s) = %s, %v; want %s", ref, id, err, want)
			}
		}
		// "orders" is the table, not the topic io.acme.orders; once a second
		// table is called orders, the bare name is ambiguous.
		if id, err := g.Resolve(ctx, "orders"); err != nil || id != "snowflake://analytics.sales.orders" {
			t.Errorf("orders: %s %v", id, err)
		}
		if _, err := g.RecordLineage(ctx, Note{Assets: []NoteAsset{{ID: "postgres://shop.public.orders"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Resolve(ctx, "orders"); err == nil || !strings.Contains(err.Error(), "names 2 assets") {
			t.Errorf("orders: %v", err)
		}
	})
}
