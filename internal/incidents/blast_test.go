package incidents

import (
	"context"
	"slices"
	"testing"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// A diagnosis comes with what the symptomatic table reaches downstream in
// the context graph, and moves the incident to diagnosed.
func TestDiagnoseWithBlastRadius(t *testing.T) {
	ctx := context.Background()
	db := storetest.SQLite(t)
	clk := clock.NewFake(tue(15, 5))
	g := lineage.New(db, clk)
	if _, err := g.RecordLineage(ctx, lineage.Note{
		Path:   []string{"kafka://prod/api-usage", "snowflake://usage.usage_hourly", "airflow://dag/sync_metered_usage_to_stripe"},
		Assets: []lineage.NoteAsset{{ID: "airflow://dag/sync_metered_usage_to_stripe", Owner: "bob", Tags: []string{"outbound", "money"}}},
	}); err != nil {
		t.Fatal(err)
	}
	s := &Service{DB: db, Clock: clk, Graph: LineageGraph(g)}
	id := mustReport(t, s, Symptom{Kind: SymptomNulls, Asset: "snowflake://usage.usage_hourly", Column: "egress_bytes", Observed: 0.18, At: tue(14, 10)}).Incidents[0].ID
	d, br, err := s.DiagnoseWithBlastRadius(ctx, g, DiagnoseParams{IncidentID: id})
	if err != nil {
		t.Fatal(err)
	}
	if d.IncidentID != id || d.Status != StatusDiagnosed {
		t.Errorf("diagnosis %+v", d)
	}
	reached := make([]string, len(br.Assets))
	for i, a := range br.Assets {
		reached[i] = a.ID
	}
	if !slices.Equal(br.From, []string{"snowflake://usage.usage_hourly"}) || !slices.Equal(reached, []string{"airflow://dag/sync_metered_usage_to_stripe"}) || br.Critical != 1 {
		t.Errorf("blast radius from %v reaches %v (%d critical)", br.From, reached, br.Critical)
	}
	if d, br, err := s.DiagnoseWithBlastRadius(ctx, g, DiagnoseParams{IncidentID: "INC-404"}); err == nil || d != nil || br != nil {
		t.Errorf("unknown incident: %v %v %v", d, br, err)
	}
}
