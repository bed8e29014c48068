package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// modelsAt is a v12 manifest of project p's models, each building the
// table db.s.<alias> given for it.
func modelsAt(t *testing.T, aliases map[string]string) []byte {
	t.Helper()
	nodes := map[string]any{}
	for m, alias := range aliases {
		id := "model.p." + m
		nodes[id] = map[string]any{"unique_id": id, "resource_type": "model", "name": m, "database": "db", "schema": "s", "alias": alias}
	}
	doc, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json", "adapter_type": "postgres", "project_name": "p"},
		"nodes":    nodes, "sources": map[string]any{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestModelsMergedByATableThatChangedHandsAreNamed: two models that trade
// tables become one asset (the graph cannot yet tell a table that changed
// hands from two spellings of one; docs/ASSET_IDS.md), and so does a new
// model taking another's table; the import says so in its warnings, one
// per merge or join, naming both. A model joining a table another tool
// recorded is the graph working as meant and warns nothing, nor does
// importing the same manifest again, nor a note that says two dbt ids are
// one asset.
func TestModelsMergedByATableThatChangedHandsAreNamed(t *testing.T) {
	merged := func(dropped, kept string) string {
		return fmt.Sprintf("%s and %s are now one asset, %s: a table one of them builds was recorded for the other "+
			"(as when two models trade tables); docs/ASSET_IDS.md, \"A table that changes hands\"", dropped, kept, kept)
	}
	joined := func(node, as string) string {
		return fmt.Sprintf("%s is recorded as %s, which builds the same table: a model renamed, or a table that changed hands "+
			"(then the two models are one asset now); docs/ASSET_IDS.md, \"A table that changes hands\"", node, as)
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		// A note records a table and the dashboard reading it before any
		// model is said to build it.
		if _, err := g.RecordLineage(ctx, lineage.Note{Path: []string{"postgres://db.s.t9", "looker://dashboards/42"}}); err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			aliases       map[string]string
			merged        int
			warnings      []string
			sameAsset     [][2]string
			separateAsset [][2]string
		}{
			{aliases: map[string]string{"a": "t1", "b": "t2", "c": "t8"},
				separateAsset: [][2]string{{"dbt://model.p.a", "dbt://model.p.b"}}},
			// c moves onto the table the note recorded: one asset, as meant.
			{aliases: map[string]string{"a": "t1", "b": "t2", "c": "t9"}, merged: 1,
				sameAsset: [][2]string{{"dbt://model.p.c", "postgres://db.s.t9"}}},
			// a and b swap tables: merged, and said.
			{aliases: map[string]string{"a": "t2", "b": "t1", "c": "t9"}, merged: 1,
				warnings:  []string{merged("dbt://model.p.b", "dbt://model.p.a")},
				sameAsset: [][2]string{{"dbt://model.p.a", "dbt://model.p.b"}}},
			// A new model takes c's table (c moves to a blue one): no merge,
			// the new model joins c's asset, and that is said too.
			{aliases: map[string]string{"a": "t2", "b": "t1", "c": "t9_blue", "green": "t9"},
				warnings:  []string{joined("dbt://model.p.green", "dbt://model.p.c")},
				sameAsset: [][2]string{{"dbt://model.p.green", "dbt://model.p.c"}}},
		}
		for i, s := range steps {
			doc := modelsAt(t, s.aliases)
			for again := range 2 {
				res, err := DBTManifest(ctx, g, bytes.NewReader(doc), DBTOptions{})
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				wantMerged, warnings := s.merged, s.warnings
				if again == 1 {
					wantMerged, warnings = 0, nil
				}
				if res.AssetsMerged != wantMerged || res.WarningsTotal != len(warnings) || !slices.Equal(res.Warnings, warnings) {
					t.Errorf("step %d (import %d): merged %d, warnings %q; want %d and %q", i, again+1, res.AssetsMerged, res.Warnings, wantMerged, warnings)
				}
			}
			for _, pair := range append(s.sameAsset, s.separateAsset...) {
				x, err := g.Resolve(ctx, pair[0])
				if err != nil {
					t.Fatal(err)
				}
				y, err := g.Resolve(ctx, pair[1])
				if err != nil {
					t.Fatal(err)
				}
				if same := slices.Contains(s.sameAsset, pair); (x == y) != same {
					t.Errorf("step %d: %s is %s and %s is %s; want one asset: %v", i, pair[0], x, pair[1], y, same)
				}
			}
		}
		// A note saying two dbt ids are one asset is a person's word, not a
		// table changing hands: merged as asked, and nothing to warn of.
		res, err := g.RecordLineage(ctx, lineage.Note{Assets: []lineage.NoteAsset{{ID: "dbt://model.p.b", Aliases: []string{"dbt://model.p.c"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.AssetsMerged != 1 || res.WarningsTotal != 0 {
			t.Errorf("a note joining two dbt ids: merged %d, warnings %q; want 1 and none", res.AssetsMerged, res.Warnings)
		}
	})
}
