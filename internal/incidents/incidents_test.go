package incidents

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestSymptomsJoinRelatedIncidentsAndKeepUnrelatedApart(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g := storyAGraph()
		g.chain("flink://points-balance", "bigquery://loyalty.member_balances")
		s, clk := newService(t, db, tue(15, 5), g)

		// Two anomalies at the same moment on unrelated feeds.
		r := mustReport(t, s,
			Symptom{Kind: SymptomNulls, Asset: "snowflake://usage.usage_hourly", Column: "egress_bytes", Observed: 0.18, At: tue(14, 0)},
			Symptom{Kind: SymptomValue, Asset: "bigquery://loyalty.member_balances", Metric: "avg_balance", Observed: 41, At: tue(14, 0)})
		if len(r.Incidents) != 2 || !r.Incidents[0].Opened || !r.Incidents[1].Opened {
			t.Fatalf("unrelated anomalies: %+v", r.Incidents)
		}
		usage, loyalty := r.Incidents[0].ID, r.Incidents[1].ID
		if usage == loyalty {
			t.Fatal("one incident for unrelated feeds")
		}

		// The same asset an hour later joins; the onset stays the earliest.
		r = mustReport(t, s, Symptom{Kind: SymptomNulls, Asset: "snowflake://usage.usage_hourly", Column: "egress_bytes", Observed: 0.31, At: tue(15, 0)})
		if len(r.Incidents) != 1 || r.Incidents[0].ID != usage || r.Incidents[0].Opened {
			t.Fatalf("same asset later: %+v", r.Incidents)
		}
		// A related asset (one hop downstream) joins by lineage.
		r = mustReport(t, s, Symptom{Kind: SymptomValue, Asset: "dbt://model.billing.fct_billable_egress", Metric: "egress_total", Observed: 0, At: tue(15, 0)})
		if r.Incidents[0].ID != usage || !strings.Contains(r.Incidents[0].Reason, "1 hop(s)") {
			t.Fatalf("related asset: %+v", r.Incidents)
		}
		// An earlier symptom moves the onset back.
		mustReport(t, s, Symptom{Kind: SymptomNulls, Asset: "snowflake://usage.usage_hourly", Column: "egress_bytes", Observed: 0.02, At: tue(13, 0)})
		inc, err := s.GetIncident(ctx, usage)
		if err != nil {
			t.Fatal(err)
		}
		if !inc.Onset.Equal(tue(13, 0)) || len(inc.Symptoms) != 4 || len(inc.Assets) != 2 {
			t.Fatalf("incident onset %v symptoms %d assets %v", inc.Onset, len(inc.Symptoms), inc.Assets)
		}
		// Re-reporting the same check and bucket updates rather than duplicates.
		mustReport(t, s, Symptom{Kind: SymptomNulls, Asset: "snowflake://usage.usage_hourly", Column: "egress_bytes", Observed: 0.33, At: tue(15, 0)})
		inc, _ = s.GetIncident(ctx, usage)
		if len(inc.Symptoms) != 4 || inc.Symptoms[2].Kind != SymptomNulls || !inc.Symptoms[2].At.Equal(tue(15, 0)) || inc.Symptoms[2].Observed != 0.33 {
			t.Fatalf("re-reported symptom: %+v", inc.Symptoms)
		}

		// Far outside the window: a new incident, even on the same asset.
		clk.Set(tue(23, 59))
		r = mustReport(t, s, Symptom{Kind: SymptomNulls, Asset: "snowflake://usage.usage_hourly", Column: "egress_bytes", Observed: 0.5, At: tue(23, 0)})
		if !r.Incidents[0].Opened || r.Incidents[0].ID == usage {
			t.Fatalf("symptom 8h after the last joined: %+v", r.Incidents)
		}
		// A closed incident takes no new symptoms.
		if _, err := s.Transition(ctx, TransitionParams{IncidentID: loyalty, To: "closed", Note: "test"}); err != nil {
			t.Fatal(err)
		}
		r = mustReport(t, s, Symptom{Kind: SymptomValue, Asset: "bigquery://loyalty.member_balances", Metric: "avg_balance", Observed: 41, At: tue(15, 0)})
		if r.Incidents[0].ID == loyalty {
			t.Fatal("symptom joined a closed incident")
		}
		list, info, err := s.ListIncidents(ctx, IncidentFilter{Asset: "snowflake://usage.usage_hourly"})
		if err != nil || len(list) != 2 || info.Total != 2 || info.NextCursor != "" {
			t.Fatalf("list by asset: %+v %v", list, err)
		}
	})
}

func TestConcurrentReportsOpenOneIncident(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s, _ := newService(t, db, tue(15, 5), nil)
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.ReportSymptoms(context.Background(), ReportParams{Symptoms: []Symptom{{Kind: SymptomVolume,
					Asset: "duckdb://sales.orders", Metric: "row_count", Observed: float64(i), At: tue(14, i)}}})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		list, _, err := s.ListIncidents(context.Background(), IncidentFilter{})
		if err != nil || len(list) != 1 {
			t.Fatalf("concurrent reports opened %d incidents (%v)", len(list), err)
		}
	})
}

func TestIncidentLifecycleEnforcesTransitions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := newService(t, db, tue(15, 5), storyBGraph())
		id := mustReport(t, s, Symptom{Kind: SymptomValue, Asset: "bigquery://loyalty.member_balances", Metric: "avg_balance", Observed: 41,
			ExpectedLow: 400, ExpectedHigh: 510, At: tue(14, 0)}).Incidents[0].ID
		try := func(to string, want string) {
			t.Helper()
			_, err := s.Transition(ctx, TransitionParams{IncidentID: id, To: to})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("to %s: err = %v; want %q", to, err, want)
			}
		}
		try("approved", "can move to: diagnosed, closed")
		try("verified", "set only by verification")
		try("diagnosed", "run Diagnose")
		try("closed", "give a note")
		try("fixd", "closest: fixing")
		mustRecord(t, s, changelog.RecordChangeParams{At: tue(14, 2), Kind: "restore", System: "flink", Assets: []string{"flink://points-balance"},
			StateSkipped: true, Summary: "restore"})
		if _, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: id}); err != nil {
			t.Fatal(err)
		}
		inc, err := s.MarkProposed(ctx, id, []string{"prop-1", "prop-2", "prop-1"}, "dw-incidents")
		if err != nil {
			t.Fatal(err)
		}
		if inc.Status != StatusProposed || strings.Join(inc.Proposals, ",") != "prop-1,prop-2" {
			t.Fatalf("proposed: %s %v", inc.Status, inc.Proposals)
		}
		try("fixing", "can move to: proposed, approved, diagnosed")
		for _, to := range []string{"approved", "fixing"} {
			clk.Advance(time.Minute)
			if _, err := s.Transition(ctx, TransitionParams{IncidentID: id, To: to, Actor: "maria"}); err != nil {
				t.Fatal(err)
			}
		}
		try("closed", "can move to: verified, escalated")
		inc, err = s.GetIncident(ctx, "inc-"+strings.TrimPrefix(id, "INC-"))
		if err != nil {
			t.Fatal(err)
		}
		var path []string
		for _, e := range inc.Timeline {
			path = append(path, string(e.To))
		}
		if strings.Join(path, ">") != "open>diagnosed>proposed>approved>fixing" {
			t.Fatalf("timeline %v", path)
		}
		if inc.Timeline[3].Actor != "maria" {
			t.Fatalf("actor not recorded: %+v", inc.Timeline[3])
		}
	})
}
