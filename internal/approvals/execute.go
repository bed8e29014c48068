package approvals

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// Execution states in approval_executions.
const (
	execClaimed = "claimed"
	execDone    = "done"
)

// Execution is a claim, in the store, on carrying out one approved action.
// It is the one path every dispatching tool takes before it acts outside
// the store: the proposal id is the table's primary key, so across
// processes one call carries an approval out and the others either wait
// for it or, once it is done, get its result back.
type Execution struct {
	ProposalID string
	ActionHash string
	Actor      string
	// Done is true when an earlier call carried the action out; Result is
	// what it recorded, for the tool to answer the retry with. Nothing may
	// be done again.
	Done   bool
	Result json.RawMessage
	// Permit is the ground the action runs on; empty when Done.
	Permit Permit

	state     string
	token     string
	claimedAt time.Time
}

// BusyError says another call holds the claim on the approval right now.
type BusyError struct {
	ProposalID string
	Actor      string
	Since      time.Time
	Lease      time.Duration
}

// Error says who holds the claim and when it lapses.
func (e *BusyError) Error() string {
	return fmt.Sprintf("proposal %s is being carried out by another call (%s, since %s); call again in a moment: it returns that call's result (a claim left by a crashed process lapses after %s)",
		e.ProposalID, e.Actor, e.Since.UTC().Format("15:04:05 UTC"), e.Lease)
}

// BeginExecution claims the approved proposal a.ProposalID for carrying
// out a.Spec. It returns Done with the earlier result when the same action
// was already carried out (a retry); otherwise it checks MayDispatch (stop,
// level, approval, the action field by field) and then, in one
// transaction, checks the stop and the proposal's state again and inserts
// the claim, which fails if another call holds it. A claim older than
// lease (its holder died) is taken over. The caller then acts, and calls
// FinishExecution with its result, or ReleaseExecution when nothing was
// done outside the store.
func (s *Service) BeginExecution(ctx context.Context, a Action, actor string, lease time.Duration) (*Execution, error) {
	if a.ProposalID == "" || a.Spec == nil {
		return nil, invalid("an execution names an approved proposal and the action it carries out")
	}
	a.ProposalID = normID(a.ProposalID)
	req, err := s.requested(ctx, a.Spec)
	if err != nil {
		return nil, err
	}
	hash := req.Hash()
	row, err := loadExecution(ctx, s.db, a.ProposalID)
	if err != nil {
		return nil, err
	}
	if row != nil && row.state == execDone && row.ActionHash == hash {
		return row, nil
	}
	now, err := s.now(ctx)
	if err != nil {
		return nil, err
	}
	if row != nil && row.state == execClaimed && row.ActionHash == hash && !row.claimedAt.Before(now.Add(-lease)) {
		// Another call is carrying it out (and may already have changed
		// the proposal's state): wait for its result rather than judge.
		return nil, &BusyError{ProposalID: a.ProposalID, Actor: row.Actor, Since: row.claimedAt, Lease: lease}
	}
	permit, err := s.MayDispatch(ctx, a)
	if err != nil {
		if IsRefusal(err) {
			// A call that carried the approval out between the read above
			// and MayDispatch has moved the proposal on (executed): this
			// call is its retry, not a new dispatch.
			cur, lerr := loadExecution(ctx, s.db, a.ProposalID)
			if lerr != nil {
				return nil, lerr
			}
			if prior, perr := settled(cur, hash, now, lease); prior != nil || perr != nil {
				return prior, perr
			}
		}
		return nil, err
	}
	token := newToken()
	var out *Execution
	err = s.db.InTx(ctx, func(tx *store.Tx) error {
		out = nil
		stop, err := s.stopStatus(ctx, tx)
		if err != nil {
			return err
		}
		if stop.Active {
			return stop.Refusal()
		}
		var state string
		if err := tx.QueryRowContext(ctx, `SELECT state FROM approval_proposals WHERE id = ?`, a.ProposalID).Scan(&state); err != nil {
			return fmt.Errorf("read proposal %s: %w", a.ProposalID, err)
		}
		if State(state) != StateApproved {
			cur, err := loadExecution(ctx, tx, a.ProposalID)
			if err != nil {
				return err
			}
			prior, err := settled(cur, hash, now, lease)
			if prior != nil || err != nil {
				out = prior
				return err
			}
			return refuse("proposal %s is %s; only an approved proposal can run", a.ProposalID, state)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO approval_executions (proposal_id, action_hash, actor, state, token, claimed_ms, done_ms, result)
			VALUES (?, ?, ?, ?, ?, ?, 0, '') ON CONFLICT (proposal_id) DO NOTHING`, a.ProposalID, hash, actor, execClaimed, token, store.Millis(now))
		if err != nil {
			return fmt.Errorf("claim proposal %s: %w", a.ProposalID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			res, err = tx.ExecContext(ctx, `UPDATE approval_executions SET token = ?, actor = ?, claimed_ms = ?
				WHERE proposal_id = ? AND action_hash = ? AND state = ? AND claimed_ms < ?`,
				token, actor, store.Millis(now), a.ProposalID, hash, execClaimed, store.Millis(now.Add(-lease)))
			if err != nil {
				return fmt.Errorf("claim proposal %s: %w", a.ProposalID, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				cur, err := loadExecution(ctx, tx, a.ProposalID)
				if err != nil {
					return err
				}
				switch {
				case cur == nil:
					return fmt.Errorf("claim proposal %s: the claim vanished; call again", a.ProposalID)
				case cur.ActionHash != hash:
					return refuse("proposal %s was already claimed for another action (hash %s); an approval runs one action once", a.ProposalID, shortHash(cur.ActionHash))
				case cur.state == execDone:
					out = cur
					return nil
				}
				return &BusyError{ProposalID: a.ProposalID, Actor: cur.Actor, Since: cur.claimedAt, Lease: lease}
			}
		}
		out = &Execution{ProposalID: a.ProposalID, ActionHash: hash, Actor: actor, Permit: permit, token: token}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// settled is what a call for action hash learns from the execution row
// cur when the proposal is no longer approved: another call carried this
// same action out (its result, Done) or is carrying it out now (busy).
// Both nil: nothing of this action was claimed, and the refusal stands.
func settled(cur *Execution, hash string, now time.Time, lease time.Duration) (*Execution, error) {
	if cur == nil || cur.ActionHash != hash {
		return nil, nil
	}
	switch {
	case cur.state == execDone:
		return cur, nil
	case cur.state == execClaimed && !cur.claimedAt.Before(now.Add(-lease)):
		return nil, &BusyError{ProposalID: cur.ProposalID, Actor: cur.Actor, Since: cur.claimedAt, Lease: lease}
	}
	return nil, nil
}

// FinishExecution marks the claimed execution done with the result a
// retry is answered with. It reports false when the claim was no longer
// this call's (it lapsed and another call took it over).
func (s *Service) FinishExecution(ctx context.Context, e *Execution, result any) (bool, error) {
	if e == nil || e.Done {
		return false, nil
	}
	raw, err := json.Marshal(result)
	if err != nil {
		return false, fmt.Errorf("record the execution of %s: %w", e.ProposalID, err)
	}
	now, err := s.now(ctx)
	if err != nil {
		return false, err
	}
	res, err := s.db.ExecContext(ctx, `UPDATE approval_executions SET state = ?, result = ?, done_ms = ?, token = ''
		WHERE proposal_id = ? AND state = ? AND token = ?`, execDone, string(raw), store.Millis(now), e.ProposalID, execClaimed, e.token)
	if err != nil {
		return false, fmt.Errorf("record the execution of %s: %w", e.ProposalID, err)
	}
	n, err := res.RowsAffected()
	if n == 1 {
		e.Done, e.Result = true, raw
	}
	return n == 1, err
}

// ReleaseExecution gives the claim up after a call that did nothing
// outside the store (or whose outcome the next call can find without
// repeating it), so the next call may try again.
func (s *Service) ReleaseExecution(ctx context.Context, e *Execution) error {
	if e == nil || e.Done {
		return nil
	}
	_, err := s.db.ExecContext(ctx, `DELETE FROM approval_executions WHERE proposal_id = ? AND state = ? AND token = ?`,
		e.ProposalID, execClaimed, e.token)
	if err != nil {
		return fmt.Errorf("release the claim on %s: %w", e.ProposalID, err)
	}
	return nil
}

func loadExecution(ctx context.Context, q store.Querier, proposalID string) (*Execution, error) {
	var e Execution
	var state, result string
	var claimed int64
	err := q.QueryRowContext(ctx, `SELECT proposal_id, action_hash, actor, state, result, claimed_ms FROM approval_executions WHERE proposal_id = ?`,
		proposalID).Scan(&e.ProposalID, &e.ActionHash, &e.Actor, &state, &result, &claimed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the execution of %s: %w", proposalID, err)
	}
	e.state, e.claimedAt = state, store.FromMillis(claimed)
	if state == execDone {
		e.Done, e.Result = true, json.RawMessage(result)
	}
	return &e, nil
}

func newToken() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("approvals: no randomness: %v", err))
	}
	return hex.EncodeToString(b[:])
}
