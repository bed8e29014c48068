package lineage

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
)

// BenchmarkDownstreamHops times the whole Downstream call incidents makes
// (version check, resolution, walk, a Hop keyed by every name of every
// asset reached) from a component's first asset, against lineagetest.FloorBFS over the
// same graph in the same run. The first call after an index load reads the
// names of the assets it reaches (first-ms); later calls on the same index
// reuse them, as in a running agent.
func BenchmarkDownstreamHops(b *testing.B) {
	benchGraph(b)
	ctx := context.Background()
	g := New(bench.db, clock.NewFake(lineagetest.StoryTime))
	adj := floorAdjacency()
	want := lineagetest.FloorBFS(adj, 0)
	if _, err := g.Index(ctx); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	hops, err := g.Downstream(ctx, []string{"bench://a1"}, MaxWalkDepth)
	if err != nil {
		b.Fatal(err)
	}
	first := time.Since(start)
	if len(hops) < want+1 {
		b.Fatalf("Downstream keyed %d names; the floor reaches %d assets", len(hops), want)
	}
	per := againstFloor(b, adj, func() error { _, err := g.Downstream(ctx, []string{"bench://a1"}, MaxWalkDepth); return err })
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/walk")
	b.ReportMetric(float64(first.Microseconds())/1000, "first-ms")
}

// BenchmarkFieldReaders times a field walk over the same component. The
// synthetic graph has no column lineage, so the field is carried along
// every edge to every asset: the worst case for the walk's per-asset name
// sets.
func BenchmarkFieldReaders(b *testing.B) {
	benchGraph(b)
	ctx := context.Background()
	g := New(bench.db, clock.NewFake(lineagetest.StoryTime))
	if _, err := g.FieldReaders(ctx, "bench://a1", []string{"amount"}, MaxWalkDepth); err != nil {
		b.Fatal(err)
	}
	adj := floorAdjacency()
	per := againstFloor(b, adj, func() error {
		_, err := g.FieldReaders(ctx, "bench://a1", []string{"amount"}, MaxWalkDepth)
		return err
	})
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/walk")
}
