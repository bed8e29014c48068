package incidents_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// A table the graph knows by the dbt model that builds it: symptoms under
// every spelling (seeded: quoted, any case, with or without platform and
// database, the model's dbt id) join one incident, recorded under the
// warehouse table, which the domain glob written on the table's name owns;
// the same name in another database is another incident.
func TestDBTBuiltTableIsOneIncident(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		now := time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)
		clk := clock.NewFake(now)
		g := lineage.New(db, clk)
		if _, err := g.RecordLineage(ctx, lineage.Note{Assets: []lineage.NoteAsset{{ID: "dbt://model.shop.orders", Aliases: []string{"duckdb://warehouse.sales.orders"}}},
			Path: []string{"dbt://model.shop.orders", "sigma://workbook/rev"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := g.RecordLineage(ctx, lineage.Note{Path: []string{"duckdb://dev.sales.orders", "dagster://shop/dev_job"}}); err != nil {
			t.Fatal(err)
		}
		cfg := &config.Config{Warehouses: []config.Warehouse{{Name: "wh", Kind: "duckdb", Path: "/x/warehouse.duckdb"}},
			Domains: []config.Domain{{Name: "sales", Assets: []string{"duckdb://sales.*"}}, {Name: "dev", Assets: []string{"duckdb://dev.*.*"}}}}
		ids := lineage.Identities{Graph: g, Names: lineage.NamesFromConfig(cfg)}
		svc := &incidents.Service{DB: db, Clock: clk, Graph: incidents.LineageGraph(g, ids.Names)}

		var opened []string
		spellings := lineagetest.DuckDBSpellings(10, 30, "warehouse", "sales", "orders", "model.shop.orders")
		for i, ref := range spellings {
			rep, err := svc.ReportSymptoms(ctx, incidents.ReportParams{Symptoms: []incidents.Symptom{{Kind: incidents.SymptomVolume, Asset: ref,
				Metric: "row_count", Observed: 80, At: now.Add(-time.Hour + time.Duration(i)*time.Minute)}}})
			if err != nil {
				t.Fatalf("report on %q: %v", ref, err)
			}
			if len(rep.Incidents) != 1 {
				t.Fatalf("report on %q: %+v", ref, rep.Incidents)
			}
			if id := rep.Incidents[0].ID; !slices.Contains(opened, id) {
				opened = append(opened, id)
			}
		}
		if len(opened) != 1 {
			t.Fatalf("%d spellings of one table opened %d incidents: %v", len(spellings), len(opened), opened)
		}
		inc, err := svc.GetIncident(ctx, opened[0])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(inc.Assets, []string{"duckdb://warehouse.sales.orders"}) {
			t.Fatalf("incident on %v, want the warehouse table", inc.Assets)
		}
		for _, s := range inc.Symptoms {
			if s.Asset != inc.Assets[0] {
				t.Errorf("symptom stored under %s", s.Asset)
			}
		}
		for _, a := range inc.Assets {
			if d, ok, err := approvals.DomainOf(ctx, cfg, ids, a); err != nil || !ok || d.Name != "sales" {
				t.Errorf("the incident's asset %s is in domain %v (%v), want sales", a, d, err)
			}
		}

		rep, err := svc.ReportSymptoms(ctx, incidents.ReportParams{Symptoms: []incidents.Symptom{{Kind: incidents.SymptomVolume,
			Asset: "duckdb://dev.sales.orders", Metric: "row_count", Observed: 80, At: now.Add(-time.Hour)}}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Incidents[0].ID == opened[0] {
			t.Fatalf("the dev table's symptom joined the warehouse table's incident %s", opened[0])
		}
		dev, err := svc.GetIncident(ctx, rep.Incidents[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok, _ := approvals.DomainOf(ctx, cfg, ids, dev.Assets[0]); !slices.Equal(dev.Assets, []string{"duckdb://dev.sales.orders"}) || !ok || d.Name != "dev" {
			t.Errorf("dev incident on %v in domain %v", dev.Assets, d)
		}
	})
}
