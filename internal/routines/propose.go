package routines

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
)

// proposer names the routines as the proposer of what they draft.
const proposer = "dw watch"

// maxHolds bounds the holds one new incident drafts.
const maxHolds = 3

// propose drafts, for each incident a run opened, a hold on every
// scheduled outbound job downstream of the affected asset, so its owner
// can stop wrong numbers leaving before the next run. It only drafts:
// each hold goes to the approver the domain names, where the domain's
// autonomy allows proposals (L2 and up); `dw stop` pauses it; nothing is
// dispatched. The holds of one incident are proposed through
// incidents.ProposeRemediations, in one transaction with the incident's
// move to proposed, routed and copied by approvals' rules. What happened
// is recorded on the run either way.
func (r *Runner) propose(ctx context.Context, o *observation) {
	apv := approvals.New(r.o.DB, r.o.Config, r.o.Clock, func(ctx context.Context, asset string) (string, bool) {
		if own, ok := r.ownerOf(ctx, asset); ok {
			return own.person, true
		}
		return "", false
	})
	svc := r.incidents()
	for _, inc := range o.incidents {
		if !inc.Opened {
			continue
		}
		for _, p := range r.proposeHolds(ctx, apv, svc, inc) {
			p.Incident = inc.ID
			o.proposals = append(o.proposals, p)
		}
	}
}

func (r *Runner) proposeHolds(ctx context.Context, apv *approvals.Service, svc *incidents.Service, inc Incident) []Proposal {
	note := func(format string, args ...any) []Proposal {
		return []Proposal{{Note: fmt.Sprintf(format, args...)}}
	}
	blast, err := r.graph.BlastRadius(ctx, lineage.BlastParams{Asset: inc.Asset, Limit: 50})
	if err != nil {
		// Most often the asset is not in the context graph: nothing
		// downstream is known, so there is nothing to hold.
		r.o.Log.Debug("no blast radius; no hold drafted", "asset", inc.Asset, "err", err)
		return nil
	}
	now := r.o.Clock.Now()
	var targets []lineage.ImpactedAsset
	for _, a := range blast.Assets {
		if a.Schedule != nil && slices.Contains(a.Critical, "outbound") && (a.NextRun.IsZero() || a.NextRun.After(now)) {
			targets = append(targets, a)
		}
	}
	if len(targets) == 0 {
		return nil
	}
	if len(targets) > maxHolds {
		targets = targets[:maxHolds]
	}
	stop, err := apv.StopStatus(ctx)
	if err != nil {
		return note("no hold drafted: the org stop could not be read: %v", err)
	}
	var out []Proposal
	var allowed []lineage.ImpactedAsset
	for _, t := range targets {
		d, ok, err := apv.DomainOf(ctx, t.ID)
		if err != nil {
			out = append(out, Proposal{Target: t.ID, Note: "not drafted: " + err.Error()})
			continue
		}
		if !ok {
			out = append(out, Proposal{Target: t.ID, Note: "not drafted: " + t.ID + " is in no domain of dw.yaml, so no autonomy level allows a proposal"})
			continue
		}
		li, err := apv.Level(ctx, d.Name)
		if err != nil {
			out = append(out, Proposal{Target: t.ID, Note: "not drafted: " + err.Error()})
			continue
		}
		if li.Level < "L2" {
			out = append(out, Proposal{Target: t.ID, Note: fmt.Sprintf("not drafted: domain %s is at %s (%s); routines propose from L2", d.Name, li.Level, li.Name)})
			continue
		}
		if stop.Active {
			out = append(out, Proposal{Target: t.ID, Note: fmt.Sprintf("paused: dw stop is on (since %s: %s); nothing is proposed until dw resume", stop.Since.UTC().Format(time.RFC3339), stop.Reason)})
			continue
		}
		allowed = append(allowed, t)
	}
	if len(allowed) == 0 {
		return out
	}
	// A proposal addresses a ranked cause: diagnose first.
	diag, err := svc.Diagnose(ctx, incidents.DiagnoseParams{IncidentID: inc.ID})
	if err != nil {
		return append(out, Proposal{Note: "no hold drafted: the diagnosis failed: " + err.Error()})
	}
	if len(diag.Causes) == 0 {
		return append(out, Proposal{Note: "no hold drafted: no recorded change ranks as a cause yet (record_change, then propose_remediation)"})
	}
	rems := make([]incidents.Remediation, len(allowed))
	for i, t := range allowed {
		name := t.Title
		if name == "" {
			name = t.ID
		}
		when := "its next run"
		if !t.NextRun.IsZero() {
			when = "its next run at " + t.NextRun.UTC().Format("2006-01-02 15:04 UTC")
		}
		rems[i] = incidents.Remediation{
			Draft: incidents.DraftParams{IncidentID: inc.ID, Kind: string(incidents.ProposalHold),
				What:    fmt.Sprintf("Hold %s before %s, until %s is resolved", name, when, inc.ID),
				Targets: []string{t.ID}, Undo: "resume " + t.ID + " (unpause it; the skipped run can be started again)"},
			Why: fmt.Sprintf("%s reads %s, where %s is open", name, inc.Asset, inc.ID),
		}
	}
	sent, refused, err := proposeAll(ctx, svc, apv, inc.ID, rems)
	for i, t := range allowed {
		switch {
		case sent[i] != nil:
			p := sent[i]
			out = append(out, Proposal{ID: p.ID, Target: t.ID, What: p.What, Approver: p.Approver,
				Note: "drafted; nothing happens until " + approvals.PersonLabel(r.o.Config, p.Approver) + " decides (dw approve " + p.ID + ")"})
		case refused[i] != nil:
			out = append(out, Proposal{Target: t.ID, Note: "not drafted: " + refused[i].Error()})
		case err != nil:
			out = append(out, Proposal{Target: t.ID, Note: "not drafted: nothing was proposed for " + inc.ID + ": " + err.Error()})
		}
	}
	return out
}

// proposeAll proposes the remediations through the one incidents
// workflow, so each set is written in one transaction with the incident's
// move to proposed. A hold approvals refuses (or that cannot be drafted)
// is left out, with its reason, and the rest proposed: one owner's
// misconfigured domain does not silence the others. Any other failure
// proposes nothing. sent and refused are indexed like rems.
func proposeAll(ctx context.Context, svc *incidents.Service, apv *approvals.Service, incident string, rems []incidents.Remediation) (sent []*approvals.Proposal, refused []error, err error) {
	sent, refused = make([]*approvals.Proposal, len(rems)), make([]error, len(rems))
	left := make([]int, len(rems)) // positions in rems still to propose
	for i := range left {
		left[i] = i
	}
	for len(left) > 0 {
		batch := make([]incidents.Remediation, len(left))
		for j, i := range left {
			batch[j] = rems[i]
		}
		res, err := svc.ProposeRemediations(ctx, apv, incidents.ProposeParams{IncidentID: incident, Remediations: batch, Proposer: proposer})
		var re *incidents.RemediationError
		if errors.As(err, &re) && re.Index >= 0 && re.Index < len(left) {
			// Refused before anything was written: safe to go again without it.
			refused[left[re.Index]] = re.Err
			left = slices.Delete(left, re.Index, re.Index+1)
			continue
		}
		if err != nil {
			return sent, refused, err
		}
		for j, p := range res.Proposals {
			sent[left[j]] = p
		}
		return sent, refused, nil
	}
	return sent, refused, nil
}
