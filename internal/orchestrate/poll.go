package orchestrate

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// PollParams asks for a run's status.
type PollParams struct {
	RunKey string `json:"run_key,omitempty" jsonschema:"the run_key a trigger tool returned; its run_id, upstream_key or proposal_id (with a single run) also work, here or in their own fields"`
	// RunID, UpstreamKey and ProposalID accept the other keys a trigger
	// tool returns under their own names, so a model passing any of them
	// finds the run.
	RunID       string `json:"run_id,omitempty" jsonschema:"the system's run id a trigger tool returned, instead of run_key"`
	UpstreamKey string `json:"upstream_key,omitempty" jsonschema:"the upstream_key a trigger tool returned, instead of run_key"`
	ProposalID  string `json:"proposal_id,omitempty" jsonschema:"the approved proposal whose single run to read, instead of run_key"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"how long to wait for the run to end, reading its status every few seconds; 0 (default) reads it once; at most 50 (an MCP client's request timeout is often 60 s): call again to keep waiting"`
}

// key is the first of the run's keys given.
func (p PollParams) key() string {
	for _, k := range []string{p.RunKey, p.RunID, p.UpstreamKey, p.ProposalID} {
		if strings.TrimSpace(k) != "" {
			return k
		}
	}
	return ""
}

// Poll reads a run's status from its system and records it, repeating
// until the run ends or WaitSeconds pass. A run that has ended is
// answered from the store. When it ends, its outcome goes to the receipt.
func (d *Dispatcher) Poll(ctx context.Context, p PollParams) (*RunResult, error) {
	maxWait := d.MaxWait
	if maxWait <= 0 {
		maxWait = MaxWait
	}
	if p.WaitSeconds < 0 {
		return nil, invalid("wait_seconds %d is out of range; valid: 0 to %d", p.WaitSeconds, int(maxWait.Seconds()))
	}
	// A longer wait would outlast the client's request timeout (60 s in
	// the TypeScript SDK, which progress resets only when the client
	// opts in), so it is capped and the answer says so.
	capped := time.Duration(p.WaitSeconds)*time.Second > maxWait
	if capped {
		p.WaitSeconds = int(maxWait.Seconds())
	}
	row, err := d.find(ctx, p.key())
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
	start := time.Now()
	deadline := start.Add(time.Duration(p.WaitSeconds) * time.Second)
	interval := d.PollInterval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	var lastErr error
	read := false
	for polls := 0; ; polls++ {
		if d.Progress != nil && p.WaitSeconds > 0 {
			d.Progress(time.Since(start).Seconds(), float64(p.WaitSeconds), fmt.Sprintf("run %s: reading its status (%d so far)", row.Key, polls+1))
		}
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
	waited := time.Since(start).Round(time.Second)
	switch {
	case !res.Terminal && ctx.Err() != nil:
		res.Summary += fmt.Sprintf(" (stopped waiting after %s: the call was cancelled)", waited)
	case !res.Terminal && p.WaitSeconds > 0:
		res.Summary += fmt.Sprintf(" (still not finished after waiting %s)", waited)
	}
	if capped && !res.Terminal {
		res.Summary += fmt.Sprintf(" (wait_seconds is capped at %d so the answer comes before a client's 60 s request timeout: call again to keep waiting)", int(maxWait.Seconds()))
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
