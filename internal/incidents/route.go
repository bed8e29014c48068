package incidents

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/store"
)

// MaxRemediations bounds one ProposeRemediations call.
const MaxRemediations = 20

// Remediation is one change to put to its approver: the draft, the
// proposer's own reason, and the one action the approval allows (bound by
// the caller from its configuration; nil allows nothing to run).
type Remediation struct {
	Draft  DraftParams
	Why    string
	Action *approvals.ActionSpec
}

// ProposeParams is a set of remediations for one incident.
type ProposeParams struct {
	IncidentID   string
	Remediations []Remediation
	// Proposer is the agent's name, set in code (never a tool input).
	Proposer string
}

// Proposed is what ProposeRemediations wrote: the incident, now proposed,
// and the proposals as approvals stored them, in the order given.
type Proposed struct {
	Incident  *Incident
	Proposals []*approvals.Proposal
}

// RemediationError is one remediation of a set refused before anything
// was written (its draft, or approvals' check of it): which one, and why.
// A caller proposing on its own behalf, such as a routine, can leave that
// one out, say why, and propose the rest.
type RemediationError struct {
	// Index is the remediation's position in ProposeParams.Remediations.
	Index int
	What  string
	Err   error
}

func (e *RemediationError) Error() string {
	return fmt.Sprintf("proposals[%d] (%s): %v", e.Index, e.What, e.Err)
}

func (e *RemediationError) Unwrap() error { return e.Err }

// ProposeRemediations drafts each remediation against the incident's
// diagnosis, has approvals check it and name its approver (approvals owns
// who approves, autonomy and stop), and copies the first owners of every
// domain involved. Only when every one passes does it write, in one
// transaction: the cited cause on the incident's receipt (once), every
// proposal with its request, and the incident's move to proposed. So a
// failure anywhere leaves nothing behind: no proposal a person could
// approve for an incident that does not point at it. A remediation refused
// before anything is written comes back as a *RemediationError naming it.
func (s *Service) ProposeRemediations(ctx context.Context, apv *approvals.Service, p ProposeParams) (*Proposed, error) {
	switch n := len(p.Remediations); {
	case n == 0:
		return nil, invalid("proposals is empty: give at least one remediation (kind, what, targets, undo)")
	case n > MaxRemediations:
		return nil, invalid("%d proposals in one call; at most %d", n, MaxRemediations)
	}
	inc, err := loadIncident(ctx, s.DB, p.IncidentID)
	if err != nil {
		return nil, err
	}
	// Read before the proposals are checked (which dates them), so the
	// cause entry never reads later than the proposals after it.
	at, err := apv.Now(ctx)
	if err != nil {
		return nil, err
	}
	drafts := make([]*ProposalDraft, len(p.Remediations))
	for i, r := range p.Remediations {
		r.Draft.IncidentID = inc.ID
		if drafts[i], err = s.DraftProposal(ctx, r.Draft); err != nil {
			return nil, &RemediationError{Index: i, What: strings.TrimSpace(r.Draft.What), Err: err}
		}
	}
	assets := inc.InvolvedAssets()
	for _, d := range drafts {
		assets = append(append(assets, d.Targets...), d.Scope...)
	}
	copies, err := apv.InvolvedOwners(ctx, assets)
	if err != nil {
		return nil, err
	}
	checked := make([]*approvals.Checked, len(drafts))
	for i, d := range drafts {
		// The draft's why is composed from stored text (the cited change's
		// summary, who named the cause and why): escaped, never refused, so a
		// change row recorded before the text rule can't block the incident.
		// The proposer's own why is still checked as given.
		why := "Addresses " + approvals.Line(d.Why)
		if w := strings.TrimSpace(p.Remediations[i].Why); w != "" {
			why = strings.TrimSuffix(w, ".") + ". " + why
		}
		var det map[string]any
		if len(d.Details) > 0 {
			det = d.Details
		}
		c, err := apv.CheckProposal(ctx, approvals.NewProposal{
			IncidentID: inc.ID, Kind: d.ApprovalKind, What: d.What, Why: why, Targets: d.Targets, Scope: d.Scope,
			Undo: d.Undo, Copy: copies, Action: p.Remediations[i].Action, Details: det, Proposer: p.Proposer,
		})
		if err != nil {
			return nil, &RemediationError{Index: i, What: d.What, Err: err}
		}
		checked[i] = c
	}
	facts, actor := inc.CauseFacts(p.Proposer)
	now := s.now()
	var ids []string
	err = s.DB.InTx(ctx, func(tx *store.Tx) error {
		if facts != nil {
			if err := recordCauseTx(ctx, tx, apv, at, inc.ID, actor, facts); err != nil {
				return err
			}
		}
		var err error
		if ids, err = apv.ProposeTx(ctx, tx, checked); err != nil {
			return err
		}
		_, err = markProposedTx(ctx, tx, inc.ID, ids, p.Proposer, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := &Proposed{Proposals: make([]*approvals.Proposal, 0, len(ids))}
	if out.Incident, err = loadIncident(ctx, s.DB, inc.ID); err != nil {
		return nil, err
	}
	for _, id := range ids {
		pr, err := apv.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		out.Proposals = append(out.Proposals, pr)
	}
	return out, nil
}

// recordCauseTx writes the incident's cited cause to its receipt unless
// the same cause, named by the same person, is already there, so the
// receipt reads cause, then approvals, then steps.
func recordCauseTx(ctx context.Context, tx *store.Tx, apv *approvals.Service, at time.Time, incidentID, actor string, f *CauseFacts) error {
	entries, err := approvals.Entries(ctx, tx, incidentID)
	if err != nil {
		return err
	}
	for _, en := range entries {
		var got CauseFacts
		if en.Kind == approvals.EntryCause && json.Unmarshal(en.Payload, &got) == nil && got.ChangeID == f.ChangeID && got.AttributedBy == f.AttributedBy {
			return nil
		}
	}
	_, err = apv.AppendReceiptTx(ctx, tx, at, incidentID, approvals.EntryCause, actor, f)
	return err
}

// InvolvedAssets are the assets whose owners hear of the incident's
// remediation: its symptomatic assets and the cited cause's changed asset.
func (inc *Incident) InvolvedAssets() []string {
	assets := append([]string{}, inc.Assets...)
	if c := inc.CitedCause(); c != nil && len(c.Path) > 0 {
		assets = append(assets, c.Path[0])
	}
	return assets
}
