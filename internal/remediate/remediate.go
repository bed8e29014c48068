// Package remediate verifies an incident's approved fix: it re-runs every
// assertion that fired and every check in scope for real (quality checks
// on the tables, the team metrics' SQL), reads an approved replacement
// table instead of the one it replaces, judges the results as one set, and
// records the outcome in the incident and its receipt in one transaction.
// It changes no data and runs no fix: people carry out approved steps.
package remediate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/bound"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/orchestrate"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/warehouse"
)

// EntryVerification is the receipt entry a verification writes: the
// checks as they fired, as they were re-run, and the outcome.
const EntryVerification = "verification"

// Env is what a verification works with.
type Env struct {
	DB        *store.DB
	Config    *config.Config
	Clock     clock.Clock
	Incidents *incidents.Service
	Approvals *approvals.Service
	// Warehouse opens a configured warehouse by name.
	Warehouse func(ctx context.Context, name string) (warehouse.Warehouse, error)
	// Agent and Tool label the warehouse's cost records and the timeline.
	Agent, Tool string
	// DecideHow says how a person records a decision on a proposal still
	// waiting, for the refusal that names it.
	DecideHow func(p *approvals.Proposal) string
	// Owners are the people a failed verification goes to when no
	// approver is recorded: the first owners of the incident's domains.
	Owners func(ctx context.Context, inc *incidents.Incident) []string
	// Runners are the configured orchestrators' runners the process holds
	// (deps' clients.Runners fits), so a proposal binding a run does not
	// build them again; nil builds them from Config per call.
	Runners func() (orchestrate.Runners, error)
}

// runners are the orchestrators' runners a run is bound against.
func (env *Env) runners() (orchestrate.Runners, error) {
	if env.Runners != nil {
		return env.Runners()
	}
	rs, err := orchestrate.NewRunners(env.Config.Orchestrators)
	if err != nil {
		return nil, fmt.Errorf("orchestrators in dw.yaml: %w", err)
	}
	return rs, nil
}

// Params asks for a fix to be verified.
type Params struct {
	IncidentID string
	// Note is what the owners did, in their words.
	Note string
	// FixedAt is when the owners' fix took effect: a table that should
	// stay empty or stop growing is judged from then. Zero: the latest
	// approval of the incident's proposals.
	FixedAt time.Time
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

// Result is a verification as recorded.
type Result struct {
	Incident     *incidents.Incident
	Verification *incidents.Verification
	Assertions   []AssertionResult
	Checks       []incidents.CheckResult
	Notes        []string
	Proposals    []*approvals.Proposal
	EscalatedTo  []string
	Replacements []Replacement
	// Metrics are the metric definitions computed or judged with;
	// Caveats the verdict states (a metric redefined after the onset).
	Metrics []MetricUsed
	Caveats []string
	FixedAt time.Time
	Receipt approvals.Entry
	// The totals count what Verify's answer lists only the first of
	// (bound); the receipt entry holds every one.
	AssertionsTotal, ChecksTotal, NotesTotal, UnjudgedTotal int
}

// What a verification's answer lists: failures first, then the rest, up
// to a count and a budget of characters each. An incident on a wide
// table re-runs thousands of checks; the receipt keeps them all.
const (
	listedResults, resultsBudget = 50, 20_000
	listedNotes, notesBudget     = 20, 4000
)

// bound cuts the lists of a recorded verification for its answer, failures
// first, keeping the totals.
func (r *Result) bound() {
	r.AssertionsTotal, r.ChecksTotal, r.NotesTotal = len(r.Assertions), len(r.Checks), len(r.Notes)
	slices.SortStableFunc(r.Assertions, func(a, b AssertionResult) int { return cmp.Compare(passRank(a.Passed), passRank(b.Passed)) })
	slices.SortStableFunc(r.Checks, func(a, b incidents.CheckResult) int { return cmp.Compare(passRank(a.Passed), passRank(b.Passed)) })
	r.Assertions = bound.Head(r.Assertions, listedResults, resultsBudget)
	r.Checks = bound.Head(r.Checks, listedResults, resultsBudget)
	r.Notes = bound.Head(r.Notes, listedNotes, notesBudget)
	if v := r.Verification; v != nil {
		r.UnjudgedTotal = len(v.Unjudged)
		cut := *v
		cut.Unjudged = bound.Head(v.Unjudged, listedNotes, notesBudget)
		r.Verification = &cut
	}
}

func passRank(passed bool) int {
	if passed {
		return 1
	}
	return 0
}

// ErrTooEarly aborts a verification that has nothing to judge yet; the
// incident is left as it was.
var ErrTooEarly = errors.New("too early to verify")

// Verify re-runs everything an incident's fix must pass and records the
// outcome. Every re-run happens before anything is written: a warehouse
// that is down or a check that cannot be built leaves the incident as it
// was. Then one store transaction moves the incident through approved and
// fixing, records the verdict (verified, escalated, or fixing when not
// verifiable yet) and appends the receipt entry, so the incident and its
// receipt never disagree.
func Verify(ctx context.Context, env *Env, p Params) (*Result, error) {
	inc, err := env.Incidents.GetIncident(ctx, p.IncidentID)
	if err != nil {
		return nil, err
	}
	props, approved, err := decided(ctx, env, inc)
	if err != nil {
		return nil, err
	}
	now := env.Clock.Now().UTC()
	fixedAt, err := fixTime(p.FixedAt, approved, inc, now)
	if err != nil {
		return nil, err
	}
	n := newNamer(env)
	repl, err := approvedReplacements(ctx, env, n, approved)
	if err != nil {
		return nil, err
	}
	v := &verifier{env: env, inc: inc, approved: approved, repl: repl, now: now, fixedAt: fixedAt, namer: n}
	if err := v.run(ctx); err != nil {
		return nil, err
	}
	note := strings.TrimSpace(p.Note)
	res := &Result{Assertions: v.asserts, Checks: v.scope, Notes: v.notes, Proposals: props, Replacements: repl, FixedAt: fixedAt,
		Metrics: v.metricsUsed(), Caveats: v.caveats()}
	if res.Checks == nil {
		res.Checks = []incidents.CheckResult{}
	}
	if res.Notes == nil {
		res.Notes = []string{}
	}
	// The entry is dated by the approvals clock, like the proposals and
	// decisions before it in the receipt.
	at, err := env.Approvals.Now(ctx)
	if err != nil {
		return nil, err
	}
	fixingNote := note
	if fixingNote == "" {
		fixingNote = "the owners report the approved steps carried out; re-running the checks"
	}
	res.Incident, res.Verification, err = env.Incidents.RecordFix(ctx, incidents.FixParams{
		IncidentID: inc.ID, Results: v.results, Actor: env.Agent, Caveats: res.Caveats,
		ApprovedNote: approvalNote(approved, props), FixingNote: fixingNote,
		Record: func(tx *store.Tx, after *incidents.Incident, ver *incidents.Verification) error {
			if ver.Outcome == incidents.OutcomeEscalated {
				res.EscalatedTo = accountable(ctx, env, after, approved)
			}
			entry, err := env.Approvals.AppendReceiptTx(ctx, tx, at, after.ID, EntryVerification, env.Agent,
				v.receiptFacts(ver, res, note, props))
			res.Receipt = entry
			return err
		},
	})
	if err != nil {
		return nil, err
	}
	res.bound()
	return res, nil
}

// decided loads the incident's proposals and checks that people have
// decided them: none still waits, and at least one was approved.
func decided(ctx context.Context, env *Env, inc *incidents.Incident) (all, approved []*approvals.Proposal, err error) {
	switch inc.Status {
	case incidents.StatusProposed, incidents.StatusApproved, incidents.StatusFixing, incidents.StatusEscalated:
	case incidents.StatusOpen, incidents.StatusDiagnosed:
		return nil, nil, fmt.Errorf("incident %s is %s: there is no approved fix to verify yet; diagnose_incident, then propose_remediation, and after a person approves and the owners act, remediate", inc.ID, inc.Status)
	default:
		return nil, nil, fmt.Errorf("incident %s is already %s; nothing to verify", inc.ID, inc.Status)
	}
	var waiting []string
	for _, id := range inc.Proposals {
		p, err := env.Approvals.Get(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, p)
		switch {
		case p.State.Open():
			how := ""
			if env.DecideHow != nil {
				how = ": " + env.DecideHow(p)
			}
			waiting = append(waiting, fmt.Sprintf("%s (%s) waits for %s%s", p.ID, p.What, approvals.PersonLabel(env.Config, p.Approver), how))
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

// fixTime is when the fix took effect: as given, else the latest approval
// (a fix is carried out after it is approved).
func fixTime(given time.Time, approved []*approvals.Proposal, inc *incidents.Incident, now time.Time) (time.Time, error) {
	if !given.IsZero() {
		given = given.UTC()
		switch {
		case given.After(now):
			return time.Time{}, fmt.Errorf("fixed_at %s is in the future (now %s): give when the owners' fix took effect; nothing was changed",
				given.Format(time.RFC3339), now.Format(time.RFC3339))
		case given.Before(inc.Onset):
			return time.Time{}, fmt.Errorf("fixed_at %s is before the incident's onset %s: a fix takes effect after the problem began; nothing was changed",
				given.Format(time.RFC3339), inc.Onset.UTC().Format(time.RFC3339))
		}
		return given, nil
	}
	var at time.Time
	for _, p := range approved {
		if p.Decision != nil && p.Decision.At.After(at) {
			at = p.Decision.At
		}
	}
	if at.IsZero() || at.After(now) {
		at = now
	}
	return at.UTC(), nil
}

func approvalNote(approved, all []*approvals.Proposal) string {
	var parts []string
	for _, p := range approved {
		parts = append(parts, fmt.Sprintf("%s approved by %s", p.ID, approvedBy(p)))
	}
	for _, p := range all {
		if p.State == approvals.StateRejected || p.State == approvals.StateExpired {
			parts = append(parts, fmt.Sprintf("%s %s", p.ID, p.State))
		}
	}
	return strings.Join(parts, "; ")
}

// approvedBy is who approved a proposal and through which channel.
func approvedBy(p *approvals.Proposal) string {
	if p.Decision != nil {
		return p.Decision.PersonID + " via " + string(p.Decision.Channel)
	}
	return p.Approver
}

// accountable are the people a failed verification goes to: whoever
// approved the fix, else the owners of the incident's domains.
func accountable(ctx context.Context, env *Env, inc *incidents.Incident, approved []*approvals.Proposal) []string {
	var out []string
	for _, p := range approved {
		who := p.Approver
		if p.Decision != nil {
			who = p.Decision.PersonID
		}
		out = appendNew(out, who)
	}
	if len(out) == 0 && env.Owners != nil {
		out = env.Owners(ctx, inc)
	}
	return out
}

func appendNew(list []string, vals ...string) []string {
	for _, v := range vals {
		if v = strings.TrimSpace(v); v != "" && !contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// receiptFacts is the verification entry: the checks before and after,
// the outcome, what each approved replacement substituted, and the undo.
func (v *verifier) receiptFacts(ver *incidents.Verification, res *Result, note string, props []*approvals.Proposal) map[string]any {
	var after []approvals.Check
	for _, a := range res.Assertions {
		after = append(after, approvals.Check{Name: a.Name, Passed: a.Passed, Detail: strings.TrimSpace(a.Checked + ": " + orDefault(a.Observed, "not re-run"))})
	}
	for _, c := range res.Checks {
		after = append(after, approvals.Check{Name: c.Name, Passed: c.Passed, Detail: orDefault(c.Observed, c.Detail)})
	}
	var undo []map[string]string
	for _, p := range props {
		undo = append(undo, map[string]string{"proposal": p.ID, "state": string(p.State), "undo": p.Undo})
	}
	summary := ver.Reason
	if ver.Outcome == incidents.OutcomeEscalated {
		summary = fmt.Sprintf("escalated to %s: %s", strings.Join(res.EscalatedTo, ", "), strings.TrimPrefix(ver.Reason, "escalated to a person: "))
	}
	facts := map[string]any{
		"incident": v.inc.ID, "summary": summary, "verified": ver.Verified, "outcome": ver.Outcome, "reason": ver.Reason,
		"checks_before": v.before, "checks_after": after, "notes": res.Notes, "proposals": undo,
		"fixed_at": res.FixedAt.Format(time.RFC3339),
	}
	if note != "" {
		facts["note"] = note
	}
	if len(res.Metrics) > 0 {
		facts["metric_definitions"] = res.Metrics
	}
	if len(res.Caveats) > 0 {
		facts["caveats"] = res.Caveats
	}
	if repl := v.replacementFacts(); len(repl) > 0 {
		facts["replacements"] = repl
	}
	if len(res.EscalatedTo) > 0 {
		facts["escalated_to"] = res.EscalatedTo
	}
	return facts
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// dayStart is midnight UTC of t.
func dayStart(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }
