package story

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/demo"
	"github.com/dataworkers/dw/internal/demo/tables"
)

// LoyaltyRun is what story B's tools answered, in order.
type LoyaltyRun struct {
	Timeline       demo.Instants `json:"timeline"`
	MetricBackfill *Call         `json:"metric_backfill"`
	TiersBackfill  *Call         `json:"tiers_backfill"`
	Metric         *Call         `json:"metric"`
	IncidentID     string        `json:"incident_id"`
	Backfill       *Call         `json:"backfill"`
	Check          *Call         `json:"check"`
	Diagnosis      *Call         `json:"diagnosis"`
	BlastRadius    *Call         `json:"blast_radius"`
	Proposals      *Call         `json:"proposals"`
	ProposalIDs    []string      `json:"proposal_ids"`
	Savepoint      string        `json:"savepoint"`
	StopSavepoint  string        `json:"stop_savepoint"`
	Approvals      []string      `json:"approvals"`
	Steps          []string      `json:"steps"`
	Verification   *Call         `json:"verification"`
	Recheck        *Call         `json:"recheck"`
	TierDowngrades *Call         `json:"tier_downgrades"`
	Receipt        *Call         `json:"receipt"`
	ReceiptVerify  string        `json:"receipt_verify"`
}

// Loyalty runs story B: a clean restore that dropped state.
func Loyalty(ctx context.Context, e *Env) (*LoyaltyRun, error) {
	e.say("Story B — loyalty points: a clean restore that dropped state.")
	// Priya owns points-balance; Tomás (loyalty data, nightly_tiers) and
	// Lena (the Hightouch sync) decide the holds on their own assets.
	_, tl, pr, err := e.prepare(ctx, "loyalty", "priya", "tomas", "lena")
	if err != nil {
		return nil, err
	}
	defer pr.close()
	run := &LoyaltyRun{Timeline: tl}

	e.say("\n— 15:05: the five agents start over stdio (as an MCP client spawns them) —")
	a, err := e.start(ctx, allAgents, tl.QualityCheck)
	if err != nil {
		return nil, err
	}
	defer func() { a.close() }()

	e.say("\nThe team's metrics were just defined: record their history (21 days) so today is judged against it.")
	if run.MetricBackfill, err = a.must(ctx, "dw-incidents", "monitor_metrics", map[string]any{
		"metric": "avg_balance_active_last_hour", "backfill": true,
		"window": map[string]any{"start": tl.HistoryStart.Format(time.RFC3339), "end": tl.Day.Format(time.RFC3339)}}); err != nil {
		return run, err
	}
	if run.TiersBackfill, err = a.must(ctx, "dw-incidents", "monitor_metrics", map[string]any{
		"metric": "tier_downgrades", "backfill": true,
		"window": map[string]any{"start": tl.HistoryStart.Format(time.RFC3339), "end": tl.Day.Format(time.RFC3339)}}); err != nil {
		return run, err
	}
	e.say("\nToday's complete hours of the team's metric, judged:")
	if run.Metric, err = a.must(ctx, "dw-incidents", "monitor_metrics", map[string]any{
		"metric": "avg_balance_active_last_hour", "include_points": true,
		"window": map[string]any{"start": tl.Day.Format(time.RFC3339), "end": tl.QualityCheck.Truncate(time.Hour).Format(time.RFC3339)}}); err != nil {
		return run, err
	}
	run.IncidentID = str(run.Metric.Out, "incidents", 0, "id")
	if run.IncidentID == "" {
		return run, fmt.Errorf("the metric opened no incident: %s", run.Metric.Text)
	}

	e.say("\nIs the table itself broken? First check of it: record its history, then check today.")
	if run.Backfill, err = a.must(ctx, "dw-quality", "run_quality_check", map[string]any{
		"table": "loyalty.member_balances", "since": tl.HistoryStart.Format(time.RFC3339), "until": tl.Day.Format(time.RFC3339),
		"bucket": "hour", "no_incident": true}); err != nil {
		return run, err
	}
	if run.Check, err = a.must(ctx, "dw-quality", "run_quality_check", map[string]any{
		"table": "loyalty.member_balances", "period": "today", "bucket": "hour"}); err != nil {
		return run, err
	}

	if run.Diagnosis, err = a.must(ctx, "dw-incidents", "diagnose_incident", map[string]any{"incident": run.IncidentID}); err != nil {
		return run, err
	}
	if run.BlastRadius, err = a.must(ctx, "dw-context-catalog", "blast_radius_analysis", map[string]any{
		"asset": "duckdb://loyalty.member_balances"}); err != nil {
		return run, err
	}

	// The redeploy restores the savepoint the diagnosis names (the one the
	// restore skipped state from), and stops the running job with a fresh
	// savepoint beside it so the undo can bring that job back as it runs.
	run.Savepoint = str(run.Diagnosis.Out, "diagnosis", "causes", 0, "change", "details", "savepoint")
	job := str(run.Diagnosis.Out, "diagnosis", "causes", 0, "change", "details", "job_id")
	if run.Savepoint == "" || job == "" {
		return run, fmt.Errorf("the top cause records no savepoint and job id to redeploy from: %s", run.Diagnosis.Text)
	}
	// The new savepoint goes beside the old one (path.Dir would fold s3://).
	run.StopSavepoint = run.Savepoint[:strings.LastIndex(run.Savepoint, "/")+1] + "stop-" + job[:min(6, len(job))] + "-before-v4.1-redeploy"
	if run.Proposals, err = a.must(ctx, "dw-incidents", "propose_remediation", loyaltyProposals(run.IncidentID, run.Savepoint, run.StopSavepoint, job)); err != nil {
		return run, err
	}
	for i := 0; ; i++ {
		id := str(run.Proposals.Out, "proposals", i, "id")
		if id == "" {
			break
		}
		run.ProposalIDs = append(run.ProposalIDs, id)
	}
	if len(run.ProposalIDs) != 4 {
		return run, fmt.Errorf("want 4 proposals, got %v", run.ProposalIDs)
	}

	e.say("\n— Each named approver decides, as a person, at the terminal (no agent can approve) —")
	for i, id := range run.ProposalIDs {
		out, err := e.runDW(ctx, tl.QualityCheck, str(run.Proposals.Out, "proposals", i, "approver"), "approve", id, "--reason", "reviewed the diagnosis and the blast radius")
		if err != nil {
			return run, err
		}
		run.Approvals = append(run.Approvals, out)
	}

	e.say("\n— 15:40: the owners run their approved steps (agents never change streams, jobs or tables) —")
	if err := tables.ApplyLoyaltyFix(ctx, filepath.Join(e.Home, "demo.duckdb"), e.Now); err != nil {
		return run, err
	}
	for i, id := range run.ProposalIDs {
		did := stepText(run.Proposals.Out, id)
		if str(run.Proposals.Out, "proposals", i, "kind") == "diff" {
			did = fmt.Sprintf("stopped points-balance v4.2 (job %s) with a savepoint to %s; redeployed v4.1 from %s with allowNonRestoredState: false (every operator's state restored)",
				job, run.StopSavepoint, run.Savepoint)
		}
		out, err := e.runDW(ctx, tl.Fix, str(run.Proposals.Out, "proposals", i, "approver"), "step", id, "--did", did, "--done")
		if err != nil {
			return run, err
		}
		run.Steps = append(run.Steps, out)
	}
	a.close()

	e.say("\n— 16:05: verify (the agents restart an hour later) —")
	a, err = e.start(ctx, []string{"dw-incidents", "dw-quality"}, tl.Verify)
	if err != nil {
		return run, err
	}
	if run.Verification, err = a.must(ctx, "dw-incidents", "remediate", map[string]any{
		"incident": run.IncidentID, "note": "v4.1 redeployed from the 14:00 savepoint with its state"}); err != nil {
		return run, err
	}
	if run.Recheck, err = a.must(ctx, "dw-quality", "run_quality_check", map[string]any{
		"table": "loyalty.member_balances", "period": "today", "bucket": "hour"}); err != nil {
		return run, err
	}
	e.say("\nThe verification run of nightly_tiers: are today's tier downgrades in line with the baseline?")
	if run.TierDowngrades, err = a.must(ctx, "dw-incidents", "monitor_metrics", map[string]any{
		"metric": "tier_downgrades", "include_points": true,
		"window": map[string]any{"start": tl.Day.Format(time.RFC3339), "end": tl.Verify.Format(time.RFC3339)}}); err != nil {
		return run, err
	}
	if run.Receipt, err = a.must(ctx, "dw-incidents", "get_receipt", map[string]any{"id": run.IncidentID}); err != nil {
		return run, err
	}
	if run.ReceiptVerify, err = e.runDW(ctx, tl.Verify, e.primary, "receipt", "verify", run.IncidentID); err != nil {
		return run, err
	}
	if md := str(run.Receipt.Out, "markdown"); md != "" {
		e.say("\n%s", md)
	}
	return run, nil
}

// loyaltyProposals are story B's fixes, as a person in the client would
// ask dw-incidents to propose them: hold the two consumers of the wrong
// balances, redeploy v4.1 from the savepoint with its state, and hold v4.2.
func loyaltyProposals(incident, savepoint, stopSavepoint, job string) map[string]any {
	return map[string]any{
		"incident": incident,
		"proposals": []map[string]any{
			{"kind": "hold", "targets": []string{"hightouch://sync/braze-tier-changes"},
				"what": "Pause the Hightouch sync braze-tier-changes until balances are verified",
				"why":  "at 22:00 it would send Braze tier downgrades computed from balances that restarted at zero",
				"undo": "resume the sync braze-tier-changes in Hightouch"},
			{"kind": "hold", "targets": []string{"dbt-cloud://job/nightly_tiers"}, "scope": []string{"dbt://model.loyalty.fct_member_tier"},
				"what": "Skip tonight's nightly_tiers run until balances are verified",
				"why":  "at 21:30 it would rebuild fct_member_tier from the wrong balances",
				"undo": "re-enable the nightly_tiers schedule in dbt Cloud"},
			{"kind": "diff", "targets": []string{"flink://points-balance"},
				"scope": []string{"kafka://prod/member-balances", "duckdb://loyalty.member_balances"},
				"what":  "Deployment diff: redeploy points-balance v4.1 from the 14:00 savepoint with allowNonRestoredState: false",
				"why":   "the 14:00 savepoint still holds every member's SUM(points); restoring it with its state rewrites the balances since 14:00",
				"undo":  "revert the deployment diff: stop v4.1 and restore v4.2 from the savepoint it was stopped with (" + stopSavepoint + ")",
				"details": map[string]any{
					"version": "v4.1", "savepoint": savepoint, "allowNonRestoredState": false,
					"stop_job_id": job, "stop_with_savepoint": stopSavepoint,
				}},
			{"kind": "hold", "targets": []string{"flink://points-balance"},
				"what": "Hold release v4.2 until its state migration is planned",
				"why":  "v4.2 changes the aggregate, so its savepoint state does not map onto the new job graph",
				"undo": "release v4.2 again with a planned state migration"},
		},
	}
}
