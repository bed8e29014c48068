package incidents

import (
	"context"
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/approvals"
)

// View is an incident as a person reads it: what remediate will re-run,
// where its proposals stand in approvals, and what to do next.
type View struct {
	Incident   *Incident
	Assertions []Assertion
	Proposals  []*approvals.Proposal
	// Next is the next step at the incident's status, naming the
	// proposals still waiting for a decision and their approvers.
	Next string
}

// View reads an incident, its assertions and each of its proposals (apv
// applies any expiry that fell due first).
func (s *Service) View(ctx context.Context, apv *approvals.Service, id string) (*View, error) {
	inc, err := s.GetIncident(ctx, id)
	if err != nil {
		return nil, err
	}
	asserts, err := s.Assertions(ctx, inc.ID)
	if err != nil {
		return nil, err
	}
	v := &View{Incident: inc, Assertions: asserts, Proposals: make([]*approvals.Proposal, 0, len(inc.Proposals))}
	var waiting []string
	for _, pid := range inc.Proposals {
		p, err := apv.Get(ctx, pid)
		if err != nil {
			return nil, err
		}
		v.Proposals = append(v.Proposals, p)
		if p.State.Open() {
			waiting = append(waiting, fmt.Sprintf("%s (%s)", p.ID, approvals.PersonLabel(apv.Config(), p.Approver)))
		}
	}
	v.Next = NextStep(inc.Status, waiting)
	return v, nil
}

// NextStep is what to do next with an incident at status st; waiting are
// its proposals still awaiting a decision, as a person reads them.
func NextStep(st Status, waiting []string) string {
	switch st {
	case StatusOpen:
		return "diagnose_incident ranks the recorded changes before the onset; record_change any change you know of first"
	case StatusDiagnosed:
		return "propose_remediation for the top cause (hold the critical consumers, the fix, the undo)"
	case StatusProposed:
		if len(waiting) > 0 {
			return "waiting for decisions on " + strings.Join(waiting, ", ") + "; people decide with `dw approve <id>` or in Slack, never an agent"
		}
		return "every proposal is decided: once the owners have carried out the approved steps, remediate verifies the fix"
	case StatusApproved, StatusFixing:
		return "once the owners have carried out the approved steps, remediate re-runs every assertion and check in scope"
	case StatusEscalated:
		return "a person reviews the failed verification; after further approved steps remediate verifies again, or diagnose_incident re-ranks the causes"
	case StatusVerified:
		return "close_incident closes it; get_receipt shows the record"
	}
	return "nothing: the incident is closed; get_receipt shows the record"
}
