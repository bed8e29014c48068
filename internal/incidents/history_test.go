package incidents

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestHistoryOfAFeed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		week := 7 * 24 * time.Hour
		s, clk := newService(t, db, tue(14, 0).Add(-2*week), storyBGraph())
		// Two weeks ago and last week: a restore that skipped state, each
		// caught 65 minutes after the onset; the first verified after 3h.
		var ids []string
		for i, ago := range []time.Duration{2 * week, week} {
			clk.Set(tue(15, 5).Add(-ago))
			mustRecord(t, s, changelog.RecordChangeParams{At: tue(14, 2).Add(-ago), Kind: "restore", System: "flink",
				Assets: []string{"flink://points-balance"}, StateSkipped: true, Summary: "restore " + string(rune('A'+i))})
			id := mustReport(t, s, Symptom{Kind: SymptomValue, Asset: "bigquery://loyalty.member_balances", Metric: "avg_balance",
				Observed: 12, At: tue(14, 0).Add(-ago)}).Incidents[0].ID
			if _, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: id}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		clk.Set(tue(15, 5).Add(-2 * week))
		if _, err := s.MarkProposed(ctx, ids[0], []string{"p"}, ""); err != nil {
			t.Fatal(err)
		}
		for _, to := range []string{"approved", "fixing"} {
			if _, err := s.Transition(ctx, TransitionParams{IncidentID: ids[0], To: to}); err != nil {
				t.Fatal(err)
			}
		}
		clk.Set(tue(18, 5).Add(-2 * week))
		if _, err := s.Verify(ctx, VerifyParams{IncidentID: ids[0], Results: []CheckResult{{Name: "value:bigquery://loyalty.member_balances:avg_balance", Passed: true}}}); err != nil {
			t.Fatal(err)
		}
		// A freshness incident on a downstream model, and one on an unrelated table.
		clk.Set(tue(9, 0))
		mustReport(t, s, Symptom{Kind: SymptomFreshness, Asset: "dbt://model.loyalty.fct_member_tier", Observed: 7200, At: tue(8, 0)})
		mustReport(t, s, Symptom{Kind: SymptomFreshness, Asset: "duckdb://web.clicks", Observed: 7200, At: tue(8, 0)})

		h, err := s.History(ctx, HistoryParams{Asset: "bigquery://loyalty.member_balances"})
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Incidents) != 3 {
			t.Fatalf("history has %d incidents: %+v", len(h.Incidents), h.Incidents)
		}
		newest, oldest := h.Incidents[0], h.Incidents[2]
		if newest.Relation != RelationDownstream || newest.Distance != 1 || newest.TopCause != nil {
			t.Fatalf("downstream incident %+v", newest)
		}
		if oldest.ID != ids[0] || oldest.DetectSeconds != 65*60 || oldest.ResolveSeconds != 3*3600 || oldest.TimeToResolve != "3h" || oldest.Status != StatusVerified {
			t.Fatalf("oldest incident %+v", oldest)
		}
		if oldest.TopCause == nil || oldest.TopCause.Kind != changelog.ChangeRestore || oldest.TopCause.Asset != "flink://points-balance" || !oldest.CauseRecurs {
			t.Fatalf("oldest cause %+v", oldest.TopCause)
		}
		if h.Incidents[1].TimeToResolve != "unresolved" || h.Incidents[1].ResolveSeconds != 0 {
			t.Fatalf("unresolved incident %+v", h.Incidents[1])
		}
		if len(h.Recurring) != 1 || h.Recurring[0].Count != 2 || strings.Join(h.Recurring[0].Incidents, ",") != strings.Join(ids, ",") {
			t.Fatalf("recurring %+v", h.Recurring)
		}
		if !strings.Contains(h.Summary, "restore on flink://points-balance recurs (2 times") {
			t.Fatalf("summary %q", h.Summary)
		}
		// One hop: still sees the downstream model; zero history elsewhere.
		other, err := s.History(ctx, HistoryParams{Asset: "kafka://prod/unknown"})
		if err != nil || len(other.Incidents) != 0 || other.Incidents == nil || other.Recurring == nil {
			t.Fatalf("empty history %+v %v", other, err)
		}
		if _, err := s.History(ctx, HistoryParams{Asset: "x", Hops: 99}); err == nil {
			t.Fatal("hops 99 accepted")
		}
	})
}
