package incidents

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/deps/clients"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/orchestrate"
	"github.com/dataworkers/dw/internal/remediate"
)

// EntryVerification is the receipt entry remediate writes: the checks as
// they fired, as they were re-run, and the outcome.
const EntryVerification = remediate.EntryVerification

// RemediateIn asks for a fix to be verified.
type RemediateIn struct {
	Incident string     `json:"incident" jsonschema:"incident id, e.g. INC-3"`
	Note     string     `json:"note,omitempty" jsonschema:"what the owners did, in their words, for the timeline and the receipt"`
	FixedAt  *time.Time `json:"fixed_at,omitempty" jsonschema:"when the owners' fix took effect (RFC 3339); a table that should stay empty or stop growing is judged from then; default the latest approval of the incident's proposals"`
}

// AssertionResult is one assertion that fired, re-run after the fix.
type AssertionResult = remediate.AssertionResult

// RemediateOut is the verification of a fix.
type RemediateOut struct {
	Incident   string                  `json:"incident" jsonschema:"incident id"`
	Status     string                  `json:"status" jsonschema:"incident status after verification: verified, escalated, or fixing when not verifiable yet"`
	Outcome    string                  `json:"outcome" jsonschema:"verified, escalated, or not_verifiable_yet (nothing failed but a symptomatic asset has no judged check; see unjudged)"`
	Unjudged   []string                `json:"unjudged,omitempty" jsonschema:"symptomatic assets with no judged passing check, and what is missing"`
	Verified   bool                    `json:"verified" jsonschema:"true only when every assertion that fired and every check in scope passed"`
	Reason     string                  `json:"reason" jsonschema:"the outcome in words"`
	Caveats    []string                `json:"caveats,omitempty" jsonschema:"what the outcome rests on that a person should weigh, e.g. a metric redefined after the onset (when and by whom); also in the reason and the receipt"`
	Assertions []AssertionResult       `json:"assertions" jsonschema:"the assertions that fired, re-run: failures first, the first 50 (assertions_total counts them all; the receipt holds every one)"`
	Checks     []incidents.CheckResult `json:"checks" jsonschema:"the checks in scope that could be judged, re-run: failures first, the first 50 (checks_total counts them all; the receipt holds every one)"`
	Notes      []string                `json:"notes" jsonschema:"what was not judged and why, history scans, anomalies from before the onset: the first 20 (notes_total)"`
	// The totals count every re-run; the lists above name the first.
	AssertionsTotal int             `json:"assertions_total" jsonschema:"assertions re-run, in all"`
	ChecksTotal     int             `json:"checks_total" jsonschema:"checks in scope re-run, in all"`
	NotesTotal      int             `json:"notes_total" jsonschema:"notes in all"`
	UnjudgedTotal   int             `json:"unjudged_total,omitempty" jsonschema:"symptomatic assets with no judged passing check, in all"`
	Proposals       []ProposalState `json:"proposals" jsonschema:"the incident's proposals and their decisions: the latest 30 (proposals_total counts them all)"`
	ProposalsTotal  int             `json:"proposals_total,omitempty" jsonschema:"the incident's proposals, in all"`
	EscalatedTo     []string        `json:"escalated_to,omitempty" jsonschema:"people the failed verification goes to: the approvers of the fix"`
	// Metrics are the metric definitions computed or judged with.
	Metrics []remediate.MetricUsed `json:"metrics,omitempty" jsonschema:"every metric definition the verification computed or judged with: its SQL's SHA-256, when and by whom it was defined, whether it changed after the onset (also in the receipt)"`
	// Replacements say which table was read instead of which.
	Replacements []remediate.Replacement `json:"replacements,omitempty" jsonschema:"approved replacements read instead of the tables they replace (also in the receipt)"`
	ReceiptID    string                  `json:"receipt_id" jsonschema:"receipt holding the verification (get_receipt, dw receipt verify)"`
	ReceiptSeq   int64                   `json:"receipt_seq" jsonschema:"position of the verification entry in the receipt"`
}

var remediateTool = mcpserver.Tool{
	Name:  "remediate",
	Title: "Verify a fix",
	Description: "Verifies; it changes no data and runs no fix (the name is kept for clients that know it): the owners carry out the approved steps themselves, then this tool re-runs every assertion that fired and every check in scope, for real: a quality check on the symptomatic table (or on the table an approved proposal replaces it with: its replaces field, or details.verify_table), per hour since the day the symptom began, with the symptom's own threshold; the team metric's SQL over the buckets since the symptom (on a replaced table's replacement, with only the table reference swapped for the replacement's quoted name; SQL that cannot be swapped safely is not verifiable yet); the table's other checks and the team metrics on the incident's assets and the proposals' targets and scope. A table declared stay_empty (a dead-letter table) is judged from the fix (fixed_at): empty, or no rows arrived since. " +
		"All pass, with at least one judged check on every symptomatic table (declared keys are always re-checked over the whole window): the incident is verified and the checks before and after are written to its receipt. Any failure, or an assertion that could not be re-run: the incident is escalated to the approvers with the evidence and never marked verified. Nothing failed but a table had no judged check (too little history): not verifiable yet, the incident stays fixing and the answer says what is missing. Every metric involved is recomputed before any is judged, so the order of re-runs never matters. Needs the incident's proposals decided by people, at least one approved.",
	ReadOnly:    false,
	Destructive: false,
	Idempotent:  false,
	OpenWorld:   true,
}

func (h *handlers) remediate(ctx context.Context, in RemediateIn) (*RemediateOut, string, error) {
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	p := remediate.Params{IncidentID: in.Incident, Note: in.Note}
	if in.FixedAt != nil {
		p.FixedAt = *in.FixedAt
	}
	res, err := remediate.Verify(ctx, h.remediateEnv(e), p)
	if err != nil {
		return nil, "", err
	}
	ver := res.Verification
	out := &RemediateOut{Incident: res.Incident.ID, Status: string(res.Incident.Status), Verified: ver.Verified, Outcome: ver.Outcome,
		Unjudged: ver.Unjudged, Reason: ver.Reason, Caveats: ver.Caveats, Metrics: res.Metrics, Assertions: res.Assertions, Checks: res.Checks, Notes: res.Notes,
		AssertionsTotal: res.AssertionsTotal, ChecksTotal: res.ChecksTotal, NotesTotal: res.NotesTotal, UnjudgedTotal: res.UnjudgedTotal,
		Proposals: []ProposalState{}, EscalatedTo: res.EscalatedTo, Replacements: res.Replacements, ReceiptID: res.Incident.ID, ReceiptSeq: res.Receipt.Seq}
	for _, p := range res.Proposals {
		out.Proposals = append(out.Proposals, proposalState(p))
	}
	out.Proposals, out.ProposalsTotal = latestProposals(out.Proposals)
	return out, remediateSummary(h, out), nil
}

// remediateEnv is what the verification works with in this process.
func (h *handlers) remediateEnv(e *env) *remediate.Env {
	return &remediate.Env{DB: e.db, Config: h.d.Config, Clock: h.d.Clock, Incidents: e.svc, Approvals: e.apv,
		Warehouse: h.d.Warehouse, Agent: Name, Tool: remediateTool.Name, DecideHow: h.decideHow,
		Owners:  func(ctx context.Context, inc *incidents.Incident) []string { return h.involvedOwners(ctx, e, inc, nil) },
		Runners: func() (orchestrate.Runners, error) { return clients.Runners(h.d) }}
}

func remediateSummary(h *handlers, out *RemediateOut) string {
	var b strings.Builder
	switch {
	case out.Verified:
		fmt.Fprintf(&b, "%s is verified: %d assertion(s) and %d check(s) in scope passed.", out.Incident, out.AssertionsTotal, out.ChecksTotal)
	case out.Outcome == incidents.OutcomeNotVerifiable:
		fmt.Fprintf(&b, "%s is NOT verifiable yet and stays fixing: %s", out.Incident, strings.Join(out.Unjudged, "; "))
	default:
		var who []string
		for _, p := range out.EscalatedTo {
			who = append(who, h.personLabel(p))
		}
		fmt.Fprintf(&b, "%s is NOT verified and is escalated to %s.", out.Incident, strings.Join(who, ", "))
	}
	for _, c := range out.Caveats {
		fmt.Fprintf(&b, "\nNote: %s.", c)
	}
	for _, r := range out.Replacements {
		fmt.Fprintf(&b, "\nRead %s instead of %s (approved in %s by %s).", r.With, orDefault(r.Replaces, "the symptomatic table"), r.Proposal, r.ApprovedBy)
	}
	for _, a := range out.Assertions {
		mark := "pass"
		if !a.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "\n- %s %s: %s", mark, a.Checked, orDefault(a.Observed, a.Expected))
	}
	for _, c := range out.Checks {
		if !c.Passed {
			fmt.Fprintf(&b, "\n- FAIL %s: %s", c.Name, orDefault(c.Observed, c.Detail))
		}
	}
	if len(out.Notes) > 0 {
		fmt.Fprintf(&b, "\n%d note(s): %s", out.NotesTotal, out.Notes[0])
		if len(out.Notes) > 1 {
			b.WriteString(" …")
		}
	}
	fmt.Fprintf(&b, "\nReceipt %s entry %d (get_receipt %s; `dw receipt verify %s`).", out.ReceiptID, out.ReceiptSeq, out.ReceiptID, out.ReceiptID)
	return b.String()
}
