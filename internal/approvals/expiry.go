package approvals

import (
	"context"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// Escalation is what Sweep did to one unanswered request.
type Escalation struct {
	ProposalID string `json:"proposal_id"`
	// From is the approver who did not answer in time.
	From string `json:"from"`
	// To is the next approver asked, empty when the order is exhausted.
	To    string `json:"to,omitempty"`
	Round int    `json:"round"`
	// Expired is true when nobody is left to ask: the proposal is expired
	// and nothing was granted.
	Expired bool      `json:"expired"`
	At      time.Time `json:"at"`
}

// Sweep applies every expiry that fell due: an unanswered request passes
// to the next approver in the domain's order with a new request and a new
// deadline, and when the order is exhausted the proposal expires. Expiry
// never grants anything. Reads and decisions call it lazily; the Slack
// listener and agents call it so escalations are posted promptly.
func (s *Service) Sweep(ctx context.Context) ([]Escalation, error) {
	return s.sweep(ctx, "")
}

// sweep applies due expiries to one proposal, or to all when id is "".
// It reads first and only opens a write transaction when something is due,
// so the common case costs one indexed query.
func (s *Service) sweep(ctx context.Context, id string) ([]Escalation, error) {
	now, err := s.now(ctx)
	if err != nil {
		return nil, err
	}
	return s.sweepAt(ctx, id, now)
}

// sweepAt applies the expiries due at now: Decide sweeps at the decision's
// own time, so a request that has expired by then is never decided.
func (s *Service) sweepAt(ctx context.Context, id string, now time.Time) ([]Escalation, error) {
	query := `SELECT id FROM approval_proposals WHERE state IN ('pending', 'escalated') AND expires_ms <= ?`
	args := []any{store.Millis(now)}
	if id != "" {
		query += ` AND id = ?`
		args = append(args, id)
	}
	due, err := store.Strings(ctx, s.db, query+` ORDER BY expires_ms`, args...)
	if err != nil {
		return nil, err
	}
	var out []Escalation
	if len(due) == 0 {
		return nil, nil
	}
	ks, err := s.keys()
	if err != nil {
		return nil, err
	}
	for _, pid := range due {
		var esc *Escalation
		err := s.db.InTx(ctx, func(tx *store.Tx) error {
			var err error
			esc, err = escalate(ctx, tx, ks, pid, now)
			return err
		})
		if err != nil {
			return out, err
		}
		if esc != nil {
			out = append(out, *esc)
		}
	}
	return out, nil
}

// escalate moves one due proposal on. The conditional UPDATE (same round,
// still open, still due) makes concurrent sweepers and a racing decision
// safe: only one of them changes the row.
func escalate(ctx context.Context, tx *store.Tx, ks *keyset, id string, now time.Time) (*Escalation, error) {
	p, err := loadProposal(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if !p.State.Open() || p.ExpiresAt.After(now) {
		return nil, nil
	}
	esc := &Escalation{ProposalID: p.ID, From: p.Approver, Round: p.Round, At: now}
	next := p.Round + 1
	nowMs := store.Millis(now)
	if p.Class != ClassLive && next < len(p.ApproverOrder) {
		to := p.ApproverOrder[next]
		expires := now.Add(p.expiry)
		res, err := tx.ExecContext(ctx, `UPDATE approval_proposals SET approver = ?, round = ?, state = 'escalated', expires_ms = ?, updated_ms = ?
			WHERE id = ? AND round = ? AND state IN ('pending', 'escalated') AND expires_ms <= ?`,
			to, next, store.Millis(expires), nowMs, p.ID, p.Round, nowMs)
		if err != nil {
			return nil, err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil, nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE approval_requests SET outcome = 'escalated' WHERE proposal_id = ? AND round = ?`, p.ID, p.Round); err != nil {
			return nil, err
		}
		if err := openRequest(ctx, tx, p.ID, next, to, now, expires); err != nil {
			return nil, err
		}
		esc.To, esc.Round = to, next
		_, err = appendReceipt(ctx, tx, ks, now, p.ReceiptID, EntryEscalated, "approvals", map[string]any{
			"proposal": p.ID, "from": p.Approver, "to": to, "round": next, "expires_at": expires,
			"reason": "no answer from " + p.Approver + " by " + stamp(p.ExpiresAt),
		})
		return esc, err
	}
	res, err := tx.ExecContext(ctx, `UPDATE approval_proposals SET state = 'expired', updated_ms = ?
		WHERE id = ? AND round = ? AND state IN ('pending', 'escalated') AND expires_ms <= ?`, nowMs, p.ID, p.Round, nowMs)
	if err != nil {
		return nil, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE approval_requests SET outcome = 'expired' WHERE proposal_id = ? AND round = ?`, p.ID, p.Round); err != nil {
		return nil, err
	}
	esc.Expired = true
	_, err = appendReceipt(ctx, tx, ks, now, p.ReceiptID, EntryExpired, "approvals", map[string]any{
		"proposal": p.ID, "asked": p.ApproverOrder[:p.Round+1], "deadline": p.ExpiresAt,
		"result": "expired unanswered; nothing was granted",
	})
	return esc, err
}
