package remediate

import (
	"fmt"
	"testing"

	"github.com/dataworkers/dw/internal/incidents"
)

// A verification of thousands of re-runs lists its failures first, within
// the count, and keeps every total.
func TestVerificationAnswerListsFailuresFirst(t *testing.T) {
	r := &Result{Verification: &incidents.Verification{}}
	for i := range 3000 {
		// The failures are the last ones re-run.
		r.Assertions = append(r.Assertions, AssertionResult{Name: fmt.Sprintf("a%04d", i), Passed: i < 2990})
		r.Checks = append(r.Checks, incidents.CheckResult{Name: fmt.Sprintf("c%04d", i), Passed: i < 2990})
		r.Notes = append(r.Notes, fmt.Sprintf("note %d", i))
		r.Verification.Unjudged = append(r.Verification.Unjudged, fmt.Sprintf("asset %d", i))
	}
	r.bound()
	if r.AssertionsTotal != 3000 || r.ChecksTotal != 3000 || r.NotesTotal != 3000 || r.UnjudgedTotal != 3000 {
		t.Fatalf("totals %d %d %d %d", r.AssertionsTotal, r.ChecksTotal, r.NotesTotal, r.UnjudgedTotal)
	}
	if len(r.Assertions) != listedResults || len(r.Checks) != listedResults || len(r.Notes) != listedNotes || len(r.Verification.Unjudged) != listedNotes {
		t.Fatalf("listed %d assertions, %d checks, %d notes, %d unjudged", len(r.Assertions), len(r.Checks), len(r.Notes), len(r.Verification.Unjudged))
	}
	for i := range 10 {
		if r.Assertions[i].Passed || r.Checks[i].Passed {
			t.Fatalf("item %d of the answer passed; the 10 failures come first", i)
		}
	}
	if r.Assertions[0].Name != "a2990" || r.Assertions[10].Name != "a0000" {
		t.Errorf("order within failures and passes not kept: %s, %s", r.Assertions[0].Name, r.Assertions[10].Name)
	}
}
