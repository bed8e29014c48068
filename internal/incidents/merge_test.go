package incidents

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestSiblingOutputsJoinOneIncident: a pipeline writes its table and a
// dead-letter table beside it; symptoms on both are one incident, while a
// table of another pipeline opens its own.
func TestSiblingOutputsJoinOneIncident(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g := newMemGraph()
		g.chain("kafka://prod/orders", "dagster://job/orders_loader", "duckdb://wh.sales.orders")
		g.edge("dagster://job/orders_loader", "duckdb://wh.sales.orders_dead_letter")
		g.chain("kafka://prod/clicks", "dagster://job/clicks_loader", "duckdb://wh.web.clicks")
		s, _ := newService(t, db, tue(12, 0), g)
		first := mustReport(t, s, Symptom{Kind: SymptomVolume, Asset: "duckdb://wh.sales.orders", Observed: 10, At: tue(9, 0)})
		dlq := mustReport(t, s, Symptom{Kind: SymptomVolume, Asset: "duckdb://wh.sales.orders_dead_letter", Observed: 9000, At: tue(9, 0)})
		other := mustReport(t, s, Symptom{Kind: SymptomVolume, Asset: "duckdb://wh.web.clicks", Observed: 1, At: tue(9, 0)})
		if dlq.Incidents[0].Opened || dlq.Incidents[0].ID != first.Incidents[0].ID {
			t.Fatalf("dead-letter table opened or joined %+v, want %s", dlq.Incidents[0], first.Incidents[0].ID)
		}
		if !other.Incidents[0].Opened {
			t.Fatalf("another pipeline's table joined %+v", other.Incidents[0])
		}
		// A dead-letter table lineage does not know joins by its name;
		// a table merely named alike does not.
		dlt := mustReport(t, s, Symptom{Kind: SymptomVolume, Asset: "duckdb://wh.web.clicks_dlq", Observed: 500, At: tue(9, 0)})
		if dlt.Incidents[0].Opened || dlt.Incidents[0].ID != other.Incidents[0].ID {
			t.Fatalf("clicks_dlq opened or joined %+v, want %s", dlt.Incidents[0], other.Incidents[0].ID)
		}
		alike := mustReport(t, s, Symptom{Kind: SymptomVolume, Asset: "duckdb://wh.web.clicks_daily", Observed: 500, At: tue(9, 0)})
		if !alike.Incidents[0].Opened {
			t.Fatalf("clicks_daily joined %+v", alike.Incidents[0])
		}
	})
}

func TestMergeIncidentsRecordsTheDuplicate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := newService(t, db, tue(12, 0), nil)
		keep := mustReport(t, s, Symptom{Kind: SymptomVolume, Asset: "duckdb://wh.sales.orders", Observed: 10, At: tue(9, 0)}).Incidents[0].ID
		dup := mustReport(t, s, Symptom{Kind: SymptomNulls, Asset: "duckdb://wh.sales.refunds", Column: "order_id", Observed: 0.3, At: tue(8, 0)}).Incidents[0].ID
		third := mustReport(t, s, Symptom{Kind: SymptomVolume, Asset: "duckdb://wh.web.clicks", Observed: 1, At: tue(11, 0)}).Incidents[0].ID
		if _, err := s.Transition(ctx, TransitionParams{IncidentID: third, To: "closed", Note: "false alarm: test traffic"}); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []MergeParams{{Into: keep, From: keep}, {Into: keep, From: "INC-99"}, {Into: third, From: dup},
			{Into: keep, From: third}, {Into: keep, From: dup, Note: "a\x00b"}, {Into: "", From: dup}} {
			if _, err := s.MergeIncidents(ctx, bad); err == nil {
				t.Fatalf("merge %+v accepted", bad)
			}
		}
		clk.Advance(time.Minute)
		inc, err := s.MergeIncidents(ctx, MergeParams{Into: keep, From: dup, Actor: "maria", Note: "refunds are written by the same loader"})
		if err != nil {
			t.Fatal(err)
		}
		if len(inc.Symptoms) != 2 || !inc.Onset.Equal(tue(8, 0)) || !slices.Equal(inc.MergedFrom, []string{dup}) ||
			!slices.Contains(inc.Assets, "duckdb://wh.sales.refunds") || inc.Status != StatusOpen {
			t.Fatalf("kept incident %+v", inc)
		}
		if last := inc.Timeline[len(inc.Timeline)-1]; last.Actor != "maria" || last.From != last.To {
			t.Fatalf("kept timeline %+v", last)
		}
		d, err := s.GetIncident(ctx, dup)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != StatusClosed || d.CloseReason != CloseDuplicate || d.DuplicateOf != keep {
			t.Fatalf("duplicate %s reason %s of %s", d.Status, d.CloseReason, d.DuplicateOf)
		}
		if last := d.Timeline[len(d.Timeline)-1]; last.To != StatusClosed || last.Note != "duplicate of "+keep+": refunds are written by the same loader" {
			t.Fatalf("duplicate timeline %+v", last)
		}
		if c, _ := s.GetIncident(ctx, third); c.CloseReason != CloseDismissed {
			t.Fatalf("dismissed incident's close reason %q", c.CloseReason)
		}
		// Merging twice is refused: the duplicate is closed.
		if _, err := s.MergeIncidents(ctx, MergeParams{Into: keep, From: dup}); err == nil {
			t.Fatal("merged a closed duplicate again")
		}
	})
}
