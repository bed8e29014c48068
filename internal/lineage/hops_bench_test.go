package lineage

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
)

// BenchmarkDownstreamHops times the whole Downstream call incidents makes
// (version check, resolution, walk, a Hop keyed by every name of every
// asset reached) from a component's first asset, against floorBFS over the
// same graph in the same run. The first call after an index load reads the
// names of the assets it reaches (first-ms); later calls on the same index
// reuse them, as in a running agent.
func BenchmarkDownstreamHops(b *testing.B) {
	benchGraph(b)
	ctx := context.Background()
	g := New(bench.db, clock.NewFake(storyTime))
	adj := floorAdjacency(bench.n, bench.edges)
	want := floorBFS(adj, 0)
	if _, err := g.Index(ctx); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	hops, err := g.Downstream(ctx, []string{"bench://a1"}, maxMaxDepth)
	if err != nil {
		b.Fatal(err)
	}
	first := time.Since(start)
	if len(hops) < want+1 {
		b.Fatalf("Downstream keyed %d names; the floor reaches %d assets", len(hops), want)
	}
	var floorTotal time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		t0 := time.Now()
		floorBFS(adj, 0)
		floorTotal += time.Since(t0)
		b.StartTimer()
		if _, err := g.Downstream(ctx, []string{"bench://a1"}, maxMaxDepth); err != nil {
			b.Fatal(err)
		}
	}
	per := b.Elapsed() / time.Duration(b.N)
	floor := floorTotal / time.Duration(b.N)
	b.ReportMetric(float64(want), "reached")
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/walk")
	b.ReportMetric(float64(first.Microseconds())/1000, "first-ms")
	b.ReportMetric(float64(floor.Microseconds())/1000, "floor-ms")
	b.ReportMetric(float64(per)/float64(floor), "x-floor")
}

// BenchmarkFieldReaders times a field walk over the same component. The
// synthetic graph has no column lineage, so the field is carried along
// every edge to every asset: the worst case for the walk's per-asset name
// sets.
func BenchmarkFieldReaders(b *testing.B) {
	benchGraph(b)
	ctx := context.Background()
	g := New(bench.db, clock.NewFake(storyTime))
	if _, err := g.FieldReaders(ctx, "bench://a1", []string{"amount"}, maxMaxDepth); err != nil {
		b.Fatal(err)
	}
	adj := floorAdjacency(bench.n, bench.edges)
	want := floorBFS(adj, 0)
	var floorTotal time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		t0 := time.Now()
		floorBFS(adj, 0)
		floorTotal += time.Since(t0)
		b.StartTimer()
		if _, err := g.FieldReaders(ctx, "bench://a1", []string{"amount"}, maxMaxDepth); err != nil {
			b.Fatal(err)
		}
	}
	per := b.Elapsed() / time.Duration(b.N)
	floor := floorTotal / time.Duration(b.N)
	b.ReportMetric(float64(want), "reached")
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/walk")
	b.ReportMetric(float64(floor.Microseconds())/1000, "floor-ms")
	b.ReportMetric(float64(per)/float64(floor), "x-floor")
}
