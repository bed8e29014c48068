package approvals

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Action is something an agent is about to dispatch: a rerun, a schema
// registration, a hold. Every dispatching tool asks MayDispatch first.
type Action struct {
	// Domain is the domain the action falls in; default: the domain of
	// Asset, else of the proposal.
	Domain string `json:"domain,omitempty"`
	// Asset is the asset acted on; with a proposal it must be one of the
	// proposal's targets.
	Asset string `json:"asset,omitempty"`
	// Kind is the action kind (see Kinds); it is matched against the
	// domain's open classes at L3 and against the proposal's kind.
	Kind string `json:"kind"`
	// ProposalID is the approved proposal this action carries out, if any.
	ProposalID string `json:"proposal_id,omitempty"`
	// Reversible says the action can be undone by the system itself (a
	// rerun, a pause); only reversible actions run without an approval.
	Reversible bool `json:"reversible"`
	// Spec is exactly what the tool is about to send. With a proposal it
	// must equal the proposal's action field by field; its domain is
	// resolved here from the config, never taken from the caller.
	Spec *ActionSpec `json:"spec,omitempty"`
}

// Permit says an action may dispatch and on what grounds.
type Permit struct {
	Domain string `json:"domain"`
	Level  string `json:"level"`
	// Basis is the human-readable ground: the approval or the open class.
	Basis    string    `json:"basis"`
	Proposal *Proposal `json:"proposal,omitempty"`
}

// Refusal is a dispatch the rules do not allow. Its message says exactly
// why and what would allow it.
type Refusal struct {
	Reason string
}

// Error starts with "dispatch refused:" so every tool's refusal reads alike.
func (r *Refusal) Error() string { return "dispatch refused: " + r.Reason }

// IsRefusal reports whether err is a dispatch refusal (as opposed to a
// store failure).
func IsRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}

func refuse(format string, args ...any) error {
	return &Refusal{Reason: fmt.Sprintf(format, args...)}
}

// MayDispatch decides whether an action may run now. In order: an
// org-wide stop refuses everything; L0 and L1 domains dispatch nothing; an
// approved proposal of the same kind and domain permits the action at L2
// and above; without one, L3 permits reversible actions whose kind the
// domain opened and L4 permits any reversible action, except changes to
// the live data stack, which always need the owner's approval.
func (s *Service) MayDispatch(ctx context.Context, a Action) (Permit, error) {
	stop, err := s.StopStatus(ctx)
	if err != nil {
		return Permit{}, err
	}
	if stop.Active {
		return Permit{}, stop.Refusal()
	}
	if strings.TrimSpace(a.Kind) == "" {
		return Permit{}, invalid("action kind is empty; valid: %s", strings.Join(Kinds, ", "))
	}
	var p *Proposal
	if a.ProposalID != "" {
		p, err = s.Get(ctx, a.ProposalID)
		if err != nil {
			return Permit{}, err
		}
		// The state column alone proves nothing: an approval counts only
		// with a sealed decision by a recorded approver (records.go).
		if err := s.verifyApproval(ctx, p); err != nil {
			return Permit{}, err
		}
	}
	domain := a.Domain
	if domain == "" && a.Asset != "" {
		d, ok, err := s.DomainOf(ctx, a.Asset)
		if err != nil {
			return Permit{}, err
		}
		if !ok {
			return Permit{}, refuse("asset %s is in no configured domain, so no rules allow acting on it; add it to a domain's assets in the config", a.Asset)
		}
		domain = d.Name
	}
	if domain == "" && p != nil {
		domain = p.Domain
	}
	if domain == "" {
		return Permit{}, invalid("the action names no domain, asset or proposal; name one so the domain's rules can apply")
	}
	d, err := Domain(s.cfg, domain)
	if err != nil {
		return Permit{}, err
	}
	li, err := s.levelOf(ctx, s.db, d)
	if err != nil {
		return Permit{}, err
	}
	if li.Tampered != "" {
		return Permit{}, refuse("domain %s: autonomy tampered with: %s", d.Name, li.Tampered)
	}
	lvl := fmt.Sprintf("%s (%s)", li.Level, li.Name)
	switch li.Level {
	case "L0":
		return Permit{}, refuse("domain %s is at %s: agents dispatch nothing there; a person makes the change", d.Name, lvl)
	case "L1":
		return Permit{}, refuse("domain %s is at %s: agents only read there; a person carries out approved changes", d.Name, lvl)
	}
	if p != nil {
		return s.permitByProposal(ctx, a, p, d.Name, li)
	}
	opened := slices.Contains(d.OpenClasses, a.Kind)
	switch li.Level {
	case "L2":
		return Permit{}, refuse("domain %s is at %s; a %s needs an approved proposal (or L3 with class %q opened)", d.Name, lvl, a.Kind, a.Kind)
	case "L3":
		if !a.Reversible {
			return Permit{}, refuse("domain %s is at %s, which runs only reversible actions without approval; this %s is not reversible, so it needs an approved proposal", d.Name, lvl, a.Kind)
		}
		if !opened {
			return Permit{}, refuse("domain %s is at %s but class %q is not opened there (opened: %s); it needs an approved proposal", d.Name, lvl, a.Kind, orNone(d.OpenClasses))
		}
		return Permit{Domain: d.Name, Level: li.Level, Basis: fmt.Sprintf("domain %s at %s with class %q opened", d.Name, lvl, a.Kind)}, nil
	case "L4":
		if liveKinds[a.Kind] {
			return Permit{}, refuse("a %s changes the live data stack and always needs its owner's approval, even at %s", a.Kind, lvl)
		}
		if !a.Reversible {
			return Permit{}, refuse("domain %s is at %s, but this %s is not reversible, so it needs an approved proposal", d.Name, lvl, a.Kind)
		}
		return Permit{Domain: d.Name, Level: li.Level, Basis: fmt.Sprintf("domain %s at %s: reversible %s", d.Name, lvl, a.Kind)}, nil
	}
	return Permit{}, refuse("domain %s has unknown level %q; valid: L0-L4", d.Name, li.Level)
}

// sameAction refuses a requested action that is not exactly the approved
// one, naming every field that differs. Free-form details play no part.
func (s *Service) sameAction(ctx context.Context, p *Proposal, req *ActionSpec) error {
	if p.actionErr != nil {
		return refuse("%v", p.actionErr)
	}
	switch {
	case p.Action == nil && req == nil:
		return nil
	case p.Action == nil:
		return refuse("proposal %s binds no action, so it allows running nothing (its notes do not count); requested %s. Propose the run with its action bound (system, target, location, params) and have it approved",
			p.ID, req.String())
	case req == nil:
		return refuse("proposal %s allows only %s, and the tool named no action to compare it with", p.ID, p.Action.String())
	}
	r, err := s.requested(ctx, req)
	if err != nil {
		return err
	}
	if diffs := compareActions(p.Action, &r); len(diffs) > 0 {
		return refuse("proposal %s approved a different action: %s; nothing was dispatched (a different action needs its own approval)", p.ID, strings.Join(diffs, "; "))
	}
	return nil
}

func (s *Service) permitByProposal(ctx context.Context, a Action, p *Proposal, domain string, li LevelInfo) (Permit, error) {
	switch p.State {
	case StateApproved:
	case StatePending, StateEscalated:
		return Permit{}, refuse("proposal %s is %s, awaiting %s until %s; it runs only once approved", p.ID, p.State, p.Approver, stamp(p.ExpiresAt))
	case StateExecuted:
		return Permit{}, refuse("proposal %s was already executed; an approval runs once (propose again to repeat it)", p.ID)
	default:
		return Permit{}, refuse("proposal %s is %s; only an approved proposal can run", p.ID, p.State)
	}
	if p.Domain != domain {
		return Permit{}, refuse("proposal %s was approved for domain %s, not %s", p.ID, p.Domain, domain)
	}
	if p.Kind != a.Kind {
		return Permit{}, refuse("proposal %s approved a %s, not a %s", p.ID, p.Kind, a.Kind)
	}
	among, err := s.sameAsset(ctx, p.Targets, a.Asset)
	if err != nil {
		return Permit{}, err
	}
	if a.Asset != "" && !among {
		return Permit{}, refuse("proposal %s approved changes to %s, not to %s", p.ID, strings.Join(p.Targets, ", "), a.Asset)
	}
	if err := s.sameAction(ctx, p, a.Spec); err != nil {
		return Permit{}, err
	}
	basis := fmt.Sprintf("proposal %s approved", p.ID)
	if d := p.Decision; d != nil {
		basis = fmt.Sprintf("proposal %s approved by %s via %s at %s", p.ID, d.PersonID, d.Channel, stamp(d.At))
	}
	return Permit{Domain: domain, Level: li.Level, Basis: basis, Proposal: p}, nil
}
