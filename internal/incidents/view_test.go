package incidents

import (
	"context"
	"testing"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// A view follows the incident through its life: the next step at each
// status, and while proposed, the proposals still waiting by id and
// approver; once every one is decided it says so.
func TestViewFollowsTheIncident(t *testing.T) {
	ctx := context.Background()
	db := storetest.SQLite(t)
	s, apv, id := diagnosedIncident(t, db)
	v, err := s.View(ctx, apv, id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Incident.ID != id || len(v.Assertions) != 1 || len(v.Proposals) != 0 || v.Next != NextStep(StatusDiagnosed, nil) {
		t.Fatalf("diagnosed: %+v", v)
	}
	res, err := s.ProposeRemediations(ctx, apv, ProposeParams{IncidentID: id,
		Remediations: []Remediation{holdStripe(), holdBraze()}, Proposer: "dw-incidents"})
	if err != nil {
		t.Fatal(err)
	}
	first, second := res.Proposals[0].ID, res.Proposals[1].ID
	v, err = s.View(ctx, apv, id)
	if err != nil {
		t.Fatal(err)
	}
	want := "waiting for decisions on " + first + " (Bob Billing (bob)), " + second + " (Bob Billing (bob)); people decide with `dw approve <id>` or in Slack, never an agent"
	if len(v.Proposals) != 2 || v.Proposals[0].ID != first || v.Proposals[1].ID != second || v.Next != want {
		t.Fatalf("proposed:\n got %q\nwant %q\n(%d proposals)", v.Next, want, len(v.Proposals))
	}
	bob, err := approvals.OSUserDecider(apv.Config(), approvals.ChannelTerminal, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apv.Decide(ctx, first, bob, approvals.VerdictApprove, ""); err != nil {
		t.Fatal(err)
	}
	v, err = s.View(ctx, apv, id)
	if err != nil {
		t.Fatal(err)
	}
	want = "waiting for decisions on " + second + " (Bob Billing (bob)); people decide with `dw approve <id>` or in Slack, never an agent"
	if v.Proposals[0].State != approvals.StateApproved || v.Next != want {
		t.Fatalf("one decided: %s, next %q", v.Proposals[0].State, v.Next)
	}
	if _, err := apv.Decide(ctx, second, bob, approvals.VerdictReject, "not needed"); err != nil {
		t.Fatal(err)
	}
	if v, err = s.View(ctx, apv, id); err != nil || v.Next != NextStep(StatusProposed, nil) {
		t.Fatalf("all decided: %+v %v", v, err)
	}
	if _, err := s.View(ctx, apv, "INC-999"); err == nil {
		t.Fatal("an unknown incident was viewed")
	}
}

// Every status has its own next step.
func TestNextStepForEveryStatus(t *testing.T) {
	seen := map[string]Status{}
	for _, st := range Statuses {
		n := NextStep(st, nil)
		if other, ok := seen[n]; ok && !(other == StatusApproved && st == StatusFixing) {
			t.Errorf("%s and %s share the next step %q", other, st, n)
		}
		seen[n] = st
	}
}
