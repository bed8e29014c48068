package orchestrate

import (
	"context"
	"fmt"
	"time"
)

// PollParams asks for a run's status.
type PollParams struct {
	RunKey      string `json:"run_key" jsonschema:"the run_key a trigger tool returned (a proposal id with a single run, or the system's run id, also work)"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"how long to wait for the run to end, reading its status every few seconds; 0 (default) reads it once; at most 600"`
}

// Poll reads a run's status from its system and records it, repeating
// until the run ends or WaitSeconds pass. A run that has ended is
// answered from the store. When it ends, its outcome goes to the receipt.
func (d *Dispatcher) Poll(ctx context.Context, p PollParams) (*RunResult, error) {
	if p.WaitSeconds < 0 || time.Duration(p.WaitSeconds)*time.Second > MaxWait {
		return nil, invalid("wait_seconds %d is out of range; valid: 0 to %d", p.WaitSeconds, int(MaxWait.Seconds()))
	}
	row, err := d.find(ctx, p.RunKey)
	if err != nil {
		return nil, err
	}
	if row.State != rowTriggered || row.Status.Terminal() {
		return d.result(ctx, row, false), nil
	}
	runner, err := d.runners.get(row.System)
	if err != nil {
		return nil, err
	}
	ref := RunRef{System: row.System, Target: row.Target, RunID: row.RunID, URL: row.URL}
	deadline := time.Now().Add(time.Duration(p.WaitSeconds) * time.Second)
	interval := d.PollInterval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	var lastErr error
	read := false
	for {
		st, err := runner.Status(ctx, ref)
		if err == nil {
			read, lastErr = true, nil
			if err := recordStatus(context.WithoutCancel(ctx), d.db, row.Key, st, d.clk.Now()); err != nil {
				return nil, err
			}
			if st.State.Terminal() {
				break
			}
		} else {
			lastErr = err
		}
		left := time.Until(deadline)
		if left <= 0 || !sleep(ctx, min(interval, left)) {
			break
		}
	}
	if lastErr != nil && !read {
		return nil, fmt.Errorf("status of run %s (%s): %w", row.Key, row.URL, lastErr)
	}
	cur, err := loadRun(context.WithoutCancel(ctx), d.db, row.Key)
	if err != nil {
		return nil, err
	}
	res := d.result(context.WithoutCancel(ctx), cur, false)
	if !res.Terminal && p.WaitSeconds > 0 {
		res.Summary += fmt.Sprintf(" (still not finished after waiting %ds)", p.WaitSeconds)
	}
	if lastErr != nil {
		res.Summary += fmt.Sprintf(" (the last status read failed: %v)", lastErr)
	}
	return res, nil
}

// sleep waits d, or less if ctx ends; it reports whether it waited.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
