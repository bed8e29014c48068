package lineage

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func exposureManifest(t *testing.T) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v11.json", "adapter_type": "duckdb", "project_name": "shop"},
		"nodes": map[string]any{"model.shop.orders": map[string]any{
			"unique_id": "model.shop.orders", "resource_type": "model", "name": "orders",
			"database": "warehouse", "schema": "sales", "alias": "orders", "relation_name": `"warehouse"."sales"."orders"`,
		}},
		"sources": map[string]any{},
		"exposures": map[string]any{
			"exposure.shop.revenue": map[string]any{"unique_id": "exposure.shop.revenue", "resource_type": "exposure", "name": "revenue", "type": "dashboard",
				"owner": map[string]any{"name": "bi", "email": "bi@example.com"}, "depends_on": map[string]any{"nodes": []string{"model.shop.orders"}}},
			"exposure.shop.reorder": map[string]any{"unique_id": "exposure.shop.reorder", "resource_type": "exposure", "name": "reorder", "type": "application",
				"owner": map[string]any{"name": "ops", "email": "ops@example.com"}, "depends_on": map[string]any{"nodes": []string{"model.shop.orders"}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A dashboard or job a team records under its own platform's id keeps that
// id when a dbt exposure declares the same thing, whichever came first.
func TestRecordedIDKeepsItsPlatformOverDBTExposure(t *testing.T) {
	note := Note{Assets: []NoteAsset{
		{ID: "looker://dashboards/42", Title: "Revenue", Aliases: []string{"dbt://exposure.shop.revenue"}},
		{ID: "dagster://shop/reorder_job", Kind: "orchestrator_job", Aliases: []string{"dbt://exposure.shop.reorder"}},
	}}
	for _, noteFirst := range []bool{false, true} {
		// Subtests named apart: a second Each would name its SQLite
		// directory sqlite#01, and OpenSQLite's file: URI cuts at the '#'.
		t.Run(map[bool]string{false: "dbt-first", true: "note-first"}[noteFirst], func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				g, _ := newGraph(t, db)
				importDBT := func() {
					if err := ImportDBTForTest(ctx, g, strings.NewReader(exposureManifest(t))); err != nil {
						t.Fatal(err)
					}
				}
				recordNote := func() {
					if _, err := g.RecordLineage(ctx, note); err != nil {
						t.Fatal(err)
					}
				}
				steps := []func(){importDBT, recordNote}
				if noteFirst {
					steps = []func(){recordNote, importDBT}
				}
				// Repeating both must not take the ids back.
				for _, s := range append(steps, steps...) {
					s()
				}
				for _, c := range []struct{ ref, id, platform string }{
					{"looker://dashboards/42", "looker://dashboards/42", "looker"},
					{"dbt://exposure.shop.revenue", "looker://dashboards/42", "looker"},
					{"dagster://shop/reorder_job", "dagster://shop/reorder_job", "dagster"},
					{"dbt://exposure.shop.reorder", "dagster://shop/reorder_job", "dagster"},
				} {
					l := mustLineage(t, g, c.ref)
					if l.Asset.ID != c.id || l.Asset.Platform != c.platform {
						t.Errorf("noteFirst=%v: GetLineage(%s) = %s on %s; want %s on %s", noteFirst, c.ref, l.Asset.ID, l.Asset.Platform, c.id, c.platform)
					}
					if up := neighborIDs(l.Upstream); !slices.Equal(up, []string{"dbt://model.shop.orders"}) {
						t.Errorf("noteFirst=%v: %s upstream %v", noteFirst, c.ref, up)
					}
				}
				if l := mustLineage(t, g, "dagster://shop/reorder_job"); l.Asset.Kind != KindOrchestratorJob {
					t.Errorf("noteFirst=%v: dagster job kind %s", noteFirst, l.Asset.Kind)
				}
				if l := mustLineage(t, g, "dbt://model.shop.orders"); !slices.Equal(neighborIDs(l.Downstream), []string{"dagster://shop/reorder_job", "looker://dashboards/42"}) {
					t.Errorf("noteFirst=%v: orders downstream %v", noteFirst, neighborIDs(l.Downstream))
				}
			})
		})
	}
}
