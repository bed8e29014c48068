package incidents

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// Assertion is a check a fix must pass again before an incident counts as
// verified: one per distinct symptom that fired.
type Assertion struct {
	Name          string      `json:"name" jsonschema:"the name the re-run result must carry"`
	Kind          SymptomKind `json:"kind" jsonschema:"symptom kind to re-check"`
	Asset         string      `json:"asset" jsonschema:"asset to re-check"`
	Column        string      `json:"column,omitempty" jsonschema:"column to re-check"`
	Metric        string      `json:"metric,omitempty" jsonschema:"metric to re-check"`
	RelatedMetric string      `json:"related_metric,omitempty" jsonschema:"for divergence: the partner metric"`
	Since         time.Time   `json:"since" jsonschema:"earliest bucket the symptom was seen in; re-check from here"`
	Fired         string      `json:"fired" jsonschema:"what the symptom was"`
}

// Assertions lists what must be re-run to verify a fix of the incident.
func (s *Service) Assertions(ctx context.Context, incidentID string) ([]Assertion, error) {
	inc, err := loadIncident(ctx, s.DB, incidentID)
	if err != nil {
		return nil, err
	}
	return assertionsOf(inc), nil
}

func assertionsOf(inc *Incident) []Assertion {
	out := []Assertion{}
	seen := map[string]bool{}
	for _, sym := range inc.Symptoms {
		name := sym.assertion()
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, Assertion{Name: name, Kind: sym.Kind, Asset: sym.Asset, Column: sym.Column, Metric: sym.Metric,
			RelatedMetric: sym.RelatedMetric, Since: sym.At, Fired: sym.describe()})
	}
	return out
}

// CheckResult is the re-run of one assertion or check after a fix.
type CheckResult struct {
	Name     string `json:"name" jsonschema:"assertion name (from the incident's assertions) or the name of another check in scope"`
	Passed   bool   `json:"passed" jsonschema:"whether it passed"`
	Observed string `json:"observed,omitempty" jsonschema:"what was observed, e.g. 0 null rows since 00:00"`
	Expected string `json:"expected,omitempty" jsonschema:"what was expected"`
	Detail   string `json:"detail,omitempty" jsonschema:"anything a person should know"`
	// Asset is the symptomatic asset the check speaks for (for a
	// replacement table, the table it replaces). A passing result on an
	// asset is the judged check verification needs on it; "" speaks for
	// none. An assertion's result speaks for the assertion's asset.
	Asset string `json:"asset,omitempty" jsonschema:"symptomatic asset the check speaks for"`
	// Required marks a check that is always re-run and never excused,
	// such as a declared key's uniqueness.
	Required bool `json:"required,omitempty" jsonschema:"a check always re-run and never excused (a declared key)"`
	// NotJudged marks a re-run that found nothing wrong but had too
	// little history to judge: neither a pass nor a failure.
	NotJudged bool `json:"not_judged,omitempty" jsonschema:"re-run but not judged (too little history): neither a pass nor a failure"`
}

// Verification outcomes.
const (
	OutcomeVerified      = "verified"
	OutcomeEscalated     = "escalated"
	OutcomeNotVerifiable = "not_verifiable_yet"
)

// Verification is the outcome of re-running an incident's checks.
type Verification struct {
	At       time.Time     `json:"at" jsonschema:"when it was verified"`
	Verified bool          `json:"verified" jsonschema:"true only when every assertion that fired and every check given passed, with at least one judged check on every symptomatic asset"`
	Outcome  string        `json:"outcome" jsonschema:"verified; escalated (a check failed or an assertion was not re-run: a person looks); not_verifiable_yet (nothing failed, but a symptomatic asset has no judged check: the incident stays fixing)"`
	Results  []CheckResult `json:"results" jsonschema:"every result given"`
	Failures []CheckResult `json:"failures" jsonschema:"results that failed"`
	Missing  []string      `json:"missing" jsonschema:"assertions that fired but were not re-run"`
	Unjudged []string      `json:"unjudged,omitempty" jsonschema:"assertions re-run but not judged, and symptomatic assets with no judged passing check: what is missing"`
	Reason   string        `json:"reason" jsonschema:"the outcome in words"`
	// Caveats are facts about what was judged that a reader must weigh
	// with the outcome, such as a metric redefined after the onset.
	Caveats []string `json:"caveats,omitempty" jsonschema:"what the outcome rests on that a person should weigh, e.g. a metric redefined after the incident's onset (when and by whom)"`
}

// VerifyParams is the input of verification.
type VerifyParams struct {
	IncidentID string        `json:"incident_id" jsonschema:"incident id"`
	Results    []CheckResult `json:"results" jsonschema:"re-run results of every assertion that fired and every check in scope"`
	Actor      string        `json:"actor,omitempty" jsonschema:"who re-ran them"`
}

// Verify decides whether a fix worked from re-run results: every assertion
// that fired must be among them, every result must pass, and every
// symptomatic asset needs at least one passing result that was judged (a
// check with no history to judge against does not pass), and then the
// incident is verified. A failure or an assertion not re-run escalates it
// to a person with the failing evidence. When nothing failed but an asset
// has no judged check, the answer is "not verifiable yet": the incident
// stays fixing and the reason says what is missing. It is never verified
// on partial evidence.
func (s *Service) Verify(ctx context.Context, p VerifyParams) (*Verification, error) {
	if err := cleanResults(p.Results); err != nil {
		return nil, err
	}
	now := s.now()
	var out *Verification
	err := s.DB.InTx(ctx, func(tx *store.Tx) error {
		inc, err := loadIncident(ctx, tx, p.IncidentID)
		if err != nil {
			return err
		}
		if inc.Status != StatusFixing {
			return invalid("incident %s is %s; verification applies to a fix in progress (status fixing): move it to fixing once the approved steps run", inc.ID, inc.Status)
		}
		out, err = verifyTx(ctx, tx, inc, p.Results, nil, orText(p.Actor, "dw-incidents"), now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// cleanResults trims result names and refuses an empty set, an empty
// name or a name given twice.
func cleanResults(results []CheckResult) error {
	if len(results) == 0 {
		return invalid("results is empty: re-run the incident's assertions (see its assertions) and every check in scope, and pass every result")
	}
	seen := map[string]bool{}
	for i, r := range results {
		name := strings.TrimSpace(r.Name)
		if name == "" {
			return invalid("results[%d]: name is empty", i)
		}
		if seen[name] {
			return invalid("results[%d]: %s given twice; give one result per check", i, name)
		}
		seen[name] = true
		results[i].Name = name
	}
	return nil
}

// verifyTx judges the results and saves the outcome of an incident that
// is fixing.
func verifyTx(ctx context.Context, tx *store.Tx, inc *Incident, results []CheckResult, caveats []string, actor string, now time.Time) (*Verification, error) {
	v := judge(assertionsOf(inc), inc.Assets, results, now)
	if len(caveats) > 0 {
		v.Caveats = slices.Clone(caveats)
		v.Reason += "; note: " + strings.Join(caveats, "; ")
	}
	from := inc.Status
	inc.Verification = v
	switch v.Outcome {
	case OutcomeVerified:
		inc.Status, inc.VerifiedAt = StatusVerified, now
	case OutcomeEscalated:
		inc.Status = StatusEscalated
	}
	return v, save(ctx, tx, inc, from, actor, v.Reason, now)
}

// FixParams records the verification of an approved fix in one step.
type FixParams struct {
	IncidentID string
	Results    []CheckResult
	Actor      string
	// ApprovedNote is the timeline note when a proposed incident moves to
	// approved (who approved what); FixingNote when it moves to fixing.
	ApprovedNote string
	FixingNote   string
	// Caveats are stated with the verdict (Verification.Caveats and its
	// reason): what it rests on that a person should weigh.
	Caveats []string
	// Record runs in the same transaction after the incident is saved,
	// so whatever it writes (the receipt entry of the verification) is
	// stored with the incident's new status or not at all.
	Record func(tx *store.Tx, inc *Incident, v *Verification) error
}

// RecordFix moves an incident whose fix people approved through approved
// and fixing, judges the re-run results and saves the outcome, all in one
// transaction with whatever p.Record writes: a failure anywhere leaves the
// incident, its timeline and the receipt as they were, so the incident's
// status and the receipt never disagree.
func (s *Service) RecordFix(ctx context.Context, p FixParams) (*Incident, *Verification, error) {
	if err := cleanResults(p.Results); err != nil {
		return nil, nil, err
	}
	actor := orText(p.Actor, "dw-incidents")
	now := s.now()
	var inc *Incident
	var out *Verification
	err := s.DB.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if inc, err = loadIncident(ctx, tx, p.IncidentID); err != nil {
			return err
		}
		steps := []struct {
			to   Status
			note string
		}{{StatusApproved, p.ApprovedNote}, {StatusFixing, p.FixingNote}}
		for _, st := range steps {
			if inc.Status == StatusFixing || st.to == StatusApproved && inc.Status != StatusProposed {
				continue
			}
			if err := move(inc, st.to); err != nil {
				return err
			}
			from := inc.Status
			inc.Status = st.to
			if err := save(ctx, tx, inc, from, actor, strings.TrimSpace(st.note), now); err != nil {
				return err
			}
		}
		if out, err = verifyTx(ctx, tx, inc, p.Results, p.Caveats, actor, now); err != nil {
			return err
		}
		if p.Record != nil {
			return p.Record(tx, inc, out)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return inc, out, nil
}

// judge is the verification rule, apart from storage. The results are
// judged as one set: their order does not matter.
func judge(assertions []Assertion, assets []string, results []CheckResult, now time.Time) *Verification {
	v := &Verification{At: now, Results: slices.Clone(results), Failures: []CheckResult{}, Missing: []string{}}
	assetOf := map[string]string{}
	for _, a := range assertions {
		assetOf[a.Name] = a.Asset
	}
	given, judged, seen := map[string]bool{}, map[string]bool{}, map[string]int{}
	for _, r := range results {
		given[r.Name] = true
		asset := r.Asset
		if asset == "" {
			asset = assetOf[r.Name]
		}
		seen[asset]++
		switch {
		case r.NotJudged && !r.Passed:
			v.Unjudged = append(v.Unjudged, fmt.Sprintf("%s was re-run but not judged: %s", r.Name, orText(r.Observed, "too little history")))
		case !r.Passed:
			v.Failures = append(v.Failures, r)
		case asset != "":
			judged[asset] = true
		}
	}
	for _, a := range assertions {
		if !given[a.Name] {
			v.Missing = append(v.Missing, a.Name)
		}
	}
	for _, a := range assets {
		if !judged[a] {
			v.Unjudged = append(v.Unjudged, fmt.Sprintf("%s: none of its %d re-run check(s) was judged and passed (a check with too little history is not judged); "+
				"re-run once it has history, or declare expectations on it (set_quality_expectations) or a team metric (define_metric)", a, seen[a]))
		}
	}
	switch {
	case len(v.Failures) > 0 || len(v.Missing) > 0 || len(results) == 0:
		v.Outcome = OutcomeEscalated
	case len(v.Unjudged) > 0:
		v.Outcome = OutcomeNotVerifiable
	default:
		v.Outcome = OutcomeVerified
	}
	v.Verified = v.Outcome == OutcomeVerified
	switch v.Outcome {
	case OutcomeVerified:
		v.Reason = fmt.Sprintf("verified: all %d check(s) passed, including every assertion that fired, with a judged check on each of %d symptomatic asset(s)", len(results), len(assets))
	case OutcomeNotVerifiable:
		v.Reason = "not verifiable yet: nothing failed, but " + strings.Join(v.Unjudged, "; ")
	default:
		var parts []string
		for _, f := range v.Failures {
			line := f.Name + " failed"
			if f.Observed != "" || f.Expected != "" {
				line += fmt.Sprintf(" (observed %s, expected %s)", orText(f.Observed, "?"), orText(f.Expected, "?"))
			}
			if f.Detail != "" {
				line += ": " + f.Detail
			}
			parts = append(parts, line)
		}
		if len(v.Missing) > 0 {
			parts = append(parts, "not re-run: "+strings.Join(v.Missing, ", "))
		}
		v.Reason = "escalated to a person: " + strings.Join(parts, "; ")
	}
	return v
}
