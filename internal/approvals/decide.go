package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dataworkers/dw/internal/store"
)

// Decide records a person's decision on a proposal. It is the only way a
// proposal becomes approved or rejected.
//
// The decider must be a configured person whose channel identity (Slack
// user, OS login) is theirs, must not be the proposer, and must be the
// named approver: the current one in the escalation order or, for the
// standard class, one asked in an earlier round. A live-class proposal
// accepts its asset owner only. When two people decide at once exactly one
// wins; the other gets a *DecidedError naming the winner.
func (s *Service) Decide(ctx context.Context, proposalID string, by Decider, verdict Verdict, reason string) (*Proposal, error) {
	id := normID(proposalID)
	if verdict != VerdictApprove && verdict != VerdictReject {
		return nil, invalid("unknown verdict %q; valid: approve, reject", verdict)
	}
	person, err := verify(s.cfg, by)
	if err != nil {
		return nil, err
	}
	if _, err := s.sweep(ctx, id); err != nil {
		return nil, err
	}
	reason = strings.TrimSpace(reason)
	err = s.db.InTx(ctx, func(tx *store.Tx) error {
		p, err := loadProposal(ctx, tx, id)
		if err != nil {
			return err
		}
		if !p.State.Open() {
			return &DecidedError{Proposal: p}
		}
		if person.ID == p.Proposer {
			return invalid("%s proposed %s and cannot decide it", person.ID, p.ID)
		}
		allowed := mayDecide(p)
		if !slices.Contains(allowed, person.ID) {
			return &NotApproverError{ProposalID: p.ID, PersonID: person.ID, Allowed: allowed, Class: p.Class}
		}
		now := s.clk.Now()
		state := StateApproved
		if verdict == VerdictReject {
			state = StateRejected
		}
		res, err := tx.ExecContext(ctx, `UPDATE approval_proposals SET state = ?, updated_ms = ?
			WHERE id = ? AND round = ? AND state IN ('pending', 'escalated')`, string(state), store.Millis(now), p.ID, p.Round)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			// Lost a race: another decision or an escalation got here first.
			cur, err := loadProposal(ctx, tx, id)
			if err != nil {
				return err
			}
			if !cur.State.Open() {
				return &DecidedError{Proposal: cur}
			}
			return fmt.Errorf("%s escalated to %s while you decided; decide again", id, cur.Approver)
		}
		ev := evidenceOf(by)
		evJSON, err := canonicalJSON(ev)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO approval_decisions (proposal_id, verdict, person_id, channel, evidence, reason, round, decided_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, p.ID, string(verdict), person.ID, string(by.Channel), evJSON, reason, p.Round, store.Millis(now)); err != nil {
			return fmt.Errorf("record decision on %s: %w", p.ID, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE approval_requests SET outcome = 'decided' WHERE proposal_id = ? AND outcome = 'open'`, p.ID); err != nil {
			return err
		}
		_, err = AppendReceipt(ctx, tx, now, p.ReceiptID, EntryDecision, person.ID, map[string]any{
			"proposal": p.ID, "verdict": verdict, "person": person.ID, "channel": by.Channel,
			"evidence": json.RawMessage(evJSON), "reason": reason, "round": p.Round, "approver": p.Approver,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	p, err := loadProposal(ctx, s.db, id)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// mayDecide lists who may decide an open proposal now.
func mayDecide(p Proposal) []string {
	if p.Class == ClassLive {
		return p.ApproverOrder[:1]
	}
	end := p.Round + 1
	if end > len(p.ApproverOrder) {
		end = len(p.ApproverOrder)
	}
	// The current approver first, so messages name them first.
	out := []string{p.Approver}
	for i := end - 1; i >= 0; i-- {
		if !slices.Contains(out, p.ApproverOrder[i]) {
			out = append(out, p.ApproverOrder[i])
		}
	}
	return out
}

// MayDecide lists the person ids who may decide the proposal now (empty
// once it is decided or expired).
func MayDecide(p Proposal) []string {
	if !p.State.Open() {
		return nil
	}
	return mayDecide(p)
}
