package ingest

// The store-only helpers are in lineagetest; these few need the Graph and
// repeat lineage's own (its in-package tests cannot import a package that
// imports lineage).

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
)

func newGraph(t *testing.T, db *store.DB) (*lineage.Graph, *clock.Fake) {
	t.Helper()
	c := clock.NewFake(lineagetest.StoryTime)
	return lineage.New(db, c), c
}

func fixture(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", rel))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	return b
}

func neighborIDs(ns []lineage.Neighbor) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Asset.ID
	}
	return out
}

func mustLineage(t *testing.T, g *lineage.Graph, asset string) *lineage.LineageResult {
	t.Helper()
	res, err := g.GetLineage(context.Background(), lineage.LineageParams{Asset: asset})
	if err != nil {
		t.Fatalf("GetLineage(%s): %v", asset, err)
	}
	return res
}

func edgeCols(t *testing.T, g *lineage.Graph, from, to string) ([]lineage.ColumnMapping, bool) {
	t.Helper()
	for _, n := range mustLineage(t, g, from).Downstream {
		if n.Edge.To == to {
			return n.Edge.Columns, true
		}
	}
	return nil, false
}
