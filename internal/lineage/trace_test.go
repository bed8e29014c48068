package lineage

import (
	"context"
	"fmt"
	"testing"

	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestTracePathsAreBounded: a hub feeding 5,000 leaves and one chain 300
// hops long. The default answer lists max_paths paths (not 5,000), each
// path at most 10 assets (the chain's ends, with the middle counted), and
// says how many paths there are in all.
func TestTracePathsAreBounded(t *testing.T) {
	db := storetest.SQLite(t)
	ctx := context.Background()
	g, _ := newGraph(t, db)
	const leaves, chain = 5000, 300
	var edges [][2]int32
	for i := int32(1); i <= leaves; i++ {
		edges = append(edges, [2]int32{0, i})
	}
	prev := int32(0)
	for i := int32(leaves + 1); i <= leaves+chain; i++ {
		edges = append(edges, [2]int32{prev, i})
		prev = i
	}
	lineagetest.BulkLoad(t, db, leaves+chain+1, edges)

	tr, err := g.Trace(ctx, TraceParams{Asset: "bench://a1", Direction: "down", MaxDepth: 1000, MaxAssets: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if n := answerSize(t, tr); n > maxAnswer {
		t.Errorf("trace answer is %d characters, over %d", n, maxAnswer)
	}
	if tr.DownstreamTotal != leaves+1 || len(tr.Downstream) != defaultMaxPaths {
		t.Fatalf("paths: %d listed of %d, want %d of %d", len(tr.Downstream), tr.DownstreamTotal, defaultMaxPaths, leaves+1)
	}
	longest := tr.Downstream[0]
	wantLast := fmt.Sprintf("bench://a%d", leaves+chain+1)
	if longest.Length != chain+1 || len(longest.Assets) != maxPathAssets || longest.Elided != chain+1-maxPathAssets ||
		longest.Assets[0] != "bench://a1" || longest.Assets[len(longest.Assets)-1] != wantLast {
		t.Errorf("longest path: length %d, %d listed, %d elided, %s … %s", longest.Length, len(longest.Assets), longest.Elided,
			longest.Assets[0], longest.Assets[len(longest.Assets)-1])
	}
	for _, p := range tr.Downstream[1:] {
		if p.Length != 2 || len(p.Assets) != 2 || p.Elided != 0 {
			t.Errorf("leaf path %+v", p)
		}
	}
	if len(tr.Summary) > 2000 {
		t.Errorf("summary is %d characters", len(tr.Summary))
	}

	// max_paths is honoured up to its maximum, and beyond it refused.
	tr, err = g.Trace(ctx, TraceParams{Asset: "bench://a1", Direction: "down", MaxDepth: 1000, MaxAssets: 100_000, MaxPaths: MaxTracePaths})
	if err != nil || len(tr.Downstream) != MaxTracePaths || tr.DownstreamTotal != leaves+1 {
		t.Fatalf("max_paths %d: %v, %d listed of %d", MaxTracePaths, err, len(tr.Downstream), tr.DownstreamTotal)
	}
	if _, err := g.Trace(ctx, TraceParams{Asset: "bench://a1", MaxPaths: MaxTracePaths + 1}); err == nil {
		t.Error("max_paths over the maximum accepted")
	}
	// A short answer lists every path and says nothing was cut.
	tr, err = g.Trace(ctx, TraceParams{Asset: fmt.Sprintf("bench://a%d", leaves+chain-1), Direction: "down"})
	if err != nil || tr.DownstreamTotal != 1 || len(tr.Downstream) != 1 || tr.Downstream[0].Length != 3 || tr.Downstream[0].Elided != 0 {
		t.Fatalf("short trace: %v %+v", err, tr.Downstream)
	}
}
