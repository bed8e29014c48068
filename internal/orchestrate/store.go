package orchestrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// Row states of orchestrate_runs.
const (
	rowClaimed       = "claimed"
	rowTriggerFailed = "trigger_failed"
	rowTriggered     = "triggered"
)

// Receipt progress of a row.
const (
	receiptNone      = ""
	receiptTriggered = "triggered"
	receiptFinished  = "finished"
)

// runRow is one row of orchestrate_runs.
type runRow struct {
	Key, UpstreamKey, ProposalID, IncidentID, ReceiptID string
	Domain, Kind, Basis, Actor                          string
	System                                              System
	Target, Params                                      string
	State, ClaimToken                                   string
	ClaimedMs                                           int64
	Attempts                                            int
	LastError, RunID, URL                               string
	TriggerUnknown                                      bool
	Existing                                            bool
	Status                                              State
	UpstreamStatus, StatusMessage                       string
	ReceiptState                                        string
	ReceiptClaimMs                                      int64
	CreatedMs, TriggeredMs, StartedMs, FinishedMs       int64
	PolledMs, UpdatedMs                                 int64
}

const runColumns = `run_key, upstream_key, proposal_id, incident_id, receipt_id, domain, kind, basis, actor, system, target, params,
	state, claim_token, claimed_ms, attempts, last_error, trigger_unknown, run_id, url, existing, status, upstream_status, status_message,
	receipt_state, receipt_claim_ms, created_ms, triggered_ms, started_ms, finished_ms, polled_ms, updated_ms`

type scanner interface{ Scan(dest ...any) error }

func scanRun(s scanner) (*runRow, error) {
	var r runRow
	var system, status string
	var existing, unknown int
	err := s.Scan(&r.Key, &r.UpstreamKey, &r.ProposalID, &r.IncidentID, &r.ReceiptID, &r.Domain, &r.Kind, &r.Basis, &r.Actor,
		&system, &r.Target, &r.Params, &r.State, &r.ClaimToken, &r.ClaimedMs, &r.Attempts, &r.LastError, &unknown, &r.RunID, &r.URL,
		&existing, &status, &r.UpstreamStatus, &r.StatusMessage, &r.ReceiptState, &r.ReceiptClaimMs, &r.CreatedMs,
		&r.TriggeredMs, &r.StartedMs, &r.FinishedMs, &r.PolledMs, &r.UpdatedMs)
	if err != nil {
		return nil, err
	}
	r.System, r.Status, r.Existing, r.TriggerUnknown = System(system), State(status), existing != 0, unknown != 0
	return &r, nil
}

// loadRun reads a row; nil without error when there is none.
func loadRun(ctx context.Context, q store.Querier, key string) (*runRow, error) {
	r, err := scanRun(q.QueryRowContext(ctx, `SELECT `+runColumns+` FROM orchestrate_runs WHERE run_key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", key, err)
	}
	return r, nil
}

func queryRuns(ctx context.Context, q store.Querier, where string, args ...any) ([]*runRow, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+runColumns+` FROM orchestrate_runs `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	defer rows.Close()
	var out []*runRow
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// insertClaim records a new row already claimed by token. It reports
// false when the key exists (another attempt got there first).
func insertClaim(ctx context.Context, q store.Querier, r *runRow) (bool, error) {
	res, err := q.ExecContext(ctx, `INSERT INTO orchestrate_runs (`+runColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, '', 0, '', '', 0, '', '', '', '', 0, ?, 0, 0, 0, 0, ?)
		ON CONFLICT (run_key) DO NOTHING`,
		r.Key, r.UpstreamKey, r.ProposalID, r.IncidentID, r.ReceiptID, r.Domain, r.Kind, r.Basis, r.Actor, string(r.System),
		r.Target, r.Params, rowClaimed, r.ClaimToken, r.ClaimedMs, r.CreatedMs, r.UpdatedMs)
	if err != nil {
		return false, fmt.Errorf("claim run %s: %w", r.Key, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// reclaim takes over a row whose last trigger failed, or whose claim
// outlived its lease (the process holding it died), for another attempt
// with these params.
func reclaim(ctx context.Context, q store.Querier, key, token, basis, params string, now time.Time, lease time.Duration) (bool, error) {
	nowMs := store.Millis(now)
	res, err := q.ExecContext(ctx, `UPDATE orchestrate_runs SET state = ?, claim_token = ?, claimed_ms = ?, attempts = attempts + 1,
		basis = ?, params = ?, updated_ms = ? WHERE run_key = ? AND (state = ? OR (state = ? AND claimed_ms < ?))`,
		rowClaimed, token, nowMs, basis, params, nowMs, key, rowTriggerFailed, rowClaimed, nowMs-lease.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("claim run %s: %w", key, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// markTriggered records the started run, if the claim is still ours.
func markTriggered(ctx context.Context, q store.Querier, key, token string, ref RunRef, now time.Time) (bool, error) {
	nowMs := store.Millis(now)
	existing := 0
	if ref.Existing {
		existing = 1
	}
	res, err := q.ExecContext(ctx, `UPDATE orchestrate_runs SET state = ?, claim_token = '', run_id = ?, url = ?, existing = ?,
		last_error = '', trigger_unknown = 0, triggered_ms = ?, updated_ms = ? WHERE run_key = ? AND state = ? AND claim_token = ?`,
		rowTriggered, ref.RunID, ref.URL, existing, nowMs, nowMs, key, rowClaimed, token)
	if err != nil {
		return false, fmt.Errorf("record run %s (%s run %s started): %w", key, ref.System, ref.RunID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// markFailed releases our claim after a failed trigger. unknown says the
// trigger got no answer, so the run may have started.
func markFailed(ctx context.Context, q store.Querier, key, token, msg string, unknown bool, now time.Time) error {
	u := 0
	if unknown {
		u = 1
	}
	_, err := q.ExecContext(ctx, `UPDATE orchestrate_runs SET state = ?, claim_token = '', last_error = ?, trigger_unknown = ?, updated_ms = ?
		WHERE run_key = ? AND state = ? AND claim_token = ?`, rowTriggerFailed, msg, u, store.Millis(now), key, rowClaimed, token)
	if err != nil {
		return fmt.Errorf("record failed trigger of run %s: %w", key, err)
	}
	return nil
}

// recordStatus stores a status read. A run that is already final keeps
// its first final status.
func recordStatus(ctx context.Context, q store.Querier, key string, st RunStatus, now time.Time) error {
	nowMs := store.Millis(now)
	var started, finished int64
	if !st.StartedAt.IsZero() {
		started = store.Millis(st.StartedAt)
	}
	if st.State.Terminal() {
		finished = nowMs
		if !st.FinishedAt.IsZero() {
			finished = store.Millis(st.FinishedAt)
		}
	}
	_, err := q.ExecContext(ctx, `UPDATE orchestrate_runs SET status = ?, upstream_status = ?, status_message = ?, started_ms = ?,
		finished_ms = ?, polled_ms = ?, updated_ms = ? WHERE run_key = ? AND state = ? AND status NOT IN (?, ?, ?)`,
		string(st.State), st.Upstream, st.Message, started, finished, nowMs, nowMs, key, rowTriggered,
		string(StateSucceeded), string(StateFailed), string(StateCanceled))
	if err != nil {
		return fmt.Errorf("record status of run %s: %w", key, err)
	}
	return nil
}

// claimReceipt takes the right to write the receipt step after from, so
// two processes finishing the same run write it once; a claim whose
// holder died lapses after lease.
func claimReceipt(ctx context.Context, q store.Querier, key, from string, now time.Time, lease time.Duration) (bool, error) {
	nowMs := store.Millis(now)
	res, err := q.ExecContext(ctx, `UPDATE orchestrate_runs SET receipt_claim_ms = ? WHERE run_key = ? AND receipt_state = ?
		AND receipt_claim_ms < ?`, nowMs, key, from, nowMs-lease.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("claim receipt of run %s: %w", key, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func setReceipt(ctx context.Context, q store.Querier, key, from, to string) error {
	_, err := q.ExecContext(ctx, `UPDATE orchestrate_runs SET receipt_state = ?, receipt_claim_ms = 0 WHERE run_key = ? AND receipt_state = ?`,
		to, key, from)
	if err != nil {
		return fmt.Errorf("record receipt of run %s: %w", key, err)
	}
	return nil
}
