// Package incidents is the memory and reasoning of the dw-incidents agent:
// team metrics scored against their seasonal baseline, the change log
// (deploys, schema versions, restores, connector and pipeline changes),
// incidents opened from failed checks and metric anomalies, the ranked
// diagnosis of which recorded change caused an incident, the history of
// earlier incidents on a feed, drafts of remediation proposals, and the
// verification that decides whether a fix worked or goes to a person.
//
// Everything lives in the shared store: the agents are short-lived stdio
// processes and several run at once. Diagnosis is deterministic: the same
// change log, graph and symptoms always give the same ranking, so a person
// can check every cause against the evidence it cites.
package incidents

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/changelog"

	"github.com/dataworkers/dw/internal/suggest"
)

// Status is where an incident stands in its life.
type Status string

// Incident statuses. The main line is open → diagnosed → proposed →
// approved → fixing → verified → closed; escalated is the side state a
// failed verification leads to, from which a person re-diagnoses,
// re-proposes or tries another fix.
const (
	StatusOpen      Status = "open"
	StatusDiagnosed Status = "diagnosed"
	StatusProposed  Status = "proposed"
	StatusApproved  Status = "approved"
	StatusFixing    Status = "fixing"
	StatusVerified  Status = "verified"
	StatusEscalated Status = "escalated"
	StatusClosed    Status = "closed"
)

// Statuses lists every status in life order.
var Statuses = []Status{StatusOpen, StatusDiagnosed, StatusProposed, StatusApproved, StatusFixing,
	StatusVerified, StatusEscalated, StatusClosed}

// transitions are the legal moves. verified and escalated are reached only
// through Verify, which holds the re-run evidence; closing from open or
// diagnosed is the dismissal of a false alarm and needs a note.
var transitions = map[Status][]Status{
	StatusOpen:      {StatusDiagnosed, StatusClosed},
	StatusDiagnosed: {StatusDiagnosed, StatusProposed, StatusClosed},
	StatusProposed:  {StatusProposed, StatusApproved, StatusDiagnosed},
	StatusApproved:  {StatusFixing, StatusProposed},
	StatusFixing:    {StatusVerified, StatusEscalated},
	StatusEscalated: {StatusDiagnosed, StatusProposed, StatusFixing},
	StatusVerified:  {StatusClosed},
	StatusClosed:    {},
}

// CanMove reports whether an incident may go from one status to another.
func CanMove(from, to Status) bool { return slices.Contains(transitions[from], to) }

// active reports whether new symptoms may still join an incident.
func (s Status) active() bool { return s != StatusVerified && s != StatusClosed }

func parseStatus(s string) (Status, error) {
	st, err := suggest.Parse("status", s, Statuses)
	if err != nil {
		return "", invalid("%v", err)
	}
	return st, nil
}

// SymptomKind is what went wrong with the data.
type SymptomKind string

// Symptom kinds, as checks and metric anomalies report them.
const (
	SymptomNulls      SymptomKind = "nulls"
	SymptomVolume     SymptomKind = "volume"
	SymptomUniqueness SymptomKind = "uniqueness"
	SymptomFreshness  SymptomKind = "freshness"
	SymptomLoadLag    SymptomKind = "load_lag"
	SymptomValue      SymptomKind = "value"
	SymptomDivergence SymptomKind = "divergence"
)

// SymptomKinds lists every symptom kind.
var SymptomKinds = []SymptomKind{SymptomNulls, SymptomVolume, SymptomUniqueness, SymptomFreshness,
	SymptomLoadLag, SymptomValue, SymptomDivergence}

// MetricSymptomKinds are the kinds a metric's anomalies may be reported
// as (DefineMetricParams.SymptomKind), the default first: every kind but
// divergence, which only a pair of metrics reports.
var MetricSymptomKinds = []SymptomKind{SymptomValue, SymptomVolume, SymptomNulls, SymptomUniqueness, SymptomFreshness, SymptomLoadLag}

func parseSymptomKind(s string) (SymptomKind, error) {
	k, err := suggest.Parse("symptom kind", s, SymptomKinds)
	if err != nil {
		return "", invalid("%v", err)
	}
	return k, nil
}

// Symptom is one observed problem: a failed check or a metric anomaly.
type Symptom struct {
	Kind          SymptomKind `json:"kind" jsonschema:"what went wrong: nulls, volume, uniqueness, freshness, load_lag, value or divergence"`
	Asset         string      `json:"asset" jsonschema:"asset id the symptom is on, e.g. snowflake://usage.usage_hourly"`
	Metric        string      `json:"metric,omitempty" jsonschema:"metric or check name that fired, e.g. null_rate or avg_member_balance"`
	RelatedMetric string      `json:"related_metric,omitempty" jsonschema:"for divergence: the metric that normally moves with metric but did not"`
	Column        string      `json:"column,omitempty" jsonschema:"column the symptom is in, when it is about one column"`
	Observed      float64     `json:"observed" jsonschema:"observed value"`
	Expected      float64     `json:"expected,omitempty" jsonschema:"expected (baseline) value"`
	ExpectedLow   float64     `json:"expected_low,omitempty" jsonschema:"low end of the expected range"`
	ExpectedHigh  float64     `json:"expected_high,omitempty" jsonschema:"high end of the expected range"`
	At            time.Time   `json:"at" jsonschema:"time the symptom applies to (the start of the checked hour bucket, or the check time)"`
	Until         time.Time   `json:"until,omitzero" jsonschema:"end of the checked bucket (excluded); default: an hour after at when at is on the hour, else at itself (a point-in-time check)"`
	Source        string      `json:"source,omitempty" jsonschema:"what reported it, e.g. run_quality_check or monitor_metrics"`
	Detail        string      `json:"detail,omitempty" jsonschema:"the finding in words, e.g. egress_bytes null in 18% of rows (0% in every earlier check)"`
}

// describe is the symptom in a few words for evidence sentences.
func (s Symptom) describe() string {
	if s.Detail != "" {
		return s.Detail
	}
	var b strings.Builder
	switch s.Kind {
	case SymptomNulls:
		fmt.Fprintf(&b, "%s is null", orText(s.Column, "a column"))
	case SymptomDivergence:
		fmt.Fprintf(&b, "%s moved apart from %s", orText(s.Metric, "a metric"), orText(s.RelatedMetric, "its related metric"))
	default:
		if s.Metric == "" {
			fmt.Fprintf(&b, "a %s problem", s.Kind)
			if s.Column != "" {
				fmt.Fprintf(&b, " in %s", s.Column)
			}
			break
		}
		fmt.Fprintf(&b, "%s", s.Metric)
		if s.Column != "" {
			fmt.Fprintf(&b, " of %s", s.Column)
		}
		fmt.Fprintf(&b, " is %s", formatNumber(s.Observed))
		if s.ExpectedLow != 0 || s.ExpectedHigh != 0 {
			fmt.Fprintf(&b, ", expected %s–%s", formatNumber(s.ExpectedLow), formatNumber(s.ExpectedHigh))
		}
		fmt.Fprintf(&b, " (%s)", s.Kind)
	}
	return b.String()
}

// end is the end of the symptom's bucket: when the problem had certainly
// begun. An hour-aligned symptom without one is an hourly bucket (what
// checks and metrics report by default); any other is a point in time.
func (s Symptom) end() time.Time {
	switch {
	case !s.Until.IsZero() && s.Until.After(s.At):
		return s.Until
	case s.At.Equal(s.At.Truncate(time.Hour)):
		return s.At.Add(time.Hour)
	}
	return s.At
}

// assertion names the check a verification must re-run for this symptom.
func (s Symptom) assertion() string {
	parts := []string{string(s.Kind), s.Asset}
	if s.Column != "" {
		parts = append(parts, s.Column)
	}
	if s.Metric != "" {
		parts = append(parts, s.Metric)
	}
	if s.RelatedMetric != "" {
		parts = append(parts, s.RelatedMetric)
	}
	return strings.Join(parts, ":")
}

// Incident is a data problem from detection to its verified fix.
type Incident struct {
	ID           string        `json:"id" jsonschema:"incident id, e.g. INC-12"`
	Title        string        `json:"title" jsonschema:"one-line summary"`
	Status       Status        `json:"status" jsonschema:"open, diagnosed, proposed, approved, fixing, verified, escalated or closed"`
	Assets       []string      `json:"assets" jsonschema:"assets the symptoms are on"`
	Symptoms     []Symptom     `json:"symptoms" jsonschema:"failed checks and metric anomalies, oldest first"`
	Onset        time.Time     `json:"onset" jsonschema:"earliest symptom time: the start of the first anomalous bucket"`
	OnsetEnd     time.Time     `json:"onset_end" jsonschema:"end of the first anomalous bucket: the problem began between onset and onset_end"`
	DetectedAt   time.Time     `json:"detected_at" jsonschema:"when the incident was opened"`
	DiagnosedAt  time.Time     `json:"diagnosed_at,omitzero" jsonschema:"when the causes were last ranked"`
	VerifiedAt   time.Time     `json:"verified_at,omitzero" jsonschema:"when the fix was verified"`
	ClosedAt     time.Time     `json:"closed_at,omitzero" jsonschema:"when the incident was closed"`
	ResolvedAt   time.Time     `json:"resolved_at,omitzero" jsonschema:"when it was resolved: verified, else closed"`
	Causes       []Cause       `json:"causes" jsonschema:"ranked candidate causes, most likely first"`
	Verdict      Verdict       `json:"verdict,omitempty" jsonschema:"the diagnosis's verdict: likely_cause, no_credible_cause or attributed (a person named the cause)"`
	Attributed   *Attribution  `json:"attributed_cause,omitempty" jsonschema:"the cause a person named (dw cause set); it overrides the ranking in proposals and the receipt"`
	Proposals    []string      `json:"proposals" jsonschema:"ids of remediation proposals made for it"`
	Verification *Verification `json:"verification,omitempty" jsonschema:"the latest verification of a fix"`
	CloseReason  string        `json:"close_reason,omitempty" jsonschema:"for a closed incident: fixed (after a verified fix), dismissed (a false alarm) or duplicate (see duplicate_of)"`
	DuplicateOf  string        `json:"duplicate_of,omitempty" jsonschema:"the incident this one was merged into as a duplicate"`
	MergedFrom   []string      `json:"merged_from,omitempty" jsonschema:"duplicates merged into this incident"`
	Timeline     []Event       `json:"timeline" jsonschema:"status changes, oldest first"`
	UpdatedAt    time.Time     `json:"updated_at" jsonschema:"last change to the incident"`

	version int64
}

// Event is one status change of an incident.
type Event struct {
	At    time.Time `json:"at" jsonschema:"when"`
	From  Status    `json:"from,omitempty" jsonschema:"status before ('' when opened)"`
	To    Status    `json:"to" jsonschema:"status after"`
	Actor string    `json:"actor,omitempty" jsonschema:"who or what moved it"`
	Note  string    `json:"note,omitempty" jsonschema:"why"`
}

// Cause is one ranked candidate cause of an incident: a recorded change.
type Cause struct {
	Rank       int     `json:"rank" jsonschema:"1 is the most likely cause"`
	Confidence float64 `json:"confidence" jsonschema:"the probability that this change is the cause, 0 to 1: its factors' score through a map calibrated on generated incidents"`
	Credible   bool    `json:"credible" jsonschema:"true when the change has a lineage path to the symptoms and a timing fit (at most a day before the onset); only a credible cause is cited as most likely"`
	// NotCredible names the legs of a credible cause the change lacks.
	NotCredible []string         `json:"not_credible,omitempty" jsonschema:"why the change is not credible, per leg: no_lineage_path (it cannot reach the symptoms in recorded lineage), no_timing_fit (it took effect more than a day before the onset); empty when credible"`
	Change      changelog.Change `json:"change" jsonschema:"the recorded change"`
	Relation    string           `json:"relation" jsonschema:"same_asset, upstream, downstream or unrelated"`
	Distance    int              `json:"distance" jsonschema:"hops from the changed asset down to the nearest symptomatic asset; -1 when not upstream"`
	Path        []string         `json:"path" jsonschema:"asset path from the changed asset down to the symptomatic asset"`
	Readers     []string         `json:"readers" jsonschema:"jobs on that path that read a field the change touched: the first 20 (readers_total counts them all)"`
	// ReadersTotal counts every reader when Readers lists the first.
	ReadersTotal int       `json:"readers_total,omitempty" jsonschema:"jobs on the path reading a touched field, in all"`
	LeadTime     string    `json:"lead_time" jsonschema:"time from the change to the onset, e.g. 5m before; negative lead means after the onset"`
	Factors      Factors   `json:"factors" jsonschema:"the scores the confidence combines"`
	Evidence     []string  `json:"evidence" jsonschema:"checkable statements supporting or weakening the cause: at most 20, and a last one counting those left out"`
	At           time.Time `json:"at" jsonschema:"when the change happened"`

	// score is the raw factor score the ranking orders by.
	score float64
}

// Verdict is what a diagnosis concludes about the cause.
type Verdict string

// Verdicts.
const (
	// VerdictLikely: the top-ranked change is credible.
	VerdictLikely Verdict = "likely_cause"
	// VerdictNone: no considered change is credible; the ranking is kept
	// as the list of what was considered, and nothing is cited as cause.
	VerdictNone Verdict = "no_credible_cause"
	// VerdictAttributed: a person named the cause (dw cause set).
	VerdictAttributed Verdict = "attributed"
)

// Attribution is a cause a person named for an incident.
type Attribution struct {
	Change changelog.Change `json:"change" jsonschema:"the recorded change the person named"`
	Actor  string           `json:"actor" jsonschema:"who named it"`
	Reason string           `json:"reason" jsonschema:"why, in their words"`
	At     time.Time        `json:"at" jsonschema:"when"`
	// Replaced is the attribution this one corrected, if any.
	Replaced int64 `json:"replaced_change_id,omitempty" jsonschema:"change id of the earlier attribution this one corrected"`
}

// Factors are the parts of a cause's confidence, each in [0,1].
type Factors struct {
	Lineage float64 `json:"lineage" jsonschema:"1 for the symptomatic asset itself or one hop upstream, falling with distance; low with no known path; near 0 downstream"`
	Timing  float64 `json:"timing" jsonschema:"1 just before the onset, halving every 12h earlier; lower for a change after the onset"`
	Fit     float64 `json:"fit" jsonschema:"how the kind of change fits the kind of symptom"`
	Fields  float64 `json:"fields" jsonschema:"1 when a job on the path reads a field the change touched; 0.5 when the change touched no fields; lower when nothing reads them"`
	History float64 `json:"history" jsonschema:"1 when this feed broke the same way before"`
}

// ErrInvalid is matched (errors.Is) by every error caused by bad input, so
// a tool can tell the model to fix its call rather than retry it.
var ErrInvalid = changelog.ErrInvalid

type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

func orText(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// formatNumber prints a number without needless decimals.
func formatNumber(v float64) string {
	s := fmt.Sprintf("%.4g", v)
	if strings.Contains(s, "e") {
		return fmt.Sprintf("%.0f", v)
	}
	return s
}

// formatLead prints how long before the onset a change happened.
func formatLead(d time.Duration) string {
	if d < 0 {
		return formatDuration(-d) + " after"
	}
	return formatDuration(d) + " before"
}

func formatDuration(d time.Duration) string {
	d = d.Round(time.Minute)
	switch {
	case d < time.Minute:
		return "under 1 min"
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 48*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%02dm", h, m)
	}
	return fmt.Sprintf("%.1f days", d.Hours()/24)
}

// clockTime prints a time for evidence: the minute in UTC, with the date
// when it is not the reference day.
func clockTime(t, ref time.Time) string {
	t, ref = t.UTC(), ref.UTC()
	if t.YearDay() == ref.YearDay() && t.Year() == ref.Year() {
		return t.Format("15:04")
	}
	return t.Format("Mon 2 Jan 15:04")
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain structs, slices and maps of strings are stored.
		panic(fmt.Sprintf("incidents: encode %T: %v", v, err))
	}
	return string(b)
}

func decodeJSON(s string, v any) error {
	if s == "" {
		return nil
	}
	return json.Unmarshal([]byte(s), v)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
