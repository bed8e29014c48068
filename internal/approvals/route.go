package approvals

import (
	"context"
	"errors"
	"slices"

	"github.com/dataworkers/dw/internal/store"
)

// Checked is a proposal that passed every rule Propose applies (domain,
// approver, autonomy, stop, the bound action), with its approver named,
// ready to be recorded inside a caller's transaction.
type Checked struct{ p *Proposal }

// Approver is the person the checked proposal will be put to.
func (c *Checked) Approver() string { return c.p.Approver }

// CheckProposal validates np exactly as Propose would and names its
// approver, recording nothing, so a caller sending several refuses them
// all before any is written, with approvals' own rules and words.
func (s *Service) CheckProposal(ctx context.Context, np NewProposal) (*Checked, error) {
	p, err := s.prepare(ctx, np)
	if err != nil {
		return nil, err
	}
	return &Checked{p: p}, nil
}

// ProposeTx records checked proposals inside tx, with the same rows,
// seals, requests and receipt entries Propose writes, and returns their
// ids in order. The caller commits them together with its own rows (the
// incident moved to proposed), so either all are sent or none is. It is
// safe to run again when tx is retried.
func (s *Service) ProposeTx(ctx context.Context, tx *store.Tx, checked []*Checked) ([]string, error) {
	if len(checked) == 0 {
		return nil, errors.New("no proposals to record")
	}
	ids := make([]string, 0, len(checked))
	for _, c := range checked {
		if err := s.record(ctx, tx, c.p); err != nil {
			return nil, err
		}
		ids = append(ids, c.p.ID)
	}
	return ids, nil
}

// InvolvedOwners are the first owners (configured people) of the domains
// the given assets belong to, each once, in order: who is copied on every
// request of one remediation, so the data owner hears of the platform
// owner's decision and the reverse (Propose leaves out the approver).
// Domains are matched on every name of each asset (DomainOf).
func (s *Service) InvolvedOwners(ctx context.Context, assets []string) ([]string, error) {
	var out []string
	for _, a := range assets {
		d, ok, err := s.DomainOf(ctx, a)
		if err != nil {
			return nil, err
		}
		if !ok || len(d.Owners) == 0 {
			continue
		}
		if _, isPerson := s.cfg.Person(d.Owners[0]); isPerson && !slices.Contains(out, d.Owners[0]) {
			out = append(out, d.Owners[0])
		}
	}
	return out, nil
}
