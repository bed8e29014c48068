package incidents

import (
	"context"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// fixingIncident drives story A's incident to fixing and returns its id.
func fixingIncident(t *testing.T, s *Service) string {
	t.Helper()
	ctx := context.Background()
	mustRecord(t, s, schemaV12())
	id := mustReport(t, s,
		Symptom{Kind: SymptomNulls, Asset: "snowflake://usage.usage_hourly", Column: "egress_bytes", Metric: "null_rate", Observed: 0.06, At: tue(14, 0)},
		Symptom{Kind: SymptomNulls, Asset: "snowflake://usage.usage_hourly", Column: "egress_bytes", Metric: "null_rate", Observed: 0.18, At: tue(15, 0)},
	).Incidents[0].ID
	if _, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkProposed(ctx, id, []string{"p1"}, ""); err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{"approved", "fixing"} {
		if _, err := s.Transition(ctx, TransitionParams{IncidentID: id, To: to}); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

func TestVerifyAllPassVerifies(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := newService(t, db, tue(18, 0), storyAGraph())
		id := fixingIncident(t, s)
		as, err := s.Assertions(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(as) != 1 || as[0].Name != "nulls:snowflake://usage.usage_hourly:egress_bytes:null_rate" || !as[0].Since.Equal(tue(14, 0)) {
			t.Fatalf("assertions %+v", as)
		}
		v, err := s.Verify(ctx, VerifyParams{IncidentID: id, Results: []CheckResult{
			{Name: as[0].Name, Passed: true, Observed: "0 null rows in any hour since 00:00", Expected: "0"},
			{Name: "uniqueness:usage_id", Passed: true},
			{Name: "volume", Passed: true},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if !v.Verified || len(v.Failures) != 0 || len(v.Missing) != 0 {
			t.Fatalf("verification %+v", v)
		}
		inc, _ := s.GetIncident(ctx, id)
		if inc.Status != StatusVerified || inc.VerifiedAt.IsZero() || inc.Verification == nil || !inc.Verification.Verified || len(inc.Verification.Results) != 3 {
			t.Fatalf("incident after verification: %s %+v", inc.Status, inc.Verification)
		}
		if _, err := s.Transition(ctx, TransitionParams{IncidentID: id, To: "closed"}); err != nil {
			t.Fatalf("close a verified incident: %v", err)
		}
	})
}

func TestVerifyAnyFailureEscalatesNeverVerifies(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := newService(t, db, tue(18, 0), storyAGraph())
		id := fixingIncident(t, s)
		name := "nulls:snowflake://usage.usage_hourly:egress_bytes:null_rate"
		v, err := s.Verify(ctx, VerifyParams{IncidentID: id, Results: []CheckResult{
			{Name: name, Passed: true},
			{Name: "load_lag", Passed: false, Observed: "95 min", Expected: "under 20 min", Detail: "replay still catching up"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if v.Verified || len(v.Failures) != 1 || !strings.Contains(v.Reason, "load_lag failed (observed 95 min, expected under 20 min): replay still catching up") {
			t.Fatalf("verification %+v", v)
		}
		inc, _ := s.GetIncident(ctx, id)
		if inc.Status != StatusEscalated || !inc.VerifiedAt.IsZero() {
			t.Fatalf("status %s verified_at %v", inc.Status, inc.VerifiedAt)
		}
		if last := inc.Timeline[len(inc.Timeline)-1]; last.To != StatusEscalated || !strings.Contains(last.Note, "load_lag failed") {
			t.Fatalf("timeline %+v", last)
		}
		// Verification needs a fix in progress: escalated must go back to fixing first.
		if _, err := s.Verify(ctx, VerifyParams{IncidentID: id, Results: []CheckResult{{Name: name, Passed: true}}}); err == nil || !strings.Contains(err.Error(), "status fixing") {
			t.Fatalf("verify while escalated: %v", err)
		}
		if _, err := s.Transition(ctx, TransitionParams{IncidentID: id, To: "fixing"}); err != nil {
			t.Fatal(err)
		}
		// Results that leave out an assertion that fired do not verify.
		v, err = s.Verify(ctx, VerifyParams{IncidentID: id, Results: []CheckResult{{Name: "volume", Passed: true}}})
		if err != nil {
			t.Fatal(err)
		}
		if v.Verified || len(v.Missing) != 1 || v.Missing[0] != name {
			t.Fatalf("missing assertion verification %+v", v)
		}
		if _, err := s.Transition(ctx, TransitionParams{IncidentID: id, To: "fixing"}); err != nil {
			t.Fatal(err)
		}
		for _, bad := range [][]CheckResult{nil, {{Name: ""}}, {{Name: "a", Passed: true}, {Name: "a", Passed: true}}} {
			if _, err := s.Verify(ctx, VerifyParams{IncidentID: id, Results: bad}); err == nil {
				t.Fatalf("results %+v accepted", bad)
			}
		}
		inc, _ = s.GetIncident(ctx, id)
		if inc.Status != StatusFixing {
			t.Fatalf("refused verification changed the status to %s", inc.Status)
		}
	})
}

func TestJudgeRule(t *testing.T) {
	as := []Assertion{{Name: "a"}, {Name: "b"}}
	if v := judge(as, []CheckResult{{Name: "a", Passed: true}, {Name: "b", Passed: true}}, tue(1, 0)); !v.Verified {
		t.Fatalf("all pass: %+v", v)
	}
	if v := judge(as, []CheckResult{{Name: "a", Passed: true}, {Name: "b", Passed: false}}, tue(1, 0)); v.Verified {
		t.Fatal("a failure verified")
	}
	if v := judge(as, []CheckResult{{Name: "a", Passed: true}}, tue(1, 0)); v.Verified {
		t.Fatal("a missing assertion verified")
	}
	if v := judge(nil, nil, tue(1, 0)); v.Verified {
		t.Fatal("no evidence verified")
	}
}
