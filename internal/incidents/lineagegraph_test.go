package incidents_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/demo"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/packload"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// Story A on the real context graph: the null spike on the landed table is
// traced to schema version 12 through the statement that sums the field the
// version removed.
func TestDiagnoseOnLineageGraph(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk, tl := loadBilling(t, db)
		svc := &incidents.Service{DB: db, Clock: clk, Graph: incidents.LineageGraph(lineage.New(db, clk))}
		hour := tl.Day.Add(14 * time.Hour)
		rep, err := svc.ReportSymptoms(ctx, incidents.ReportParams{Symptoms: []incidents.Symptom{{
			Kind: incidents.SymptomNulls, Asset: "duckdb://usage.usage_hourly", Metric: "null_rate", Column: "egress_bytes",
			Observed: 0.821, At: hour, Source: "run_quality_check", Detail: "egress_bytes null in 82% of rows at 14:00 (0% in every earlier check)",
		}}})
		if err != nil {
			t.Fatal(err)
		}
		id := rep.Incidents[0].ID
		// The same table under its canonical id joins the incident.
		rep, err = svc.ReportSymptoms(ctx, incidents.ReportParams{Symptoms: []incidents.Symptom{{
			Kind: incidents.SymptomNulls, Asset: "duckdb://demo.usage.usage_hourly", Metric: "null_rate", Column: "egress_bytes",
			Observed: 0.85, At: hour.Add(time.Hour), Source: "run_quality_check",
		}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.Incidents[0]; got.ID != id || got.Opened {
			t.Errorf("second symptom went to %+v, want it to join %s", got, id)
		}

		d, err := svc.Diagnose(ctx, incidents.DiagnoseParams{IncidentID: id})
		if err != nil {
			t.Fatal(err)
		}
		top := d.Causes[0]
		if top.Change.Kind != changelog.ChangeSchemaVersion || top.Relation != incidents.RelationUpstream || top.Distance != 4 {
			t.Fatalf("top cause %s (%s, %s, distance %d), want the schema version 4 hops upstream:\n%s",
				top.Change.Summary, top.Change.Kind, top.Relation, top.Distance, d.Summary)
		}
		if !slices.Equal(top.Readers, []string{"flink://usage-hourly-rollup"}) || top.Factors.Fields != 1 {
			t.Errorf("readers %v, fields factor %v; want the rollup statement read as evidence", top.Readers, top.Factors.Fields)
		}
		if top.Path[0] != "schema://api-usage-value" || !strings.HasPrefix(top.Path[len(top.Path)-1], "duckdb://") {
			t.Errorf("path %v should run from the subject to the table", top.Path)
		}
		ev := strings.Join(top.Evidence, "\n")
		for _, want := range []string{
			"flink://usage-hourly-rollup reads response_bytes from kafka://prod/api-usage (recorded SQL: COUNT(response_bytes), SUM(response_bytes))",
			"is 4 hop(s) upstream of duckdb://",
			"where egress_bytes",
		} {
			if !strings.Contains(ev, want) {
				t.Errorf("evidence lacks %q:\n%s", want, ev)
			}
		}
	})
}

// loadBilling loads the billing pack (story A) into db with the demo as
// its domain owner, on a fake clock at its incident day's afternoon.
func loadBilling(t *testing.T, db *store.DB) (*clock.Fake, demo.Instants) {
	t.Helper()
	now := time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)
	clk := clock.NewFake(now)
	pack, tl, err := packload.Read("billing", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := packload.LoadStore(context.Background(), db, clk, pack, "demo"); err != nil {
		t.Fatal(err)
	}
	return clk, tl
}
