package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dataworkers/dw/internal/approvals"
)

// nextReceipt is the receipt step a row still owes: the start once it is
// triggered, the outcome once it has ended.
func nextReceipt(r *runRow) string {
	switch {
	case r.State != rowTriggered:
		return ""
	case r.ReceiptState == receiptNone:
		return receiptTriggered
	case r.ReceiptState == receiptTriggered && r.Status.Terminal():
		return receiptFinished
	}
	return ""
}

// writeReceipt writes the steps a row owes to its receipt, each once: a
// claim in the row keeps two processes from writing the same step, and a
// step found in the receipt already (its writer died before marking the
// row) is not written again.
func (d *Dispatcher) writeReceipt(ctx context.Context, r *runRow) error {
	for {
		next := nextReceipt(r)
		if next == "" {
			return nil
		}
		from := r.ReceiptState
		ok, err := claimReceipt(ctx, d.db, r.Key, from, d.clk.Now(), d.ClaimLease)
		if err != nil || !ok {
			return err // !ok: another call is writing it
		}
		if err := d.writeStep(ctx, r, next); err != nil {
			_ = setReceipt(ctx, d.db, r.Key, from, from) // release the claim for the next call
			return err
		}
		if err := setReceipt(ctx, d.db, r.Key, from, next); err != nil {
			return err
		}
		r.ReceiptState = next
	}
}

func (d *Dispatcher) writeStep(ctx context.Context, r *runRow, event string) error {
	written, err := d.stepWritten(ctx, r, event)
	if err != nil || written {
		return err
	}
	st := stepFor(r, event)
	if r.ProposalID != "" {
		_, err = d.approvals.RecordStep(ctx, r.ProposalID, st)
		return err
	}
	// An open-class run has no proposal: its step goes straight into the
	// incident's (or its own) receipt, in the shape RecordStep writes.
	payload := map[string]any{"description": st.Description, "checks_before": nonNilChecks(st.ChecksBefore),
		"checks_after": nonNilChecks(st.ChecksAfter), "details": st.Details}
	_, err = approvals.AppendReceipt(ctx, d.db, d.clk.Now(), r.ReceiptID, approvals.EntryStep, st.Actor, payload)
	return err
}

func nonNilChecks(c []approvals.Check) []approvals.Check {
	if c == nil {
		return []approvals.Check{}
	}
	return c
}

// stepWritten looks for the step in the receipt.
func (d *Dispatcher) stepWritten(ctx context.Context, r *runRow, event string) (bool, error) {
	entries, err := approvals.Entries(ctx, d.db, r.ReceiptID)
	if err != nil {
		return false, fmt.Errorf("read receipt %s: %w", r.ReceiptID, err)
	}
	for _, e := range entries {
		if e.Kind != approvals.EntryStep {
			continue
		}
		var p struct {
			Details struct {
				RunKey string `json:"run_key"`
				Event  string `json:"event"`
			} `json:"details"`
		}
		if json.Unmarshal(e.Payload, &p) == nil && p.Details.RunKey == r.Key && p.Details.Event == event {
			return true, nil
		}
	}
	return false, nil
}

// stepFor is the receipt step for a run event: who ran what, where, on
// what grounds, and how it ended.
func stepFor(r *runRow, event string) approvals.Step {
	details := map[string]any{"run_key": r.Key, "event": event, "system": string(r.System), "target": r.Target,
		"run_id": r.RunID, "url": r.URL}
	st := approvals.Step{Actor: r.Actor, Details: details}
	switch event {
	case receiptTriggered:
		var params any
		_ = json.Unmarshal([]byte(r.Params), &params)
		details["params"] = params
		details["upstream_key"] = r.UpstreamKey
		details["basis"] = r.Basis
		details["domain"] = r.Domain
		details["kind"] = r.Kind
		details["attempts"] = r.Attempts
		setTime(details, "triggered_at", r.TriggeredMs)
		details["found_existing"] = r.Existing
		st.Description = fmt.Sprintf("started %s run %s of %s (%s)", r.System, r.RunID, r.Target, r.URL)
		if r.Existing {
			st.Description = fmt.Sprintf("found %s run %s of %s already started under key %s (%s)", r.System, r.RunID, r.Target, r.UpstreamKey, r.URL)
		}
	case receiptFinished:
		details["status"] = string(r.Status)
		details["upstream_status"] = r.UpstreamStatus
		details["message"] = r.StatusMessage
		setTime(details, "started_at", r.StartedMs)
		setTime(details, "finished_at", r.FinishedMs)
		st.Description = fmt.Sprintf("%s run %s of %s ended: %s", r.System, r.RunID, r.Target, r.Status)
		detail := r.UpstreamStatus
		if r.StatusMessage != "" {
			detail += ": " + r.StatusMessage
		}
		st.ChecksAfter = []approvals.Check{{Name: fmt.Sprintf("%s run %s succeeded", r.System, r.RunID),
			Passed: r.Status == StateSucceeded, Detail: detail}}
	}
	return st
}

func setTime(m map[string]any, k string, ms int64) {
	if ms != 0 {
		m[k] = millis(ms)
	}
}
