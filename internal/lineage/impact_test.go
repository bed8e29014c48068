package lineage

import (
	"context"
	"testing"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestImpactGroupsOwnersAndCriticalJobs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g, _ := newGraph(t, db)
		billingReaders(t, g)
		ctx := context.Background()
		if _, err := g.RecordLineage(ctx, Note{Assets: []NoteAsset{{ID: "duckdb://usage.scratch", Kind: "table"}},
			Edges: []NoteEdge{{From: "duckdb://usage.usage_hourly", To: "duckdb://usage.scratch"}}}); err != nil {
			t.Fatal(err)
		}
		imp, err := g.Impact(ctx, "schema://api-usage-value", nil)
		if err != nil {
			t.Fatal(err)
		}
		if imp.Asset != "schema://api-usage-value" || imp.Total != 5 || imp.Partial {
			t.Fatalf("impact = %+v", imp)
		}
		if imp.CountsByKind["report"] != 1 || imp.CountsByKind["stream_job"] != 1 {
			t.Errorf("counts = %v", imp.CountsByKind)
		}
		owners := map[string][]string{}
		for i, o := range imp.Owners {
			owners[o.Owner] = o.Assets
			if i > 0 && len(imp.Owners[i-1].Assets) < len(o.Assets) {
				t.Errorf("owners not most assets first: %+v", imp.Owners)
			}
		}
		if len(owners["finance"]) != 1 || owners["finance"][0] != "sigma://billing-report" || len(owners["data-eng"]) != 1 {
			t.Errorf("owners = %+v", imp.Owners)
		}
		unowned := map[string]bool{}
		for _, a := range imp.Unowned {
			unowned[a] = true
		}
		if !unowned["duckdb://usage.scratch"] || !unowned["kafka://prod/api-usage"] || len(imp.Unowned) != 2 {
			t.Errorf("unowned = %v", imp.Unowned)
		}
		if len(imp.Outbound) != 1 || imp.Outbound[0].Asset != "sigma://billing-report" || imp.Outbound[0].NextRun == "" ||
			len(imp.Outbound[0].Critical) != 1 || imp.Outbound[0].Critical[0] != "money" {
			t.Errorf("outbound = %+v", imp.Outbound)
		}

		// Only what reads egress_bytes of the table: the report, not the
		// scratch table's whole-asset edge narrowed away.
		imp, err = g.Impact(ctx, "duckdb://usage.usage_hourly", []string{"egress_bytes"})
		if err != nil {
			t.Fatal(err)
		}
		if len(imp.Fields) != 1 || imp.Fields[0] != "egress_bytes" || imp.CountsByKind["report"] != 1 {
			t.Errorf("narrowed impact = %+v", imp)
		}

		if _, err := g.Impact(ctx, "kafka://prod/no-such-topic", nil); err == nil {
			t.Error("an unknown asset should be an error naming it")
		}
	})
}
