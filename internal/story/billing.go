package story

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"time"

	"github.com/dataworkers/dw/internal/demo"
	"github.com/dataworkers/dw/internal/demo/tables"
)

// BillingRun is what story A's tools answered, in order.
type BillingRun struct {
	Timeline      demo.Instants `json:"timeline"`
	Backfill      *Call         `json:"backfill"`
	Check         *Call         `json:"check"`
	IncidentID    string        `json:"incident_id"`
	Diagnosis     *Call         `json:"diagnosis"`
	BlastRadius   *Call         `json:"blast_radius"`
	Compatibility *Call         `json:"compatibility"`
	Proposals     *Call         `json:"proposals"`
	ProposalIDs   []string      `json:"proposal_ids"`
	SchemaID      string        `json:"schema_proposal_id"`
	Refusal       *Call         `json:"refusal"`
	Approvals     []string      `json:"approvals"`
	Registration  *Call         `json:"registration"`
	Steps         []string      `json:"steps"`
	Verification  *Call         `json:"verification"`
	Receipt       *Call         `json:"receipt"`
	ReceiptVerify string        `json:"receipt_verify"`
}

var allAgents = []string{"dw-quality", "dw-incidents", "dw-context-catalog", "dw-schema", "dw-connectors"}

// Billing runs story A: a compatible schema change empties a column.
func Billing(ctx context.Context, e *Env) (*BillingRun, error) {
	e.say("Story A — usage billing: a compatible schema change empties a column.")
	pack, tl, pr, err := e.prepare(ctx, "billing", "sam", "bea")
	if err != nil {
		return nil, err
	}
	defer pr.close()
	run := &BillingRun{Timeline: tl}

	e.say("\n— 15:05: the five agents start over stdio (as an MCP client spawns them) —")
	a, err := e.start(ctx, allAgents, tl.QualityCheck)
	if err != nil {
		return nil, err
	}
	defer func() { a.close() }()

	e.say("\nFirst check of this table: record its history (21 days, hourly) so today is judged against it.")
	if run.Backfill, err = a.must(ctx, "dw-quality", "run_quality_check", map[string]any{
		"table": "usage.usage_hourly", "since": tl.HistoryStart.Format(time.RFC3339), "until": tl.Day.Format(time.RFC3339),
		"bucket": "hour", "no_incident": true}); err != nil {
		return run, err
	}
	if run.Check, err = a.must(ctx, "dw-quality", "run_quality_check", map[string]any{
		"table": "usage.usage_hourly", "period": "today", "bucket": "hour"}); err != nil {
		return run, err
	}
	run.IncidentID = str(run.Check.Out, "incidents", 0, "id")
	if run.IncidentID == "" {
		return run, fmt.Errorf("the quality check opened no incident: %s", run.Check.Text)
	}
	if run.Diagnosis, err = a.must(ctx, "dw-incidents", "diagnose_incident", map[string]any{"incident": run.IncidentID}); err != nil {
		return run, err
	}
	if run.BlastRadius, err = a.must(ctx, "dw-context-catalog", "blast_radius_analysis", map[string]any{
		"asset": "schema://api-usage-value", "columns": []string{"response_bytes"}}); err != nil {
		return run, err
	}
	v13, err := schemaFile(pack, "api-usage-value", 13)
	if err != nil {
		return run, err
	}
	if run.Compatibility, err = a.must(ctx, "dw-schema", "check_compatibility", map[string]any{
		"subject": "api-usage-value", "schema": v13}); err != nil {
		return run, err
	}
	if run.Proposals, err = a.must(ctx, "dw-incidents", "propose_remediation", billingProposals(run.IncidentID, v13)); err != nil {
		return run, err
	}
	for i := 0; ; i++ {
		id := str(run.Proposals.Out, "proposals", i, "id")
		if id == "" {
			break
		}
		run.ProposalIDs = append(run.ProposalIDs, id)
		if str(run.Proposals.Out, "proposals", i, "kind") == "schema_version" {
			run.SchemaID = id
		}
	}
	if len(run.ProposalIDs) != 4 || run.SchemaID == "" {
		return run, fmt.Errorf("want 4 proposals with one schema version, got %v", run.ProposalIDs)
	}
	registration := map[string]any{"subject": "api-usage-value", "schema": v13, "proposal_id": run.SchemaID}
	e.say("\nBefore anyone approves, the registration must refuse:")
	if run.Refusal, err = a.call(ctx, "dw-connectors", "register_stream_schema", registration); err != nil {
		return run, err
	}
	if !run.Refusal.IsError {
		return run, fmt.Errorf("register_stream_schema registered without an approval: %s", run.Refusal.Text)
	}

	e.say("\n— The named approver decides, as a person, at the terminal (no agent can approve) —")
	for i, id := range run.ProposalIDs {
		out, err := e.runDW(ctx, tl.QualityCheck, str(run.Proposals.Out, "proposals", i, "approver"), "approve", id, "--reason", "reviewed the diagnosis and the blast radius")
		if err != nil {
			return run, err
		}
		run.Approvals = append(run.Approvals, out)
	}
	if run.Registration, err = a.must(ctx, "dw-connectors", "register_stream_schema", registration); err != nil {
		return run, err
	}

	e.say("\n— 15:40: the owners run their approved steps (agents never change streams, jobs or tables) —")
	if err := tables.ApplyBillingFix(ctx, filepath.Join(e.Home, "demo.duckdb"), e.Now); err != nil {
		return run, err
	}
	for i, id := range run.ProposalIDs {
		if id == run.SchemaID {
			continue
		}
		did := stepText(run.Proposals.Out, id)
		out, err := e.runDW(ctx, tl.QualityCheck.Add(35*time.Minute), str(run.Proposals.Out, "proposals", i, "approver"), "step", id, "--did", did, "--done")
		if err != nil {
			return run, err
		}
		run.Steps = append(run.Steps, out)
	}
	a.close()

	e.say("\n— 16:05: verify (the agents restart an hour later) —")
	a, err = e.start(ctx, []string{"dw-incidents"}, tl.QualityCheck.Add(time.Hour))
	if err != nil {
		return run, err
	}
	if run.Verification, err = a.must(ctx, "dw-incidents", "remediate", map[string]any{"incident": run.IncidentID}); err != nil {
		return run, err
	}
	if run.Receipt, err = a.must(ctx, "dw-incidents", "get_receipt", map[string]any{"id": run.IncidentID}); err != nil {
		return run, err
	}
	if run.ReceiptVerify, err = e.runDW(ctx, tl.QualityCheck.Add(time.Hour), e.primary, "receipt", "verify", run.IncidentID); err != nil {
		return run, err
	}
	if md := str(run.Receipt.Out, "markdown"); md != "" {
		e.say("\n%s", md)
	}
	return run, nil
}

// stepText is what an owner says they did for a proposal.
func stepText(proposals map[string]any, id string) string {
	for i := 0; ; i++ {
		pid := str(proposals, "proposals", i, "id")
		if pid == "" {
			return "carried out the approved change"
		}
		if pid == id {
			return "carried out: " + str(proposals, "proposals", i, "what")
		}
	}
}

var _ = regexp.MustCompile

// billingProposals are the four fixes of story A, as a person in the
// client would ask dw-incidents to propose them.
func billingProposals(incident, v13 string) map[string]any {
	return map[string]any{
		"incident": incident,
		"proposals": []map[string]any{
			{"kind": "hold", "targets": []string{"airflow://dag/sync_metered_usage_to_stripe"},
				"what": "Pause the Stripe sync DAG until today's usage is corrected",
				"why":  "it would bill from egress_bytes that are null for today's hours",
				"undo": "unpause sync_metered_usage_to_stripe"},
			{"kind": "schema_version", "targets": []string{"schema://api-usage-value"},
				"what": "Register version 13 of api-usage-value: response_bytes back as optional beside response_kib",
				"why":  "version 12 removed response_bytes, which usage-hourly-rollup sums",
				"undo": "register version 12's schema again as the latest version", "schema": v13},
			{"kind": "replay", "targets": []string{"flink://usage-hourly-rollup"},
				"what":    "Deploy usage-hourly-v2 summing COALESCE(response_kib * 1024, response_bytes), replaying from today's 00:00 offsets",
				"why":     "today's rows read null response_bytes since the v12 rollout",
				"undo":    "stop usage-hourly-v2; the old statement's output is untouched",
				"details": map[string]any{"verify_table": "usage.usage_hourly_v2"}},
			{"kind": "diff", "targets": []string{"dbt://model.billing.fct_billable_egress"},
				"what": "dbt diff: read today's hours of usage from usage_hourly_v2",
				"why":  "fct_billable_egress turned today's missing bytes into 0",
				"undo": "point the dbt source back at usage.usage_hourly"},
		},
	}
}
