package incidents

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/suggest"
)

// ReportParams is a batch of symptoms to open or join incidents with.
type ReportParams struct {
	Symptoms []Symptom `json:"symptoms" jsonschema:"failed checks or metric anomalies"`
	// Actor is the agent or person reporting, for the timeline.
	Actor string `json:"actor,omitempty" jsonschema:"who reports the symptoms"`
}

// ReportResult says where each symptom went.
type ReportResult struct {
	Incidents []IncidentRef `json:"incidents" jsonschema:"incidents opened or joined, in order of first use"`
}

// IncidentRef is an incident a report opened or joined.
type IncidentRef struct {
	ID       string `json:"id" jsonschema:"incident id"`
	Opened   bool   `json:"opened" jsonschema:"true when this report opened it; false when the symptoms joined an incident already open"`
	Status   Status `json:"status" jsonschema:"status after the report"`
	Symptoms int    `json:"symptoms" jsonschema:"symptoms of this report recorded on it"`
	Reason   string `json:"reason" jsonschema:"why the symptoms were grouped here"`
}

func (s Symptom) validate(now time.Time) (Symptom, error) {
	k, err := parseSymptomKind(string(s.Kind))
	if err != nil {
		return s, err
	}
	s.Kind = k
	if s.Asset, err = changelog.CleanAsset("symptom asset", s.Asset); err != nil {
		return s, err
	}
	if s.At.IsZero() {
		return s, invalid("symptom on %s: at is required (the checked hour bucket or the check time, RFC 3339)", s.Asset)
	}
	if s.At.After(now.Add(changelog.FutureSkew)) {
		return s, invalid("symptom on %s: at %s is in the future (now %s)", s.Asset, s.At.UTC().Format(time.RFC3339), now.Format(time.RFC3339))
	}
	for name, v := range map[string]float64{"observed": s.Observed, "expected": s.Expected, "expected_low": s.ExpectedLow, "expected_high": s.ExpectedHigh} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return s, invalid("symptom on %s: %s must be a finite number", s.Asset, name)
		}
	}
	if s.ExpectedLow > s.ExpectedHigh {
		return s, invalid("symptom on %s: expected_low %s is above expected_high %s", s.Asset, formatNumber(s.ExpectedLow), formatNumber(s.ExpectedHigh))
	}
	if k == SymptomDivergence && (s.Metric == "" || s.RelatedMetric == "") {
		return s, invalid("divergence symptom on %s: name both metric and related_metric", s.Asset)
	}
	s.Metric, s.RelatedMetric, s.Column = strings.TrimSpace(s.Metric), strings.TrimSpace(s.RelatedMetric), strings.TrimSpace(s.Column)
	s.At = s.At.UTC().Truncate(time.Millisecond)
	if !s.Until.IsZero() {
		s.Until = s.Until.UTC().Truncate(time.Millisecond)
		if !s.Until.After(s.At) || s.Until.Sub(s.At) > 31*24*time.Hour {
			return s, invalid("symptom on %s: until %s must be after at %s and at most 31 days after it (the end of the checked bucket)",
				s.Asset, s.Until.Format(time.RFC3339), s.At.Format(time.RFC3339))
		}
	}
	return s, nil
}

// ReportSymptoms records symptoms on incidents: each joins an active
// incident (not verified or closed) on the same asset or an asset within
// Settings.JoinHops in the graph whose symptoms span a time within
// Settings.JoinWindow of it, else opens a new incident. Two anomalies at
// once on unrelated feeds therefore stay two incidents.
func (s *Service) ReportSymptoms(ctx context.Context, p ReportParams) (*ReportResult, error) {
	if len(p.Symptoms) == 0 {
		return nil, invalid("symptoms is empty: report at least one failed check or anomaly")
	}
	now := s.now()
	syms := make([]Symptom, len(p.Symptoms))
	for i, sym := range p.Symptoms {
		v, err := sym.validate(now)
		if err != nil {
			return nil, err
		}
		if v.Asset, err = s.assetID(ctx, "symptom asset", v.Asset); err != nil {
			return nil, err
		}
		syms[i] = v
	}
	sort.SliceStable(syms, func(i, j int) bool { return syms[i].At.Before(syms[j].At) })
	near, err := s.nearAssets(ctx, syms)
	if err != nil {
		return nil, err
	}
	actor := orText(strings.TrimSpace(p.Actor), "dw-incidents")
	var res *ReportResult
	err = s.DB.InTx(ctx, func(tx *store.Tx) error {
		res = &ReportResult{Incidents: []IncidentRef{}}
		r, err := s.report(ctx, tx, syms, near, actor, now)
		if err == nil {
			res = r
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// nearAssets maps each symptomatic asset to the assets within JoinHops of
// it in either direction, with their distance.
func (s *Service) nearAssets(ctx context.Context, syms []Symptom) (map[string]map[string]int, error) {
	out := map[string]map[string]int{}
	hops := s.settings().JoinHops
	for _, sym := range syms {
		if _, done := out[sym.Asset]; done {
			continue
		}
		m := map[string]int{sym.Asset: 0}
		if s.Graph != nil {
			for _, walk := range []func(context.Context, []string, int) (map[string]Hop, error){s.Graph.Upstream, s.Graph.Downstream} {
				reached, err := walk(ctx, []string{sym.Asset}, hops)
				if err != nil {
					return nil, fmt.Errorf("walk the graph around %s: %w", sym.Asset, err)
				}
				for a, h := range reached {
					if d, ok := m[a]; !ok || h.Distance < d {
						m[a] = h.Distance
					}
				}
			}
			// Siblings: the other outputs of the jobs that write this
			// asset (a table and the dead-letter table its pipeline
			// writes beside it) are two hops apart, up then down.
			if hops >= 2 {
				parents, err := s.Graph.Upstream(ctx, []string{sym.Asset}, 1)
				if err != nil {
					return nil, fmt.Errorf("walk the graph around %s: %w", sym.Asset, err)
				}
				var jobs []string
				for a, h := range parents {
					if h.Distance == 1 {
						jobs = append(jobs, a)
					}
				}
				if len(jobs) > 0 {
					sort.Strings(jobs)
					outs, err := s.Graph.Downstream(ctx, jobs, 1)
					if err != nil {
						return nil, fmt.Errorf("walk the graph around %s: %w", sym.Asset, err)
					}
					for a, h := range outs {
						if d, ok := m[a]; h.Distance == 1 && (!ok || d > 2) {
							m[a] = 2
						}
					}
				}
			}
		}
		out[sym.Asset] = m
	}
	return out, nil
}

// activeIncident is what joining needs to know of an open incident.
type activeIncident struct {
	id          string
	first, last time.Time
	assets      []string
	status      Status
}

func (s *Service) report(ctx context.Context, tx *store.Tx, syms []Symptom, near map[string]map[string]int, actor string, now time.Time) (*ReportResult, error) {
	active, err := loadActive(ctx, tx)
	if err != nil {
		return nil, err
	}
	window := s.settings().JoinWindow
	res := &ReportResult{Incidents: []IncidentRef{}}
	refs := map[string]int{}
	touched := map[string]bool{}
	for _, sym := range syms {
		best, reason := -1, ""
		bestDist := math.MaxInt
		for i, a := range active {
			if sym.At.Before(a.first.Add(-window)) || sym.At.After(a.last.Add(window)) {
				continue
			}
			for _, asset := range a.assets {
				d, ok := near[sym.Asset][asset]
				if !ok && deadLetterOf(sym.Asset, asset) {
					d, ok = 1, true
				}
				if !ok || d > bestDist || (d == bestDist && best >= 0 && !a.first.After(active[best].first)) {
					continue
				}
				best, bestDist = i, d
				switch {
				case d == 0:
					reason = fmt.Sprintf("same asset %s, symptoms within %s", asset, formatDuration(window))
				case deadLetterOf(sym.Asset, asset):
					reason = fmt.Sprintf("%s and %s are a table and its dead-letter table, symptoms within %s", sym.Asset, asset, formatDuration(window))
				default:
					reason = fmt.Sprintf("%s is %d hop(s) from %s in the lineage, symptoms within %s", sym.Asset, d, asset, formatDuration(window))
				}
			}
		}
		var id string
		if best >= 0 {
			a := &active[best]
			id = a.id
			if sym.At.Before(a.first) {
				a.first = sym.At
			}
			if sym.At.After(a.last) {
				a.last = sym.At
			}
			if !slices.Contains(a.assets, sym.Asset) {
				a.assets = append(a.assets, sym.Asset)
			}
		} else {
			id, err = openIncident(ctx, tx, sym, actor, now)
			if err != nil {
				return nil, err
			}
			reason = "no active incident on a related asset within " + formatDuration(window)
			active = append(active, activeIncident{id: id, first: sym.At, last: sym.At, assets: []string{sym.Asset}, status: StatusOpen})
			refs[id] = len(res.Incidents)
			res.Incidents = append(res.Incidents, IncidentRef{ID: id, Opened: true, Status: StatusOpen, Reason: reason})
		}
		if err := addSymptom(ctx, tx, id, sym, now); err != nil {
			return nil, err
		}
		touched[id] = true
		if _, ok := refs[id]; !ok {
			refs[id] = len(res.Incidents)
			res.Incidents = append(res.Incidents, IncidentRef{ID: id, Status: active[best].status, Reason: reason})
		}
		res.Incidents[refs[id]].Symptoms++
	}
	for id := range touched {
		if _, err := tx.ExecContext(ctx, `UPDATE incidents SET onset_ms = (SELECT MIN(at_ms) FROM incident_symptoms WHERE incident_id = ?),
			version = version + 1, updated_ms = ? WHERE id = ?`, id, store.Millis(now), id); err != nil {
			return nil, fmt.Errorf("update incident %s onset: %w", id, err)
		}
	}
	return res, nil
}

func loadActive(ctx context.Context, tx *store.Tx) ([]activeIncident, error) {
	rows, err := tx.QueryContext(ctx, `SELECT i.id, i.status, i.onset_ms, COALESCE(MAX(s.at_ms), i.onset_ms)
		FROM incidents i LEFT JOIN incident_symptoms s ON s.incident_id = i.id
		WHERE i.status <> ? AND i.status <> ? GROUP BY i.id, i.status, i.onset_ms ORDER BY i.onset_ms, i.id`,
		string(StatusVerified), string(StatusClosed))
	if err != nil {
		return nil, fmt.Errorf("read active incidents: %w", err)
	}
	var out []activeIncident
	index := map[string]int{}
	for rows.Next() {
		var a activeIncident
		var st string
		var first, last int64
		if err := rows.Scan(&a.id, &st, &first, &last); err != nil {
			rows.Close()
			return nil, err
		}
		a.status, a.first, a.last = Status(st), store.FromMillis(first), store.FromMillis(last)
		index[a.id] = len(out)
		out = append(out, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return out, nil
	}
	rows, err = tx.QueryContext(ctx, `SELECT a.incident_id, a.asset FROM incident_assets a JOIN incidents i ON i.id = a.incident_id
		WHERE i.status <> ? AND i.status <> ? ORDER BY a.incident_id, a.asset`, string(StatusVerified), string(StatusClosed))
	if err != nil {
		return nil, fmt.Errorf("read active incident assets: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, asset string
		if err := rows.Scan(&id, &asset); err != nil {
			return nil, err
		}
		if i, ok := index[id]; ok {
			out[i].assets = append(out[i].assets, asset)
		}
	}
	return out, rows.Err()
}

func openIncident(ctx context.Context, tx *store.Tx, first Symptom, actor string, now time.Time) (string, error) {
	title := fmt.Sprintf("%s on %s: %s", first.Kind, first.Asset, first.describe())
	if r := []rune(title); len(r) > 200 {
		title = string(r[:200])
	}
	var seq int64
	pending := fmt.Sprintf("pending-%d-%s", now.UnixNano(), first.assertion())
	err := tx.QueryRowContext(ctx, `INSERT INTO incidents (id, title, status, onset_ms, detected_ms, diagnosed_ms, verified_ms,
		closed_ms, causes, top_cause_kind, top_cause_change, proposals, verification, version, updated_ms)
		VALUES (?, ?, ?, ?, ?, 0, 0, 0, '[]', '', 0, '[]', '', 1, ?) RETURNING seq`,
		pending, title, string(StatusOpen), store.Millis(first.At), store.Millis(now), store.Millis(now)).Scan(&seq)
	if err != nil {
		return "", fmt.Errorf("open incident: %w", err)
	}
	id := "INC-" + strconv.FormatInt(seq, 10)
	if _, err := tx.ExecContext(ctx, "UPDATE incidents SET id = ? WHERE seq = ?", id, seq); err != nil {
		return "", fmt.Errorf("name incident: %w", err)
	}
	return id, addEvent(ctx, tx, id, now, "", StatusOpen, actor, "opened: "+first.describe())
}

func addSymptom(ctx context.Context, tx *store.Tx, id string, sym Symptom, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO incident_symptoms (incident_id, kind, asset, metric, related_metric, column_name,
		observed, expected_low, expected_high, expected, at_ms, until_ms, source, detail, recorded_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (incident_id, kind, asset, metric, related_metric, column_name, at_ms) DO UPDATE SET
		observed = excluded.observed, expected_low = excluded.expected_low, expected_high = excluded.expected_high,
		expected = excluded.expected, until_ms = excluded.until_ms, source = excluded.source, detail = excluded.detail,
		recorded_ms = excluded.recorded_ms`,
		id, string(sym.Kind), sym.Asset, sym.Metric, sym.RelatedMetric, sym.Column, sym.Observed, sym.ExpectedLow,
		sym.ExpectedHigh, sym.Expected, store.Millis(sym.At), untilMillis(sym.Until), sym.Source, sym.Detail, store.Millis(now))
	if err != nil {
		return fmt.Errorf("record symptom on %s: %w", id, err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO incident_assets (asset, incident_id) VALUES (?, ?)
		ON CONFLICT (asset, incident_id) DO NOTHING`, sym.Asset, id)
	if err != nil {
		return fmt.Errorf("record incident asset: %w", err)
	}
	return nil
}

func addEvent(ctx context.Context, tx *store.Tx, id string, at time.Time, from, to Status, actor, note string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO incident_events (incident_id, at_ms, from_status, to_status, actor, note)
		VALUES (?, ?, ?, ?, ?, ?)`, id, store.Millis(at), string(from), string(to), actor, note)
	if err != nil {
		return fmt.Errorf("record incident event: %w", err)
	}
	return nil
}

// normalizeID accepts "INC-12", "inc-12" and "12".
func normalizeID(id string) string {
	id = strings.ToUpper(strings.TrimSpace(id))
	if _, err := strconv.ParseInt(id, 10, 64); err == nil {
		return "INC-" + id
	}
	return id
}

// GetIncident returns an incident with its symptoms, causes and timeline.
func (s *Service) GetIncident(ctx context.Context, id string) (*Incident, error) {
	return loadIncident(ctx, s.DB, id)
}

func loadIncident(ctx context.Context, q store.Querier, rawID string) (*Incident, error) {
	return readIncident(ctx, q, rawID, true)
}

// readIncident is loadIncident, or without the timeline and the causes
// when whole is false: a diagnosis replaces the causes and does not show
// the timeline (which grows one event per diagnosis), and reading and
// decoding both on every diagnosis was a share of its fixed cost.
func readIncident(ctx context.Context, q store.Querier, rawID string, whole bool) (*Incident, error) {
	id := normalizeID(rawID)
	inc := &Incident{ID: id}
	var st, causes, proposals, verification string
	var onset, detected, diagnosed, verified, closed, updated int64
	err := q.QueryRowContext(ctx, `SELECT title, status, onset_ms, detected_ms, diagnosed_ms, verified_ms, closed_ms,
		causes, proposals, verification, version, updated_ms FROM incidents WHERE id = ?`, id).Scan(
		&inc.Title, &st, &onset, &detected, &diagnosed, &verified, &closed, &causes, &proposals, &verification, &inc.version, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, unknownIncident(ctx, q, rawID)
	}
	if err != nil {
		return nil, fmt.Errorf("read incident %s: %w", id, err)
	}
	inc.Status = Status(st)
	inc.Onset, inc.DetectedAt, inc.DiagnosedAt = store.FromMillis(onset), store.FromMillis(detected), store.FromMillis(diagnosed)
	inc.VerifiedAt, inc.ClosedAt, inc.UpdatedAt = store.FromMillis(verified), store.FromMillis(closed), store.FromMillis(updated)
	inc.ResolvedAt = inc.VerifiedAt
	if inc.ResolvedAt.IsZero() {
		inc.ResolvedAt = inc.ClosedAt
	}
	if !whole {
		causes = "[]"
	}
	if err := decodeJSON(causes, &inc.Causes); err != nil {
		return nil, fmt.Errorf("incident %s causes: %w", id, err)
	}
	if err := decodeJSON(proposals, &inc.Proposals); err != nil {
		return nil, fmt.Errorf("incident %s proposals: %w", id, err)
	}
	if verification != "" {
		inc.Verification = &Verification{}
		if err := decodeJSON(verification, inc.Verification); err != nil {
			return nil, fmt.Errorf("incident %s verification: %w", id, err)
		}
	}
	if inc.Causes == nil {
		inc.Causes = []Cause{}
	}
	for i := range inc.Causes {
		inc.Causes[i].Credible = credible(inc.Causes[i])
	}
	if inc.Proposals == nil {
		inc.Proposals = []string{}
	}
	if inc.Symptoms, err = loadSymptoms(ctx, q, id); err != nil {
		return nil, err
	}
	inc.Assets = []string{}
	for _, sym := range inc.Symptoms {
		if !slices.Contains(inc.Assets, sym.Asset) {
			inc.Assets = append(inc.Assets, sym.Asset)
		}
	}
	sort.Strings(inc.Assets)
	inc.OnsetEnd = onsetEnd(inc.Onset, inc.Symptoms)
	if whole {
		if inc.Timeline, err = loadEvents(ctx, q, id); err != nil {
			return nil, err
		}
	}
	if inc.Attributed, err = loadAttribution(ctx, q, id); err != nil {
		return nil, err
	}
	inc.Verdict = verdictOf(inc)
	if err := loadMerges(ctx, q, inc); err != nil {
		return nil, err
	}
	return inc, nil
}

// incidentVersion is an incident's version as stored: every write to the
// incident moves it (save, and the symptoms ReportSymptoms adds).
func incidentVersion(ctx context.Context, q store.Querier, id string) (int64, error) {
	var v int64
	if err := q.QueryRowContext(ctx, "SELECT version FROM incidents WHERE id = ?", id).Scan(&v); err != nil {
		return 0, fmt.Errorf("read incident %s: %w", id, err)
	}
	return v, nil
}

// onsetEnd is the end of the first anomalous bucket: the earliest end of
// any symptom's bucket, so the problem had certainly begun by then. It
// depends on the buckets checked, not on how wide a window was monitored.
func onsetEnd(onset time.Time, syms []Symptom) time.Time {
	var end time.Time
	for _, s := range syms {
		if e := s.end(); end.IsZero() || e.Before(end) {
			end = e
		}
	}
	if end.Before(onset) {
		return onset
	}
	return end
}

// deadLetterSuffixes name the table a pipeline writes the rows it could
// not load to, beside its main table.
var deadLetterSuffixes = []string{"_dead_letter", "_deadletter", "_dead_letters", "_dlq", "_dlt", "_rejected", "_errors"}

// deadLetterOf reports whether one of two assets is the other's
// dead-letter table (orders and orders_dead_letter in the same schema):
// both are outputs of one pipeline, so their symptoms are one incident even
// where lineage does not record the dead-letter table.
func deadLetterOf(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	for _, suf := range deadLetterSuffixes {
		if a+suf == b || b+suf == a {
			return true
		}
	}
	return false
}

func untilMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return store.Millis(t)
}

func unknownIncident(ctx context.Context, q store.Querier, id string) error {
	ids, err := store.Strings(ctx, q, "SELECT id FROM incidents ORDER BY seq DESC LIMIT 200")
	if err != nil {
		return fmt.Errorf("read incidents: %w", err)
	}
	if len(ids) == 0 {
		return fmt.Errorf("%w: no incident %q: there are no incidents yet", store.ErrNotFound, id)
	}
	return fmt.Errorf("%w: no incident %q; closest: %s", store.ErrNotFound, id, strings.Join(suggest.Closest(normalizeID(id), ids, 3), ", "))
}

func loadSymptoms(ctx context.Context, q store.Querier, id string) ([]Symptom, error) {
	rows, err := q.QueryContext(ctx, `SELECT kind, asset, metric, related_metric, column_name, observed, expected_low,
		expected_high, expected, at_ms, until_ms, source, detail FROM incident_symptoms WHERE incident_id = ? ORDER BY at_ms, id`, id)
	if err != nil {
		return nil, fmt.Errorf("read symptoms of %s: %w", id, err)
	}
	defer rows.Close()
	out := []Symptom{}
	for rows.Next() {
		var sym Symptom
		var kind string
		var at, until int64
		if err := rows.Scan(&kind, &sym.Asset, &sym.Metric, &sym.RelatedMetric, &sym.Column, &sym.Observed,
			&sym.ExpectedLow, &sym.ExpectedHigh, &sym.Expected, &at, &until, &sym.Source, &sym.Detail); err != nil {
			return nil, err
		}
		sym.Kind, sym.At = SymptomKind(kind), store.FromMillis(at)
		if until != 0 {
			sym.Until = store.FromMillis(until)
		}
		out = append(out, sym)
	}
	return out, rows.Err()
}

func loadEvents(ctx context.Context, q store.Querier, id string) ([]Event, error) {
	rows, err := q.QueryContext(ctx, `SELECT at_ms, from_status, to_status, actor, note FROM incident_events
		WHERE incident_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("read timeline of %s: %w", id, err)
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		var e Event
		var at int64
		var from, to string
		if err := rows.Scan(&at, &from, &to, &e.Actor, &e.Note); err != nil {
			return nil, err
		}
		e.At, e.From, e.To = store.FromMillis(at), Status(from), Status(to)
		out = append(out, e)
	}
	return out, rows.Err()
}

// save writes an incident's mutable state if nobody changed it since it was
// loaded, and records the status change in the timeline.
func save(ctx context.Context, tx *store.Tx, inc *Incident, from Status, actor, note string, now time.Time) error {
	verification := ""
	if inc.Verification != nil {
		verification = mustJSON(inc.Verification)
	}
	// The top cause later diagnoses learn from: the one a person named,
	// else a credible top-ranked change; never a change nobody believes.
	topKind, topChange := "", int64(0)
	if top := inc.Cause(); top != nil {
		topKind, topChange = string(top.Kind), top.ID
	}
	res, err := tx.ExecContext(ctx, `UPDATE incidents SET status = ?, diagnosed_ms = ?, verified_ms = ?, closed_ms = ?,
		causes = ?, top_cause_kind = ?, top_cause_change = ?, proposals = ?, verification = ?, version = version + 1, updated_ms = ?
		WHERE id = ? AND version = ?`,
		string(inc.Status), store.Millis(inc.DiagnosedAt), store.Millis(inc.VerifiedAt), store.Millis(inc.ClosedAt),
		mustJSON(inc.Causes), topKind, topChange, mustJSON(inc.Proposals), verification, store.Millis(now), inc.ID, inc.version)
	if err != nil {
		return fmt.Errorf("update incident %s: %w", inc.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return fmt.Errorf("incident %s changed while it was being updated; read it again and retry", inc.ID)
	}
	inc.version++
	inc.UpdatedAt = now
	if from == inc.Status && note == "" {
		return nil
	}
	return addEvent(ctx, tx, inc.ID, now, from, inc.Status, actor, note)
}

// move checks that an incident may go to a status.
func move(inc *Incident, to Status) error {
	if CanMove(inc.Status, to) {
		return nil
	}
	allowed := transitions[inc.Status]
	names := make([]string, len(allowed))
	for i, s := range allowed {
		names[i] = string(s)
	}
	next := "none: it is closed"
	if len(names) > 0 {
		next = strings.Join(names, ", ")
	}
	return invalid("incident %s is %s and cannot move to %s; from %s it can move to: %s", inc.ID, inc.Status, to, inc.Status, next)
}

// TransitionParams moves an incident along its life.
type TransitionParams struct {
	IncidentID string `json:"incident_id" jsonschema:"incident id, e.g. INC-12"`
	To         string `json:"to" jsonschema:"new status: diagnosed, proposed, approved, fixing or closed (verified and escalated are set only by verification)"`
	Actor      string `json:"actor,omitempty" jsonschema:"who moves it"`
	Note       string `json:"note,omitempty" jsonschema:"why; required to close an incident that was never fixed"`
}

// Transition moves an incident to another status, refusing illegal moves.
// verified and escalated are reached only through Verify, with evidence.
func (s *Service) Transition(ctx context.Context, p TransitionParams) (*Incident, error) {
	to, err := parseStatus(p.To)
	if err != nil {
		return nil, err
	}
	if to == StatusVerified || to == StatusEscalated {
		return nil, invalid("%s is set only by verification: re-run the incident's checks and pass the results to Verify", to)
	}
	now := s.now()
	var out *Incident
	err = s.DB.InTx(ctx, func(tx *store.Tx) error {
		inc, err := loadIncident(ctx, tx, p.IncidentID)
		if err != nil {
			return err
		}
		if err := move(inc, to); err != nil {
			return err
		}
		if to == StatusClosed && inc.VerifiedAt.IsZero() && strings.TrimSpace(p.Note) == "" {
			return invalid("closing %s without a verified fix dismisses it: give a note saying why (e.g. a false alarm)", inc.ID)
		}
		if to == StatusDiagnosed && len(inc.Causes) == 0 {
			return invalid("incident %s has no ranked causes: run Diagnose instead of setting diagnosed by hand", inc.ID)
		}
		from := inc.Status
		inc.Status = to
		if to == StatusClosed {
			inc.ClosedAt = now
		}
		if err := save(ctx, tx, inc, from, orText(p.Actor, "dw-incidents"), strings.TrimSpace(p.Note), now); err != nil {
			return err
		}
		out = inc
		return nil
	})
	if err != nil {
		return nil, err
	}
	return loadIncident(ctx, s.DB, out.ID)
}

// MarkProposed records the ids of proposals handed to approvals and moves
// the incident to proposed.
func (s *Service) MarkProposed(ctx context.Context, incidentID string, proposalIDs []string, actor string) (*Incident, error) {
	var ids []string
	for _, id := range proposalIDs {
		if id = strings.TrimSpace(id); id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, invalid("proposal ids are empty: pass the ids approvals returned")
	}
	now := s.now()
	var out string
	err := s.DB.InTx(ctx, func(tx *store.Tx) (err error) {
		out, err = markProposedTx(ctx, tx, incidentID, ids, actor, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return loadIncident(ctx, s.DB, out)
}

// markProposedTx is MarkProposed inside the caller's transaction, so the
// proposals and the incident's move to proposed commit together. It
// returns the incident's id.
func markProposedTx(ctx context.Context, tx *store.Tx, incidentID string, ids []string, actor string, now time.Time) (string, error) {
	inc, err := loadIncident(ctx, tx, incidentID)
	if err != nil {
		return "", err
	}
	if err := move(inc, StatusProposed); err != nil {
		return "", err
	}
	from := inc.Status
	for _, id := range ids {
		if !slices.Contains(inc.Proposals, id) {
			inc.Proposals = append(inc.Proposals, id)
		}
	}
	inc.Status = StatusProposed
	return inc.ID, save(ctx, tx, inc, from, orText(actor, "dw-incidents"), "proposed: "+strings.Join(ids, ", "), now)
}

// IncidentFilter selects incidents to list.
type IncidentFilter struct {
	Status string `json:"status,omitempty" jsonschema:"only incidents in this status"`
	Asset  string `json:"asset,omitempty" jsonschema:"only incidents with a symptom on this asset"`
	page.Params
}

// IncidentSummary is one line of an incident list.
type IncidentSummary struct {
	ID         string    `json:"id" jsonschema:"incident id"`
	Title      string    `json:"title" jsonschema:"one-line summary"`
	Status     Status    `json:"status" jsonschema:"status"`
	Onset      time.Time `json:"onset" jsonschema:"earliest symptom time"`
	DetectedAt time.Time `json:"detected_at" jsonschema:"when opened"`
	TopCause   string    `json:"top_cause,omitempty" jsonschema:"kind of the top-ranked cause, once diagnosed"`
}

// ListIncidents lists incidents, newest first.
func (s *Service) ListIncidents(ctx context.Context, f IncidentFilter) ([]IncidentSummary, page.Info, error) {
	pg, err := f.ResolveKeyset(incidentKey, "list_incidents", f.Status, f.Asset)
	if err != nil {
		return nil, page.Info{}, err
	}
	q := " FROM incidents i"
	var where []string
	var args []any
	if f.Asset != "" {
		names, err := s.assetSpellings(ctx, "asset", f.Asset)
		if err != nil {
			return nil, page.Info{}, err
		}
		where = append(where, "EXISTS (SELECT 1 FROM incident_assets a WHERE a.incident_id = i.id AND a.asset IN ("+questionMarks(len(names))+"))")
		for _, n := range names {
			args = append(args, n)
		}
	}
	if f.Status != "" {
		st, err := parseStatus(f.Status)
		if err != nil {
			return nil, page.Info{}, err
		}
		where = append(where, "i.status = ?")
		args = append(args, string(st))
	}
	var total int
	if err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*)"+q+whereClause(where), args...).Scan(&total); err != nil {
		return nil, page.Info{}, fmt.Errorf("count incidents: %w", err)
	}
	// The page is the incidents opened before the previous page's last
	// (seq only grows), so one opened or merged away between pages moves
	// no other.
	if pg.After != nil {
		where = append(where, "i.seq < ?")
		args = append(args, pg.After...)
	}
	rows, err := s.DB.QueryContext(ctx, "SELECT i.seq, i.id, i.title, i.status, i.onset_ms, i.detected_ms, i.top_cause_kind"+q+whereClause(where)+
		" ORDER BY i.seq DESC LIMIT ?", append(args, pg.Fetch())...)
	if err != nil {
		return nil, page.Info{}, fmt.Errorf("list incidents: %w", err)
	}
	defer rows.Close()
	type row struct {
		seq int64
		IncidentSummary
	}
	var fetched []row
	for rows.Next() {
		var x row
		var st string
		var onset, detected int64
		if err := rows.Scan(&x.seq, &x.ID, &x.Title, &st, &onset, &detected, &x.TopCause); err != nil {
			return nil, page.Info{}, err
		}
		x.Status, x.Onset, x.DetectedAt = Status(st), store.FromMillis(onset), store.FromMillis(detected)
		fetched = append(fetched, x)
	}
	if err := rows.Err(); err != nil {
		return nil, page.Info{}, err
	}
	shown, info := page.Cut(pg, fetched, total, func(x row) page.Key { return page.Key{x.seq} })
	out := make([]IncidentSummary, len(shown))
	for i, x := range shown {
		out[i] = x.IncidentSummary
	}
	return out, info, nil
}

// incidentKey pages list_incidents newest first by the order incidents
// were opened in.
var incidentKey = page.Keyset{page.Int}

func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}
