package incidents

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dataworkers/dw/internal/changelog"

	"github.com/dataworkers/dw/internal/store"
)

// A cause is credible when it has both legs of an explanation: a lineage
// path (it changed a symptomatic asset or one upstream of them) and a
// timing fit (it took effect at most timingFitLead before the onset, or
// inside the first anomalous bucket and its grace). A change without a
// path cannot have fed the symptoms, whatever its timing; one two days
// early on the path had its effect long before the data went bad. When
// the top cause lacks a leg the diagnosis says "no credible cause",
// listing what was considered and, per change, the legs it lacks
// (Cause.NotCredible). Confidence does not decide credibility: it is the
// calibrated probability that the change is the cause (calibrate), which
// an ambiguous but credible cause may have low.

// The legs a credible cause needs, named when missing.
const (
	LegNoLineagePath = "no_lineage_path"
	LegNoTimingFit   = "no_timing_fit"
)

// timingFitLead is how long before the onset a change may have taken
// effect and still fit its timing: the next run of a daily pipeline after
// a change is at most a day later. The timing factor halves every 12 h, so
// the fit is a timing factor of at least 0.25.
const timingFitLead = 24 * time.Hour

// missingLegs names the legs of a credible cause that c lacks.
func missingLegs(c Cause) []string {
	legs := []string{}
	if c.Relation != RelationSame && c.Relation != RelationUpstream {
		legs = append(legs, LegNoLineagePath)
	}
	if c.Factors.Timing < math.Pow(0.5, float64(timingFitLead)/float64(timingHalf)) {
		legs = append(legs, LegNoTimingFit)
	}
	return legs
}

// credible reports whether a ranked cause may be cited as the cause.
func credible(c Cause) bool { return len(missingLegs(c)) == 0 }

// legsText says in words which legs a cause lacks.
func legsText(legs []string) string {
	var out []string
	for _, l := range legs {
		switch l {
		case LegNoLineagePath:
			out = append(out, "no lineage path to the symptoms")
		case LegNoTimingFit:
			out = append(out, fmt.Sprintf("no timing fit (more than %s before the onset)", formatDuration(timingFitLead)))
		}
	}
	return strings.Join(out, " and ")
}

// rawScore combines a change's factors (see Diagnose): lineage multiplies
// the weighted fit, timing, fields and history. It ranks the changes;
// calibrate turns it into a confidence.
func rawScore(f Factors) float64 {
	return f.Lineage * (weightFit*f.Fit + weightTiming*f.Timing + weightFields*f.Fields + weightHistory*f.History)
}

// A confidence is the probability that the change is the cause, given
// every change the diagnosis ranked: a conditional logit over them and the
// chance that none of them is the cause,
//
//	confidence_i = w(score_i) / (exp(none) + Σ_j w(score_j)),  w(s) = exp(slope·s^power).
//
// So one change that fits well among poor ones is near certain, two that
// fit equally share it, and a lone poor one stays unlikely. w increases
// with the score, so the ranking is the score's. The constants are fitted
// by maximum likelihood (TestFitCausesCalibration, DW_FIT_CALIBRATION=1)
// on the rankings of 600 generated incidents (seeds 1000–1599 of
// calibrationIncident: random layered lineage; the true cause in three of
// four, mostly of a kind that fits and inside the first bad hour, else
// hours to a day early; unrelated, downstream and upstream decoys the same
// day), and checked on seeds 1–400 by TestCauseConfidenceIsCalibrated. The
// power (a concave map: the score's top end separates causes less than its
// middle does) fits those rankings better than a linear one (log-likelihood
// −440.8 against −453.3). Refit when the factors, their weights or the
// generator change.
const (
	calibrationNone  = 16.918
	calibrationSlope = 23.143
	calibrationPower = 0.412
)

func calibrationWeight(score float64) float64 {
	return math.Exp(calibrationSlope * math.Pow(math.Max(0, score), calibrationPower))
}

// calibrate sets the confidence of every ranked cause from their scores.
func calibrate(causes []Cause) {
	total := math.Exp(calibrationNone)
	for _, c := range causes {
		total += calibrationWeight(c.score)
	}
	for i := range causes {
		causes[i].Confidence = round3(calibrationWeight(causes[i].score) / total)
	}
}

// Cause is the change an incident is attributed to: the one a person
// named, else the top-ranked change when it is credible; nil when there is
// no credible cause.
func (inc *Incident) Cause() *changelog.Change {
	if inc.Attributed != nil {
		return &inc.Attributed.Change
	}
	if len(inc.Causes) > 0 && inc.Causes[0].Credible {
		return &inc.Causes[0].Change
	}
	return nil
}

// CitedCause is the ranked cause proposals cite: the ranked entry of the
// attributed change when a person named one (or a bare entry built from
// it when the ranking did not list it), else the credible top cause; nil
// when there is none.
func (inc *Incident) CitedCause() *Cause {
	if a := inc.Attributed; a != nil {
		for i := range inc.Causes {
			if inc.Causes[i].Change.ID == a.Change.ID {
				c := inc.Causes[i]
				return &c
			}
		}
		return &Cause{Change: a.Change, At: a.Change.At, Relation: RelationUnrelated, Distance: -1, Path: []string{},
			Readers: []string{}, LeadTime: formatLead(inc.Onset.Sub(a.Change.At)),
			Evidence: []string{fmt.Sprintf("%s named this change as the cause: %s", a.Actor, a.Reason)}}
	}
	if len(inc.Causes) > 0 && inc.Causes[0].Credible {
		c := inc.Causes[0]
		return &c
	}
	return nil
}

func verdictOf(inc *Incident) Verdict {
	switch {
	case inc.Attributed != nil:
		return VerdictAttributed
	case inc.DiagnosedAt.IsZero():
		return ""
	case len(inc.Causes) > 0 && inc.Causes[0].Credible:
		return VerdictLikely
	}
	return VerdictNone
}

// AttributeParams names the cause of an incident.
type AttributeParams struct {
	IncidentID string `json:"incident_id" jsonschema:"incident id, e.g. INC-12"`
	ChangeID   int64  `json:"change_id" jsonschema:"id of the recorded change that caused it (list_changes)"`
	Reason     string `json:"reason" jsonschema:"why this change, in the person's words"`
	// Actor is the person naming it; the CLI fills it from who runs it.
	Actor string `json:"-"`
}

const maxReason = 2000

// AttributeCause records that a person named a recorded change as an
// incident's cause. It overrides the ranking wherever a cause is cited
// (proposals, the history later diagnoses learn from) and may be corrected
// by naming another change; every attribution stays in the store and the
// timeline. The incident's status does not change.
func (s *Service) AttributeCause(ctx context.Context, p AttributeParams) (*Incident, error) {
	actor := strings.TrimSpace(p.Actor)
	if actor == "" {
		return nil, invalid("who names the cause is required")
	}
	reason := strings.TrimSpace(p.Reason)
	if reason == "" {
		return nil, invalid("reason is required: say why this change caused the incident, e.g. \"the 09:40 deploy dropped the country column\"")
	}
	if !utf8.ValidString(reason) || strings.ContainsRune(reason, 0) || len(reason) > maxReason {
		return nil, invalid("reason must be UTF-8 text without NUL bytes, at most %d bytes", maxReason)
	}
	if p.ChangeID <= 0 {
		return nil, invalid("change_id %d is not a change id: use the id list_changes or dw changes shows, e.g. 42", p.ChangeID)
	}
	now := s.now()
	var out *Incident
	err := s.DB.InTx(ctx, func(tx *store.Tx) error {
		inc, err := loadIncident(ctx, tx, p.IncidentID)
		if err != nil {
			return err
		}
		ch, found, err := changelog.ByID(ctx, tx, p.ChangeID)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: no recorded change %d: record it first (record_change) or pick one from list_changes", store.ErrNotFound, p.ChangeID)
		}
		note := fmt.Sprintf("cause attributed by %s: change %d, %s (%s)", actor, ch.ID, ch.Summary, reason)
		if inc.Attributed != nil {
			note = fmt.Sprintf("cause corrected by %s from change %d to change %d, %s (%s)", actor, inc.Attributed.Change.ID, ch.ID, ch.Summary, reason)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO incident_cause_attributions (incident_id, change_id, actor, reason, at_ms)
			VALUES (?, ?, ?, ?, ?)`, inc.ID, ch.ID, actor, reason, store.Millis(now)); err != nil {
			return fmt.Errorf("record the cause of %s: %w", inc.ID, err)
		}
		prev := inc.Attributed
		inc.Attributed = &Attribution{Change: ch.Bounded(), Actor: actor, Reason: reason, At: now}
		if prev != nil {
			inc.Attributed.Replaced = prev.Change.ID
		}
		if err := save(ctx, tx, inc, inc.Status, actor, note, now); err != nil {
			return err
		}
		out, err = loadIncident(ctx, tx, inc.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// loadAttribution reads the latest cause a person named, with the one it
// corrected.
func loadAttribution(ctx context.Context, q store.Querier, id string) (*Attribution, error) {
	rows, err := q.QueryContext(ctx, `SELECT change_id, actor, reason, at_ms FROM incident_cause_attributions
		WHERE incident_id = ? ORDER BY id DESC LIMIT 2`, id)
	if err != nil {
		return nil, fmt.Errorf("read the attributed cause of %s: %w", id, err)
	}
	type row struct {
		change int64
		actor  string
		reason string
		at     int64
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.change, &r.actor, &r.reason, &r.at); err != nil {
			rows.Close()
			return nil, err
		}
		got = append(got, r)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if len(got) == 0 {
		return nil, nil
	}
	ch, found, err := changelog.ByID(ctx, q, got[0].change)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("incident %s: attributed change %d is missing: %w", id, got[0].change, sql.ErrNoRows)
	}
	a := &Attribution{Change: ch.Bounded(), Actor: got[0].actor, Reason: got[0].reason, At: store.FromMillis(got[0].at)}
	if len(got) > 1 {
		a.Replaced = got[1].change
	}
	return a, nil
}

// CauseFacts is what a receipt keeps of an incident's cause: the credible
// top cause of a diagnosis, or the change a person named and who did.
type CauseFacts struct {
	Incident     string   `json:"incident"`
	Summary      string   `json:"summary"`
	ChangeID     int64    `json:"change_id"`
	Kind         string   `json:"kind"`
	Confidence   float64  `json:"confidence"`
	Path         []string `json:"path"`
	Readers      []string `json:"readers"`
	Evidence     []string `json:"evidence"`
	Symptoms     []string `json:"symptoms"`
	AttributedBy string   `json:"attributed_by,omitempty"`
	Reason       string   `json:"reason,omitempty"`
	Replaced     int64    `json:"replaced_change_id,omitempty"`
}

// CauseFacts returns the receipt facts of the cause the incident cites and
// the actor to record them under (the person who named it, else actor);
// nil when there is no credible cause.
func (inc *Incident) CauseFacts(actor string) (*CauseFacts, string) {
	top := inc.CitedCause()
	if top == nil {
		return nil, actor
	}
	f := &CauseFacts{
		Incident: inc.ID, ChangeID: top.Change.ID, Kind: string(top.Change.Kind), Confidence: top.Confidence,
		Path: top.Path, Readers: top.Readers, Evidence: top.Evidence, Symptoms: []string{},
		Summary: fmt.Sprintf("%s: %s (%s, confidence %.2f, %s the onset)", inc.Title, top.Change.Summary, top.Change.Kind, top.Confidence, top.LeadTime),
	}
	if a := inc.Attributed; a != nil {
		f.AttributedBy, f.Reason, f.Replaced, actor = a.Actor, a.Reason, a.Replaced, a.Actor
		f.Summary = fmt.Sprintf("%s: %s (%s, %s the onset), named as the cause by %s: %s", inc.Title, top.Change.Summary,
			top.Change.Kind, top.LeadTime, a.Actor, a.Reason)
		if a.Replaced != 0 {
			f.Summary += fmt.Sprintf(" (corrects change %d)", a.Replaced)
		}
	}
	for _, s := range inc.Symptoms {
		f.Symptoms = append(f.Symptoms, fmt.Sprintf("%s %s on %s at %s: %s", s.Kind, s.Metric, s.Asset,
			s.At.UTC().Format("2006-01-02 15:04"), orText(s.Detail, formatNumber(s.Observed))))
	}
	return f, actor
}
