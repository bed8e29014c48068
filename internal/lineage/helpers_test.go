package lineage

// The helpers that need only the store (row counts, the graph dump, bulk
// loading, the story's clock) are in lineagetest, shared with ingest's
// tests; these need the Graph, which lineagetest cannot import.

import (
	"context"
	"testing"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
)

func newGraph(t *testing.T, db *store.DB) (*Graph, *clock.Fake) {
	t.Helper()
	c := clock.NewFake(lineagetest.StoryTime)
	return New(db, c), c
}

func neighborIDs(ns []Neighbor) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Asset.ID
	}
	return out
}

func mustLineage(t *testing.T, g *Graph, asset string) *LineageResult {
	t.Helper()
	res, err := g.GetLineage(context.Background(), LineageParams{Asset: asset})
	if err != nil {
		t.Fatalf("GetLineage(%s): %v", asset, err)
	}
	return res
}

func edgeCols(t *testing.T, g *Graph, from, to string) ([]ColumnMapping, bool) {
	t.Helper()
	for _, n := range mustLineage(t, g, from).Downstream {
		if n.Edge.To == to {
			return n.Edge.Columns, true
		}
	}
	return nil, false
}
