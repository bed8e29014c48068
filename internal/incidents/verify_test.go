package incidents

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
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
	as := []Assertion{{Name: "a", Asset: "t1"}, {Name: "b", Asset: "t1"}}
	assets := []string{"t1"}
	if v := judge(as, assets, []CheckResult{{Name: "a", Passed: true}, {Name: "b", Passed: true}}, tue(1, 0)); !v.Verified || v.Outcome != OutcomeVerified {
		t.Fatalf("all pass: %+v", v)
	}
	if v := judge(as, assets, []CheckResult{{Name: "a", Passed: true}, {Name: "b", Passed: false}}, tue(1, 0)); v.Verified || v.Outcome != OutcomeEscalated {
		t.Fatal("a failure verified")
	}
	if v := judge(as, assets, []CheckResult{{Name: "a", Passed: true}}, tue(1, 0)); v.Verified || v.Outcome != OutcomeEscalated {
		t.Fatal("a missing assertion verified")
	}
	if v := judge(nil, nil, nil, tue(1, 0)); v.Verified {
		t.Fatal("no evidence verified")
	}
	// An assertion re-run with too little history to judge is neither a
	// pass nor a failure: not verifiable yet, saying which.
	v := judge(as, assets, []CheckResult{{Name: "a", Passed: true}, {Name: "b", NotJudged: true, Observed: "row_count learning"}}, tue(1, 0))
	if v.Verified || v.Outcome != OutcomeNotVerifiable || len(v.Failures) != 0 || len(v.Unjudged) != 1 || !strings.Contains(v.Unjudged[0], "b was re-run but not judged") {
		t.Fatalf("not judged: %+v", v)
	}
	// A failure beside it still escalates.
	if v := judge(as, assets, []CheckResult{{Name: "a", Passed: false}, {Name: "b", NotJudged: true}}, tue(1, 0)); v.Outcome != OutcomeEscalated {
		t.Fatalf("failure and not judged: %+v", v)
	}
}

// TestJudgeNeedsAJudgedCheckOnEverySymptomaticAsset: results generated at
// random over several assets verify only when every symptomatic asset has
// a passing result, whatever their order; an asset whose only results are
// scope checks on other assets is "not verifiable yet", never verified.
func TestJudgeNeedsAJudgedCheckOnEverySymptomaticAsset(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := 0; trial < 200; trial++ {
		nAssets := 1 + rng.IntN(4)
		var assets []string
		var results []CheckResult
		var as []Assertion
		covered := map[string]bool{}
		for i := 0; i < nAssets; i++ {
			a := fmt.Sprintf("duckdb://wh.s.t%d", i)
			assets = append(assets, a)
			// Each asset gets 0-3 scope results, all passing, some of them
			// speaking for it.
			for j := 0; j < rng.IntN(4); j++ {
				r := CheckResult{Name: fmt.Sprintf("check %d on %s", j, a), Passed: true}
				if rng.IntN(2) == 0 {
					r.Asset = a
					covered[a] = true
				}
				results = append(results, r)
			}
		}
		want := OutcomeVerified
		for _, a := range assets {
			if !covered[a] {
				want = OutcomeNotVerifiable
			}
		}
		if len(results) == 0 {
			want = OutcomeEscalated
		}
		var first *Verification
		for perm := 0; perm < 3; perm++ {
			rng.Shuffle(len(results), func(i, j int) { results[i], results[j] = results[j], results[i] })
			v := judge(as, assets, results, tue(1, 0))
			if v.Outcome != want || v.Verified != (want == OutcomeVerified) {
				t.Fatalf("trial %d: outcome %s, want %s: %+v", trial, v.Outcome, want, v)
			}
			if want == OutcomeNotVerifiable && len(v.Unjudged) == 0 {
				t.Fatalf("trial %d: not verifiable without saying what is missing", trial)
			}
			if first != nil && (first.Outcome != v.Outcome || !slices.Equal(first.Unjudged, v.Unjudged)) {
				t.Fatalf("trial %d: order changed the verdict: %+v vs %+v", trial, first, v)
			}
			first = v
		}
	}
}

func TestVerifyNotVerifiableYetKeepsTheIncidentFixing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := newService(t, db, tue(18, 0), storyAGraph())
		id := fixingIncident(t, s)
		// Nothing failed, but the only passing checks speak for another
		// table: the symptomatic one was not judged.
		v, err := s.Verify(ctx, VerifyParams{IncidentID: id, Results: []CheckResult{
			{Name: "nulls:snowflake://usage.usage_hourly:egress_bytes:null_rate", Passed: true, Asset: "snowflake://other.table"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if v.Verified || v.Outcome != OutcomeNotVerifiable || len(v.Unjudged) != 1 || !strings.HasPrefix(v.Unjudged[0], "snowflake://usage.usage_hourly:") {
			t.Fatalf("verification %+v", v)
		}
		inc, _ := s.GetIncident(ctx, id)
		if inc.Status != StatusFixing || inc.Verification == nil || inc.Verification.Outcome != OutcomeNotVerifiable {
			t.Fatalf("incident %s %+v", inc.Status, inc.Verification)
		}
	})
}

// proposedIncident drives story A's incident to proposed and returns its id.
func proposedIncident(t *testing.T, s *Service) string {
	t.Helper()
	ctx := context.Background()
	mustRecord(t, s, schemaV12())
	id := mustReport(t, s,
		Symptom{Kind: SymptomNulls, Asset: "snowflake://usage.usage_hourly", Column: "egress_bytes", Metric: "null_rate", Observed: 0.18, At: tue(14, 0)},
	).Incidents[0].ID
	if _, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkProposed(ctx, id, []string{"p1"}, ""); err != nil {
		t.Fatal(err)
	}
	return id
}

// RecordFix moves a proposed incident through approved and fixing and
// records the verdict in one transaction with what the caller writes: when
// the caller's write fails, nothing of it stays (status, timeline,
// verification); when it succeeds, the timeline reads approved, fixing,
// verified with each note, and the caller saw the verified incident.
func TestRecordFixIsAllOrNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := newService(t, db, tue(18, 0), storyAGraph())
		id := proposedIncident(t, s)
		before, err := s.GetIncident(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		as, _ := s.Assertions(ctx, id)
		results := func() []CheckResult { return []CheckResult{{Name: as[0].Name, Passed: true, Observed: "0 null rows"}} }
		boom := fmt.Errorf("receipt store unavailable")
		_, _, err = s.RecordFix(ctx, FixParams{IncidentID: id, Results: results(), ApprovedNote: "p1 approved by bea", FixingNote: "replayed",
			Record: func(tx *store.Tx, inc *Incident, v *Verification) error {
				if inc.Status != StatusVerified || !v.Verified {
					t.Errorf("the caller saw %s / %v, want the verified incident", inc.Status, v.Verified)
				}
				return boom
			}})
		if err == nil || !strings.Contains(err.Error(), boom.Error()) {
			t.Fatalf("err %v, want the caller's", err)
		}
		after, err := s.GetIncident(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if after.Status != StatusProposed || after.Verification != nil || len(after.Timeline) != len(before.Timeline) {
			t.Fatalf("a failed record left status %s, verification %v, %d timeline events (was %d)", after.Status, after.Verification, len(after.Timeline), len(before.Timeline))
		}

		recorded := false
		inc, v, err := s.RecordFix(ctx, FixParams{IncidentID: id, Results: results(), Actor: "dw-incidents", ApprovedNote: "p1 approved by bea",
			FixingNote: "replayed", Record: func(tx *store.Tx, inc *Incident, v *Verification) error { recorded = true; return nil }})
		if err != nil || !recorded || !v.Verified || inc.Status != StatusVerified {
			t.Fatalf("RecordFix: %v recorded=%v %+v", err, recorded, v)
		}
		got, _ := s.GetIncident(ctx, id)
		tl := got.Timeline[len(before.Timeline):]
		var steps []string
		for _, e := range tl {
			steps = append(steps, fmt.Sprintf("%s>%s:%s", e.From, e.To, e.Note))
		}
		want := []string{"proposed>approved:p1 approved by bea", "approved>fixing:replayed", "fixing>verified:" + v.Reason}
		if !slices.Equal(steps, want) {
			t.Errorf("timeline %q, want %q", steps, want)
		}
		// Verified is final for verification: a second record is refused.
		if _, _, err := s.RecordFix(ctx, FixParams{IncidentID: id, Results: results()}); err == nil {
			t.Error("recording a fix of a verified incident was accepted")
		}
	})
}
