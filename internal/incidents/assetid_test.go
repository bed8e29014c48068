package incidents_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// One table, any spelling: symptoms reported under the check's name, the
// catalog's and a person's land on one incident under the graph's id, a
// lookup by any spelling finds it, a proposal's targets are stored by the
// same id, and another database's table of the same name stays apart.
func TestIncidentsUseOneIDPerTable(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk, tl := loadBilling(t, db)
		names := lineage.NamesFromConfig(&config.Config{Warehouses: []config.Warehouse{
			{Name: "demo", Kind: "duckdb", Path: "/home/x/demo.duckdb"}, {Name: "lake", Kind: "snowflake", Database: "LAKE"}}})
		g := lineage.New(db, clk)
		svc := &incidents.Service{DB: db, Clock: clk, Graph: incidents.LineageGraph(g, names)}
		// The graph's id for the table (a note named it first, without
		// its database; dbt later added the full name as an alias).
		table, err := g.Resolve(ctx, "duckdb://demo.usage.usage_hourly")
		if err != nil {
			t.Fatal(err)
		}
		hour := tl.Day.Add(14 * time.Hour)
		var opened []string
		for i, spelling := range []string{"duckdb://usage.usage_hourly", `"Usage"."Usage_Hourly"`, "DUCKDB://Demo.Usage.Usage_Hourly", "duckdb://other.usage.usage_hourly"} {
			rep, err := svc.ReportSymptoms(ctx, incidents.ReportParams{Symptoms: []incidents.Symptom{{
				Kind: incidents.SymptomNulls, Asset: spelling, Metric: "null_rate", Column: "egress_bytes",
				Observed: 0.8, At: hour.Add(time.Duration(i) * time.Minute)}}})
			if err != nil {
				t.Fatalf("report on %s: %v", spelling, err)
			}
			opened = append(opened, rep.Incidents[0].ID)
		}
		if opened[1] != opened[0] || opened[2] != opened[0] || opened[3] == opened[0] {
			t.Fatalf("incidents per spelling %v: the first three are one table, the last another database's", opened)
		}
		inc, err := svc.GetIncident(ctx, opened[0])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(inc.Assets, []string{table}) {
			t.Errorf("incident assets %v; want [%s]", inc.Assets, table)
		}
		other, err := svc.GetIncident(ctx, opened[3])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(other.Assets, []string{"duckdb://other.usage.usage_hourly"}) {
			t.Errorf("other database's incident assets %v", other.Assets)
		}
		for _, spelling := range []string{"duckdb://demo.usage.usage_hourly", "duckdb://usage.usage_hourly", "usage.usage_hourly", `"USAGE"."USAGE_HOURLY"`, "usage_hourly", "dbt://source.billing.usage.usage_hourly"} {
			list, _, err := svc.ListIncidents(ctx, incidents.IncidentFilter{Asset: spelling})
			if err != nil {
				t.Fatalf("list by %s: %v", spelling, err)
			}
			if len(list) != 1 || list[0].ID != opened[0] {
				t.Errorf("list by %s = %+v; want only %s", spelling, list, opened[0])
			}
		}
		// A bare name no graph asset has, fitting a table in both
		// configured warehouses, is refused with both named.
		if _, _, err := svc.ListIncidents(ctx, incidents.IncidentFilter{Asset: "crm.no_such_table"}); err == nil {
			t.Error("ambiguous bare name accepted")
		}
		if _, err := svc.Diagnose(ctx, incidents.DiagnoseParams{IncidentID: opened[0]}); err != nil {
			t.Fatal(err)
		}
		d, err := svc.DraftProposal(ctx, incidents.DraftParams{IncidentID: opened[0], Kind: "hold", What: "hold the table's consumers",
			Targets: []string{"usage.usage_hourly", `duckdb://"usage"."usage_hourly"`, "Airflow://dag/sync_metered_usage_to_stripe"}, Undo: "release the hold"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(d.Targets, []string{table, "airflow://dag/sync_metered_usage_to_stripe"}) {
			t.Errorf("draft targets %v", d.Targets)
		}
	})
}
