package approvals

import (
	"context"
	"strings"

	"github.com/dataworkers/dw/internal/store"
)

// Check is one assertion run before or after a step.
type Check struct {
	Name   string `json:"name" jsonschema:"what was checked"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty" jsonschema:"observed value or failure message"`
}

// Step is one thing done to carry out an approved proposal.
type Step struct {
	// Actor is the agent or person who ran it.
	Actor        string         `json:"actor" jsonschema:"agent or person who ran the step"`
	Description  string         `json:"description" jsonschema:"what was done"`
	ChecksBefore []Check        `json:"checks_before,omitempty"`
	ChecksAfter  []Check        `json:"checks_after,omitempty"`
	Details      map[string]any `json:"details,omitempty" jsonschema:"what the step returned (run id, schema id, offsets, …)"`
}

// RecordStep appends a step to the proposal's receipt. Steps belong to an
// approved change: a step on a pending, rejected or expired proposal is
// refused, so the receipt never shows work without its approval.
func (s *Service) RecordStep(ctx context.Context, proposalID string, st Step) (Entry, error) {
	st.Actor, st.Description = strings.TrimSpace(st.Actor), strings.TrimSpace(st.Description)
	if st.Actor == "" || st.Description == "" {
		return Entry{}, invalid("a step needs an actor and a description")
	}
	p, err := s.Get(ctx, proposalID)
	if err != nil {
		return Entry{}, err
	}
	switch p.State {
	case StateApproved, StateExecuted, StateUndone:
	default:
		return Entry{}, invalid("%s is %s: steps are recorded only for an approved change", p.ID, p.State)
	}
	// A state column set to approved by hand earns no step either.
	if err := s.verifyApproval(ctx, p); err != nil {
		return Entry{}, err
	}
	payload := map[string]any{"proposal": p.ID, "description": st.Description,
		"checks_before": nonNilChecks(st.ChecksBefore), "checks_after": nonNilChecks(st.ChecksAfter)}
	if len(st.Details) > 0 {
		payload["details"] = st.Details
	}
	now, err := s.now(ctx)
	if err != nil {
		return Entry{}, err
	}
	return s.appendEntry(ctx, s.db, now, p.ReceiptID, EntryStep, st.Actor, payload)
}

func nonNilChecks(c []Check) []Check {
	if c == nil {
		return []Check{}
	}
	return c
}

// MarkExecuted records that an approved proposal has been carried out; it
// cannot be dispatched again after this.
func (s *Service) MarkExecuted(ctx context.Context, proposalID, actor, note string) (*Proposal, error) {
	return s.transition(ctx, proposalID, actor, note, StateApproved, StateExecuted, EntryExecuted)
}

// MarkUndone records that an executed proposal's undo was carried out.
func (s *Service) MarkUndone(ctx context.Context, proposalID, actor, note string) (*Proposal, error) {
	return s.transition(ctx, proposalID, actor, note, StateExecuted, StateUndone, EntryUndone)
}

func (s *Service) transition(ctx context.Context, proposalID, actor, note string, from, to State, kind string) (*Proposal, error) {
	actor = strings.TrimSpace(actor)
	if actor == "" {
		return nil, invalid("actor is empty: name the agent or person who did it")
	}
	id := normID(proposalID)
	if _, err := s.sweep(ctx, id); err != nil {
		return nil, err
	}
	now, err := s.now(ctx)
	if err != nil {
		return nil, err
	}
	err = s.db.InTx(ctx, func(tx *store.Tx) error {
		p, err := loadProposal(ctx, tx, id)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE approval_proposals SET state = ?, updated_ms = ? WHERE id = ? AND state = ?`,
			string(to), store.Millis(now), id, string(from))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return invalid("%s is %s; only %s proposals can become %s", id, p.State, from, to)
		}
		payload := map[string]any{"proposal": id, "note": strings.TrimSpace(note)}
		if to == StateUndone {
			payload["undo"] = p.Undo
		}
		_, err = s.appendEntry(ctx, tx, now, p.ReceiptID, kind, actor, payload)
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, id)
}
