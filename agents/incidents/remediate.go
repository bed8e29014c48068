package incidents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// EntryVerification is the receipt entry remediate writes: the checks as
// they fired, as they were re-run, and the outcome.
const EntryVerification = "verification"

// RemediateIn asks for a fix to be verified.
type RemediateIn struct {
	Incident string `json:"incident" jsonschema:"incident id, e.g. INC-3"`
	Note     string `json:"note,omitempty" jsonschema:"what the owners did, in their words, for the timeline and the receipt"`
}

// AssertionResult is one assertion that fired, re-run after the fix.
type AssertionResult struct {
	Name     string `json:"name" jsonschema:"assertion name"`
	Fired    string `json:"fired" jsonschema:"what the symptom was"`
	Checked  string `json:"checked" jsonschema:"what was re-run, on which table or metric and over which window"`
	Passed   bool   `json:"passed" jsonschema:"whether it passed"`
	Observed string `json:"observed,omitempty" jsonschema:"what the re-run observed"`
	Expected string `json:"expected,omitempty" jsonschema:"what it had to be"`
	// NotJudged: nothing wrong was found but there was too little history
	// to judge it; the incident is then not verifiable yet.
	NotJudged bool `json:"not_judged,omitempty" jsonschema:"re-run but not judged: too little history; neither pass nor failure"`
}

// RemediateOut is the verification of a fix.
type RemediateOut struct {
	Incident    string                  `json:"incident" jsonschema:"incident id"`
	Status      string                  `json:"status" jsonschema:"incident status after verification: verified, escalated, or fixing when not verifiable yet"`
	Outcome     string                  `json:"outcome" jsonschema:"verified, escalated, or not_verifiable_yet (nothing failed but a symptomatic asset has no judged check; see unjudged)"`
	Unjudged    []string                `json:"unjudged,omitempty" jsonschema:"symptomatic assets with no judged passing check, and what is missing"`
	Verified    bool                    `json:"verified" jsonschema:"true only when every assertion that fired and every check in scope passed"`
	Reason      string                  `json:"reason" jsonschema:"the outcome in words"`
	Assertions  []AssertionResult       `json:"assertions" jsonschema:"every assertion that fired, re-run"`
	Checks      []incidents.CheckResult `json:"checks" jsonschema:"every check in scope that could be judged, re-run"`
	Notes       []string                `json:"notes" jsonschema:"what was not judged and why, history scans, anomalies from before the onset"`
	Proposals   []ProposalState         `json:"proposals" jsonschema:"the incident's proposals and their decisions"`
	EscalatedTo []string                `json:"escalated_to,omitempty" jsonschema:"people the failed verification goes to: the approvers of the fix"`
	ReceiptID   string                  `json:"receipt_id" jsonschema:"receipt holding the verification (get_receipt, dw receipt verify)"`
	ReceiptSeq  int64                   `json:"receipt_seq" jsonschema:"position of the verification entry in the receipt"`
}

var remediateTool = mcpserver.Tool{
	Name:  "remediate",
	Title: "Verify a fix",
	Description: "Verifies; it changes no data and runs no fix (the name is kept for clients that know it): the owners carry out the approved steps themselves, then this tool re-runs every assertion that fired and every check in scope, for real: a quality check on the symptomatic table (or on the replacement table an approved proposal names in details.verify_table), per hour since the day the symptom began, with the symptom's own threshold; the team metric's SQL over the buckets since the symptom; the table's other checks and the team metrics on the incident's assets and the proposals' targets and scope. " +
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
	inc, err := e.svc.GetIncident(ctx, in.Incident)
	if err != nil {
		return nil, "", err
	}
	props, approved, err := h.decided(ctx, e, inc)
	if err != nil {
		return nil, "", err
	}
	// Re-run everything before any status moves: a warehouse that is down
	// or a check that cannot be built leaves the incident as it was.
	v := &verifier{h: h, e: e, inc: inc, approved: approved, now: h.d.Clock.Now().UTC()}
	if err := v.run(ctx); err != nil {
		return nil, "", err
	}
	note := strings.TrimSpace(in.Note)
	if inc.Status == incidents.StatusProposed {
		if _, err := e.svc.Transition(ctx, incidents.TransitionParams{IncidentID: inc.ID, To: string(incidents.StatusApproved),
			Actor: Name, Note: approvalNote(approved, props)}); err != nil {
			return nil, "", err
		}
		inc.Status = incidents.StatusApproved
	}
	if inc.Status != incidents.StatusFixing {
		if _, err := e.svc.Transition(ctx, incidents.TransitionParams{IncidentID: inc.ID, To: string(incidents.StatusFixing),
			Actor: Name, Note: orDefault(note, "the owners report the approved steps carried out; re-running the checks")}); err != nil {
			return nil, "", err
		}
	}
	ver, err := e.svc.Verify(ctx, incidents.VerifyParams{IncidentID: inc.ID, Results: v.results, Actor: Name})
	if err != nil {
		return nil, "", err
	}
	out := &RemediateOut{Incident: inc.ID, Verified: ver.Verified, Outcome: ver.Outcome, Unjudged: ver.Unjudged, Reason: ver.Reason, Assertions: v.asserts,
		Checks: v.scope, Notes: v.notes, Proposals: []ProposalState{}, ReceiptID: inc.ID}
	if out.Checks == nil {
		out.Checks = []incidents.CheckResult{}
	}
	if out.Notes == nil {
		out.Notes = []string{}
	}
	switch ver.Outcome {
	case incidents.OutcomeVerified:
		out.Status = string(incidents.StatusVerified)
	case incidents.OutcomeNotVerifiable:
		out.Status = string(incidents.StatusFixing)
	default:
		out.Status = string(incidents.StatusEscalated)
		out.EscalatedTo = h.accountable(inc, approved)
	}
	for _, p := range props {
		out.Proposals = append(out.Proposals, proposalState(p))
	}
	entry, err := approvals.AppendReceipt(ctx, e.db, h.d.Clock.Now(), inc.ID, EntryVerification, Name, v.receiptFacts(out, note, props))
	if err != nil {
		return nil, "", err
	}
	out.ReceiptSeq = entry.Seq
	return out, remediateSummary(h, out), nil
}

// decided loads the incident's proposals and checks that people have
// decided them: none still waits, and at least one was approved.
func (h *handlers) decided(ctx context.Context, e *env, inc *incidents.Incident) (all, approved []*approvals.Proposal, err error) {
	switch inc.Status {
	case incidents.StatusProposed, incidents.StatusApproved, incidents.StatusFixing, incidents.StatusEscalated:
	case incidents.StatusOpen, incidents.StatusDiagnosed:
		return nil, nil, fmt.Errorf("incident %s is %s: there is no approved fix to verify yet; diagnose_incident, then propose_remediation, and after a person approves and the owners act, remediate", inc.ID, inc.Status)
	default:
		return nil, nil, fmt.Errorf("incident %s is already %s; nothing to verify", inc.ID, inc.Status)
	}
	var waiting []string
	for _, id := range inc.Proposals {
		p, err := e.apv.Get(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, p)
		switch {
		case p.State.Open():
			waiting = append(waiting, fmt.Sprintf("%s (%s) waits for %s: %s", p.ID, p.What, h.personLabel(p.Approver), h.decideHow(p)))
		case p.State == approvals.StateApproved || p.State == approvals.StateExecuted:
			approved = append(approved, p)
		}
	}
	if len(waiting) > 0 && inc.Status == incidents.StatusProposed {
		return nil, nil, fmt.Errorf("not verified: the fix is not decided yet; %s. Nothing was changed", strings.Join(waiting, "; "))
	}
	if len(approved) == 0 {
		return nil, nil, fmt.Errorf("incident %s has no approved proposal (%d proposed, none approved or executed): propose_remediation again once the objections are answered; nothing was changed", inc.ID, len(all))
	}
	return all, approved, nil
}

func approvalNote(approved, all []*approvals.Proposal) string {
	var parts []string
	for _, p := range approved {
		by := p.Approver
		if p.Decision != nil {
			by = p.Decision.PersonID + " via " + string(p.Decision.Channel)
		}
		parts = append(parts, fmt.Sprintf("%s approved by %s", p.ID, by))
	}
	for _, p := range all {
		if p.State == approvals.StateRejected || p.State == approvals.StateExpired {
			parts = append(parts, fmt.Sprintf("%s %s", p.ID, p.State))
		}
	}
	return strings.Join(parts, "; ")
}

// accountable are the people a failed verification goes to: whoever
// approved the fix, else the owners of the incident's domains.
func (h *handlers) accountable(inc *incidents.Incident, approved []*approvals.Proposal) []string {
	var out []string
	for _, p := range approved {
		if p.Decision != nil {
			out = uniq(out, p.Decision.PersonID)
		} else {
			out = uniq(out, p.Approver)
		}
	}
	if len(out) == 0 {
		out = h.involvedOwners(inc, nil)
	}
	return out
}

func (v *verifier) receiptFacts(out *RemediateOut, note string, props []*approvals.Proposal) map[string]any {
	var after []approvals.Check
	for _, a := range out.Assertions {
		after = append(after, approvals.Check{Name: a.Name, Passed: a.Passed, Detail: strings.TrimSpace(a.Checked + ": " + orDefault(a.Observed, "not re-run"))})
	}
	for _, c := range out.Checks {
		after = append(after, approvals.Check{Name: c.Name, Passed: c.Passed, Detail: orDefault(c.Observed, c.Detail)})
	}
	var undo []map[string]string
	for _, p := range props {
		undo = append(undo, map[string]string{"proposal": p.ID, "state": string(p.State), "undo": p.Undo})
	}
	summary := out.Reason
	if out.Outcome == incidents.OutcomeEscalated {
		summary = fmt.Sprintf("escalated to %s: %s", strings.Join(out.EscalatedTo, ", "), strings.TrimPrefix(out.Reason, "escalated to a person: "))
	}
	facts := map[string]any{
		"incident": out.Incident, "summary": summary, "verified": out.Verified, "outcome": out.Outcome, "reason": out.Reason,
		"checks_before": v.before, "checks_after": after, "notes": out.Notes, "proposals": undo,
	}
	if note != "" {
		facts["note"] = note
	}
	if repl := v.replacements(); len(repl) > 0 {
		facts["replacements"] = repl
	}
	if len(out.EscalatedTo) > 0 {
		facts["escalated_to"] = out.EscalatedTo
	}
	return facts
}

func remediateSummary(h *handlers, out *RemediateOut) string {
	var b strings.Builder
	switch {
	case out.Verified:
		fmt.Fprintf(&b, "%s is verified: %d assertion(s) and %d check(s) in scope passed.", out.Incident, len(out.Assertions), len(out.Checks))
	case out.Outcome == incidents.OutcomeNotVerifiable:
		fmt.Fprintf(&b, "%s is NOT verifiable yet and stays fixing: %s", out.Incident, strings.Join(out.Unjudged, "; "))
	default:
		var who []string
		for _, p := range out.EscalatedTo {
			who = append(who, h.personLabel(p))
		}
		fmt.Fprintf(&b, "%s is NOT verified and is escalated to %s.", out.Incident, strings.Join(who, ", "))
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
		fmt.Fprintf(&b, "\n%d note(s): %s", len(out.Notes), out.Notes[0])
		if len(out.Notes) > 1 {
			b.WriteString(" …")
		}
	}
	fmt.Fprintf(&b, "\nReceipt %s entry %d (get_receipt %s; `dw receipt verify %s`).", out.ReceiptID, out.ReceiptSeq, out.ReceiptID, out.ReceiptID)
	return b.String()
}

// errTooEarly aborts a verification that has nothing to judge yet; the
// incident is left as it was.
var errTooEarly = errors.New("too early to verify")

// dayStart is midnight UTC of t.
func dayStart(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }

// replacements are the approved "replaces A with B" proposals the
// verification read B for, for the receipt: an auditor sees which table
// the checks judged.
func (v *verifier) replacements() []map[string]string {
	var out []map[string]string
	for _, p := range v.approved {
		with, _ := p.Details[detailVerifyTable].(string)
		if with == "" {
			continue
		}
		replaces, _ := p.Details[detailReplaces].(string)
		if replaces == "" && len(v.inc.Assets) == 1 {
			replaces = v.inc.Assets[0]
		}
		out = append(out, map[string]string{"proposal": p.ID, "replaces": replaces, "with": with,
			"read": "the re-checks of " + replaces + " read " + with})
	}
	return out
}
