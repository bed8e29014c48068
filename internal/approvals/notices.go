package approvals

import (
	"context"
	"encoding/json"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// MessageRef locates a posted chat message so it can be updated later.
type MessageRef struct {
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// Notice is a request to an approver that a notifier must post, or a
// closed request whose posted messages must be updated to show the outcome.
type Notice struct {
	RequestID int64 `json:"request_id"`
	Round     int   `json:"round"`
	// Approver is the person the request was put to.
	Approver string `json:"approver"`
	// Previous is the approver who did not answer, on an escalation.
	Previous string       `json:"previous,omitempty"`
	Messages []MessageRef `json:"messages,omitempty"`
	// Outcome is open, decided, escalated or expired.
	Outcome  string   `json:"outcome"`
	Proposal Proposal `json:"proposal"`
}

// claimStale is how long a claimed but unposted request waits before
// another notifier may take it over (the first one crashed mid-post).
const claimStale = 10 * time.Minute

// ClaimNotices takes up to limit unposted open requests for posting. Each
// is claimed with a conditional update, so two listeners never post the
// same request. Call NoticePosted or ReleaseNotice for each.
func (s *Service) ClaimNotices(ctx context.Context, limit int) ([]Notice, error) {
	now, err := s.now(ctx)
	if err != nil {
		return nil, err
	}
	return s.claim(ctx, limit,
		`SELECT id FROM approval_requests WHERE outcome = 'open' AND posted_ms = 0 AND (claimed_ms = 0 OR claimed_ms < ?) ORDER BY id LIMIT ?`,
		[]any{store.Millis(now.Add(-claimStale))},
		`UPDATE approval_requests SET claimed_ms = ? WHERE id = ? AND posted_ms = 0 AND (claimed_ms = 0 OR claimed_ms < ?)`,
		func(id int64) []any { return []any{store.Millis(now), id, store.Millis(now.Add(-claimStale))} })
}

// ClaimRefreshes takes up to limit closed requests whose posted messages
// still show buttons; call ReleaseRefresh for one whose update failed.
func (s *Service) ClaimRefreshes(ctx context.Context, limit int) ([]Notice, error) {
	now, err := s.now(ctx)
	if err != nil {
		return nil, err
	}
	return s.claim(ctx, limit,
		`SELECT id FROM approval_requests WHERE outcome <> 'open' AND posted_ms > 0 AND refreshed_ms = 0 ORDER BY id LIMIT ?`, nil,
		`UPDATE approval_requests SET refreshed_ms = ? WHERE id = ? AND refreshed_ms = 0`,
		func(id int64) []any { return []any{store.Millis(now), id} })
}

func (s *Service) claim(ctx context.Context, limit int, pick string, pickArgs []any, take string, takeArgs func(int64) []any) ([]Notice, error) {
	if limit <= 0 {
		limit = 50
	}
	if _, err := s.Sweep(ctx); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, pick, append(pickArgs, limit)...)
	if err != nil {
		return nil, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	var out []Notice
	for _, id := range ids {
		res, err := s.db.ExecContext(ctx, take, takeArgs(id)...)
		if err != nil {
			return out, err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			continue
		}
		n, err := s.notice(ctx, id)
		if err != nil {
			return out, err
		}
		out = append(out, n)
	}
	return out, nil
}

func (s *Service) notice(ctx context.Context, requestID int64) (Notice, error) {
	n := Notice{RequestID: requestID}
	var pid, msgs string
	if err := s.db.QueryRowContext(ctx, `SELECT proposal_id, round, approver, outcome, messages FROM approval_requests WHERE id = ?`, requestID).
		Scan(&pid, &n.Round, &n.Approver, &n.Outcome, &msgs); err != nil {
		return n, err
	}
	if err := json.Unmarshal([]byte(msgs), &n.Messages); err != nil {
		return n, err
	}
	p, err := loadProposal(ctx, s.db, pid)
	if err != nil {
		return n, err
	}
	n.Proposal = p
	if n.Round > 0 && n.Round-1 < len(p.ApproverOrder) {
		n.Previous = p.ApproverOrder[n.Round-1]
	}
	return n, nil
}

// NoticePosted records where a request was posted, in the store and in
// the proposal's receipt.
func (s *Service) NoticePosted(ctx context.Context, n Notice, via string, refs []MessageRef) error {
	now, err := s.now(ctx)
	if err != nil {
		return err
	}
	msgs, _ := json.Marshal(refs)
	return s.db.InTx(ctx, func(tx *store.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE approval_requests SET posted_ms = ?, messages = ? WHERE id = ?`,
			store.Millis(now), string(msgs), n.RequestID); err != nil {
			return err
		}
		_, err := s.appendEntry(ctx, tx, now, n.Proposal.ReceiptID, EntryNotified, via, map[string]any{
			"proposal": n.Proposal.ID, "round": n.Round, "approver": n.Approver, "via": via, "messages": refs,
		})
		return err
	})
}

// ReleaseNotice gives a claimed request back after a failed post.
func (s *Service) ReleaseNotice(ctx context.Context, n Notice) error {
	_, err := s.db.ExecContext(ctx, `UPDATE approval_requests SET claimed_ms = 0 WHERE id = ? AND posted_ms = 0`, n.RequestID)
	return err
}

// ReleaseRefresh gives a claimed refresh back after a failed update.
func (s *Service) ReleaseRefresh(ctx context.Context, n Notice) error {
	_, err := s.db.ExecContext(ctx, `UPDATE approval_requests SET refreshed_ms = 0 WHERE id = ?`, n.RequestID)
	return err
}
