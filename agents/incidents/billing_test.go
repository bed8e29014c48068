package incidents

import (
	"github.com/dataworkers/dw/internal/changelog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/demo"
	"github.com/dataworkers/dw/internal/demo/tables"
	"github.com/dataworkers/dw/internal/incidents"
)

// egressNulls is the symptom dw-quality's 15:05 check reports on story A's
// landed table.
func egressNulls(tl demo.Instants) incidents.Symptom {
	return incidents.Symptom{
		Kind: incidents.SymptomNulls, Asset: "duckdb://usage.usage_hourly", Metric: "null_rate", Column: "egress_bytes",
		Observed: 0.183, Expected: 0, ExpectedLow: 0, ExpectedHigh: 0, At: tl.Day.Add(14 * time.Hour), Source: "run_quality_check",
		Detail: "egress_bytes null in 18.3% of today's rows (598 of 3,263), 0% in every earlier check, rising hour by hour since 14:00",
	}
}

// openBilling reports the symptom as dw-quality does and returns the
// incident it opened.
func openBilling(s *story) string {
	s.t.Helper()
	rep, err := s.env().svc.ReportSymptoms(s.ctx, incidents.ReportParams{Symptoms: []incidents.Symptom{egressNulls(s.tl)}, Actor: "dw-quality"})
	if err != nil {
		s.t.Fatal(err)
	}
	if len(rep.Incidents) != 1 || !rep.Incidents[0].Opened {
		s.t.Fatalf("report = %+v, want one incident opened", rep.Incidents)
	}
	return rep.Incidents[0].ID
}

func schemaText(t *testing.T, p *demo.Pack, subject string, version int) string {
	t.Helper()
	for _, s := range p.Subjects {
		for _, v := range s.Versions {
			if s.Subject == subject && v.Version == version {
				return v.Schema
			}
		}
	}
	t.Fatalf("pack has no %s version %d", subject, version)
	return ""
}

// billingProposals are the four remediations of story A as a model would
// write them after the diagnosis.
func billingProposals(t *testing.T, s *story) []ProposalSpec {
	return []ProposalSpec{
		{
			Kind: "hold", What: "Pause sync_metered_usage_to_stripe until egress_bytes is verified",
			Why:     "tonight's 23:00 run would report today's null egress to Stripe as zero usage",
			Targets: []string{"airflow://dag/sync_metered_usage_to_stripe"}, Scope: []string{"airflow://dag/sync_metered_usage_to_stripe"},
			Undo: "unpause the DAG: airflow dags unpause sync_metered_usage_to_stripe", Details: map[string]any{"dag_id": "sync_metered_usage_to_stripe"},
		},
		{
			Kind: "schema_version", What: "Register api-usage-value version 13: response_bytes back as optional beside response_kib",
			Targets: []string{"schema://api-usage-value"}, Scope: []string{"kafka://prod/api-usage", "flink://usage-hourly-rollup"},
			Undo:   "soft-delete version 13 of api-usage-value; producers keep writing version 12",
			Schema: schemaText(t, s.pack, "api-usage-value", 13), SchemaType: "AVRO",
		},
		{
			Kind: "replay", What: "Run the corrected statement summing COALESCE(response_kib * 1024, response_bytes) into usage-hourly-v2 from today's 00:00 offsets",
			Targets: []string{"flink://usage-hourly-rollup"}, Scope: []string{"kafka://prod/usage-hourly", "duckdb://usage.usage_hourly"},
			Undo: "stop the corrected statement and drop usage-hourly-v2; usage-hourly is left as it is",
			Details: map[string]any{"statement": "usage-hourly-rollup-v2", "from": s.tl.Day.Format(time.RFC3339),
				"verify_table": "usage.usage_hourly_v2", "replaces": "usage.usage_hourly"},
		},
		{
			Kind: "diff", What: "dbt: fct_billable_egress reads today's hours from usage.usage_hourly_v2",
			Targets: []string{"dbt://model.billing.fct_billable_egress"}, Scope: []string{"sigma://workbook/revenue-today", "airflow://dag/sync_metered_usage_to_stripe"},
			Undo:    "point the dbt source back to usage.usage_hourly",
			Details: map[string]any{"diff": "sources.yml: usage_hourly identifier usage_hourly -> usage_hourly_v2 for window_start >= today"},
		},
	}
}

// Story A end to end through the tools: the symptom opens an incident, the
// diagnosis ranks schema version 12 first with the statement that sums the
// removed field as evidence, four proposals go to the streaming and
// billing owners, people decide them, the owners' fix lands and the
// re-checks verify it, and the receipt's chain holds.
func TestBillingStory(t *testing.T) {
	s := newStory(t, "billing")
	s.osUserFor("sam")
	ctx, h := s.ctx, s.h
	id := openBilling(s)

	list, _, err := h.listIncidents(ctx, incidents.IncidentFilter{Status: "open"})
	if err != nil || len(list.Incidents) != 1 || list.Incidents[0].ID != id {
		t.Fatalf("open incidents = %+v, %v", list, err)
	}

	diag, summary, err := h.diagnose(ctx, DiagnoseIn{Incident: id})
	if err != nil {
		t.Fatal(err)
	}
	top := diag.Diagnosis.Causes[0]
	if top.Change.Kind != changelog.ChangeSchemaVersion || !strings.Contains(top.Change.Summary, "version 12") {
		t.Fatalf("top cause %q (%s); want schema version 12:\n%s", top.Change.Summary, top.Change.Kind, summary)
	}
	if !slices.Equal(top.Readers, []string{"flink://usage-hourly-rollup"}) {
		t.Errorf("readers %v, want the rollup statement", top.Readers)
	}
	contained(t, "top cause evidence", strings.Join(top.Evidence, "\n"),
		"flink://usage-hourly-rollup reads response_bytes from kafka://prod/api-usage (recorded SQL: COUNT(response_bytes), SUM(response_bytes))",
		"schema://api-usage-value is 4 hop(s) upstream of duckdb://usage.usage_hourly", "egress_bytes null in 18.3%")
	// The most recent change, the gateway's rolling deploy at 14:10, is
	// not the cause: it only started producing version 12.
	if second := diag.Diagnosis.Causes[1]; !strings.Contains(second.Change.Summary, "api-gateway") || !second.Change.At.After(top.Change.At) ||
		second.Confidence >= top.Confidence {
		t.Errorf("second cause %q at %s (%.2f); want the later gateway deploy ranked below %.2f", second.Change.Summary, second.Change.At, second.Confidence, top.Confidence)
	}
	br := diag.BlastRadius
	if len(br.Assets) == 0 || br.Assets[0].ID != "airflow://dag/sync_metered_usage_to_stripe" || !br.Assets[0].NextRun.Equal(s.tl.StripeDAG) {
		t.Fatalf("blast radius should put the Stripe DAG running at %s first: %+v", s.tl.StripeDAG, br)
	}
	var reached []string
	for _, a := range br.Assets {
		reached = append(reached, a.ID)
	}
	for _, want := range []string{"dbt://model.billing.fct_billable_egress", "sigma://workbook/revenue-today"} {
		if !slices.Contains(reached, want) {
			t.Errorf("blast radius %v lacks %s", reached, want)
		}
	}
	contained(t, "diagnosis summary", summary, "Blast radius", "airflow://dag/sync_metered_usage_to_stripe [money, outbound] next run 2026-03-10 23:00 UTC (owner Bea Lindqvist)")

	prop, summary, err := h.propose(ctx, ProposeIn{Incident: id, Proposals: billingProposals(t, s)})
	if err != nil {
		t.Fatal(err)
	}
	if prop.Status != "proposed" || len(prop.Proposals) != 4 {
		t.Fatalf("propose = %+v", prop)
	}
	approver := map[string]string{}
	for _, p := range prop.Proposals {
		approver[p.ID] = p.Approver
		if !strings.Contains(p.HowToDecide, "dw approve "+p.ID) {
			t.Errorf("%s: how to decide = %q", p.ID, p.HowToDecide)
		}
		switch p.Kind {
		case "schema_version", "replay":
			// The streaming platform owner approves, the billing data owner is copied.
			if p.Approver != "sam" || !slices.Contains(p.Copied, "bea") {
				t.Errorf("%s (%s): approver %s, copied %v; want sam with bea copied", p.ID, p.Kind, p.Approver, p.Copied)
			}
		default:
			// The DAG and the model are billing's: their owner approves,
			// the streaming owner is copied.
			if p.Approver != "bea" || !slices.Contains(p.Copied, "sam") {
				t.Errorf("%s (%s): approver %s, copied %v; want bea with sam copied", p.ID, p.Kind, p.Approver, p.Copied)
			}
		}
		if !p.ExpiresAt.After(s.tl.QualityCheck) {
			t.Errorf("%s expires at %s", p.ID, p.ExpiresAt)
		}
	}
	schema := prop.Proposals[1]
	canon, err := compat.Canonicalize(compat.Avro, compat.Schema{Text: schemaText(t, s.pack, "api-usage-value", 13)})
	if err != nil {
		t.Fatal(err)
	}
	if schema.Class != "live" || schema.Details["subject"] != "api-usage-value" || schema.Details["schema_type"] != "AVRO" ||
		schema.Details["schema_sha256"] != canon.SHA256 {
		t.Errorf("schema proposal binds %v (class %s); want subject, AVRO and %s", schema.Details, schema.Class, canon.SHA256)
	}
	contained(t, "propose summary", summary, "approver Sam Okafor (sam)", "dw approve")

	// Nothing is verified while people have not decided.
	_, _, err = h.remediate(ctx, RemediateIn{Incident: id})
	wantErr(t, err, "not decided yet", "waits for", "dw approve")
	if inc, _ := s.env().svc.GetIncident(ctx, id); inc.Status != incidents.StatusProposed {
		t.Errorf("status after a refused remediate = %s, want proposed", inc.Status)
	}

	for pid, who := range approver {
		login := who
		if who == "sam" {
			login = config.CurrentOSUser()
		}
		if p := s.decide(pid, login, approvals.VerdictApprove); p.State != approvals.StateApproved {
			t.Fatalf("%s is %s after approval", pid, p.State)
		}
	}
	// The owners' fix has not landed yet: the replacement table is missing.
	_, _, err = h.remediate(ctx, RemediateIn{Incident: id})
	wantErr(t, err, "usage.usage_hourly_v2", "is not in warehouse demo", "nothing was changed")

	s.clk.Set(s.tl.Fix)
	if err := tables.ApplyBillingFix(ctx, s.whPath, s.tl.Fix); err != nil {
		t.Fatal(err)
	}
	s.clk.Set(s.tl.Verify)
	rem, summary, err := h.remediate(ctx, RemediateIn{Incident: id, Note: "v13 registered, corrected statement replayed from 00:00, dbt reads usage_hourly_v2"})
	if err != nil {
		t.Fatal(err)
	}
	if !rem.Verified || rem.Status != "verified" {
		t.Fatalf("not verified: %s\n%s\nnotes: %q", rem.Reason, summary, rem.Notes)
	}
	a := rem.Assertions[0]
	if !a.Passed || !strings.Contains(a.Checked, "null_rate(egress_bytes) on usage.usage_hourly_v2") || !strings.Contains(a.Checked, "per hour since "+s.tl.Day.Format("2006-01-02")+" 00:00") {
		t.Errorf("assertion = %+v", a)
	}
	var names []string
	for _, c := range rem.Checks {
		names = append(names, c.Name)
		if !c.Passed {
			t.Errorf("check in scope failed: %+v", c)
		}
	}
	for _, want := range []string{"uniqueness(usage_id) duplicate_rate on duckdb://usage.usage_hourly_v2", "load_lag(ingested_at - window_start) load_lag_avg_seconds on duckdb://usage.usage_hourly_v2"} {
		if !slices.Contains(names, want) {
			t.Errorf("checks in scope %q lack %q", names, want)
		}
	}
	contained(t, "notes", strings.Join(rem.Notes, "\n"), "had no recorded history")

	rec, summary, err := h.getReceipt(ctx, ReceiptIn{ID: strings.ToLower(id)})
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Intact || rec.ID != id {
		t.Fatalf("receipt %s intact=%v: %v", rec.ID, rec.Intact, rec.Problems)
	}
	var kinds []string
	for _, e := range rec.Entries {
		kinds = append(kinds, e.Kind)
	}
	if kinds[0] != approvals.EntryCause || kinds[len(kinds)-1] != EntryVerification {
		t.Errorf("receipt entries %v: want the cause first and the verification last", kinds)
	}
	for _, k := range []string{approvals.EntryProposal, approvals.EntryDecision} {
		if n := countOf(kinds, k); n != 4 {
			t.Errorf("%d %s entries, want 4", n, k)
		}
	}
	last := rec.Entries[len(rec.Entries)-1].Facts
	if last["verified"] != true || len(last["checks_before"].([]any)) != 1 || len(last["checks_after"].([]any)) < 5 {
		t.Errorf("verification entry %v", last)
	}
	// The receipt says which table the checks read for the replaced one.
	repl, _ := last["replacements"].([]any)
	if len(repl) != 1 {
		t.Fatalf("replacements in the verification entry: %v", last["replacements"])
	}
	if r, _ := repl[0].(map[string]any); r["replaces"] != "usage.usage_hourly" || r["with"] != "usage.usage_hourly_v2" {
		t.Errorf("replacement recorded %v", r)
	}
	contained(t, "receipt markdown", rec.Markdown, "Chain: intact", "## Cause", "version 12", "## Undo", "point the dbt source back to usage.usage_hourly", "verified:")
	contained(t, "receipt summary", summary, "dw receipt verify "+id)
	byProposal, _, err := h.getReceipt(ctx, ReceiptIn{ID: prop.Proposals[0].ID})
	if err != nil || byProposal.ID != id {
		t.Errorf("receipt by proposal = %v, %v; want the incident's", byProposal, err)
	}
	if v, err := approvals.Verify(ctx, s.db(), id); err != nil || !v.OK {
		t.Errorf("dw receipt verify %s: %+v, %v", id, v, err)
	}

	closed, _, err := h.closeIncident(ctx, CloseIn{Incident: id})
	if err != nil || closed.Incident.Status != incidents.StatusClosed {
		t.Fatalf("close: %+v, %v", closed, err)
	}
	hist, _, err := h.history(ctx, incidents.HistoryParams{Asset: "duckdb://usage.usage_hourly"})
	if err != nil || len(hist.Incidents) != 1 || hist.Incidents[0].TopCause == nil || hist.Incidents[0].TopCause.Kind != changelog.ChangeSchemaVersion {
		t.Errorf("history = %+v, %v", hist, err)
	}
}

func countOf(list []string, v string) int {
	n := 0
	for _, x := range list {
		if x == v {
			n++
		}
	}
	return n
}
