package incidents

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/changelog"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/suggest"
	"github.com/dataworkers/dw/internal/warehouse"
)

// Metric sources.
const (
	SourcePushed = "pushed"
	SourceSQL    = "sql"
)

// MetricDefinition is a team metric: a number the team watches, tied to
// the asset it describes.
type MetricDefinition struct {
	Name        string      `json:"name" jsonschema:"metric name"`
	Description string      `json:"description" jsonschema:"what the number means"`
	Asset       string      `json:"asset" jsonschema:"asset id the metric describes"`
	Unit        string      `json:"unit,omitempty" jsonschema:"unit of the values"`
	Source      string      `json:"source" jsonschema:"pushed (values are recorded through the tool) or sql (computed on a warehouse)"`
	Warehouse   string      `json:"warehouse,omitempty" jsonschema:"warehouse the SQL runs on"`
	SQL         string      `json:"sql,omitempty" jsonschema:"the single SELECT computing the metric"`
	ValueColumn string      `json:"value_column,omitempty" jsonschema:"column of the SQL's result holding the value"`
	TimeColumn  string      `json:"time_column,omitempty" jsonschema:"column of the SQL's result holding the hour bucket start"`
	Grain       string      `json:"grain" jsonschema:"what one point covers: hour, day, or empty for snapshots"`
	Direction   string      `json:"direction" jsonschema:"which departures are problems: both, up or down"`
	SymptomKind SymptomKind `json:"symptom_kind" jsonschema:"kind of symptom an anomaly is reported as"`
	Column      string      `json:"column,omitempty" jsonschema:"column of the asset the metric is about, if one"`
	MovesWith   []string    `json:"moves_with" jsonschema:"metrics that normally move with this one"`
	// PairedWith is filled by listings: the pairing may be declared on
	// either metric, and either way the two are judged together.
	PairedWith []string `json:"paired_with,omitempty" jsonschema:"metrics judged together with this one (moves_with declared on either of the two)"`
	// MovesWithUndefined is filled by listings and definitions: partners
	// named in moves_with that are not defined (yet). The pairing waits
	// for them rather than refusing, so the order two metrics are defined
	// in does not matter.
	MovesWithUndefined []string `json:"moves_with_undefined,omitempty" jsonschema:"metrics named in moves_with that are not defined yet; the pair is judged once they are (define order does not matter)"`
	// Notes say what a definition left waiting (and the closest defined
	// name, in case of a typo).
	Notes     []string  `json:"notes,omitempty" jsonschema:"what the definition left waiting, e.g. a moves_with partner not defined yet"`
	CreatedAt time.Time `json:"created_at" jsonschema:"when first defined"`
	UpdatedAt time.Time `json:"updated_at" jsonschema:"when its definition last changed (defining it again unchanged keeps this)"`
	// DefinedBy is who made the latest definition, when known: a
	// verification after a redefinition says who changed what it judges.
	DefinedBy string `json:"defined_by,omitempty" jsonschema:"who made the latest definition (person and OS login of the client's process), when known"`
}

func (d MetricDefinition) series() baseline.Series {
	return baseline.Series{Asset: d.Asset, Metric: d.Name, Grain: d.Grain}
}

// DefineMetricParams is the input for defining (or redefining) a metric.
type DefineMetricParams struct {
	// By is who defines it, set by the caller from the identity it
	// vouches for (the agent: the OS login running it); never tool input.
	By          string   `json:"-"`
	Name        string   `json:"name" jsonschema:"metric name: lower-case letters, digits, _ . -, e.g. avg_active_member_balance"`
	Description string   `json:"description" jsonschema:"what the number means, for the person reading an alert"`
	Asset       string   `json:"asset" jsonschema:"asset id the metric describes, e.g. bigquery://loyalty.member_balances"`
	Unit        string   `json:"unit,omitempty" jsonschema:"unit, e.g. points, rides, %"`
	Warehouse   string   `json:"warehouse,omitempty" jsonschema:"for a computed metric: the configured warehouse to run sql on"`
	SQL         string   `json:"sql,omitempty" jsonschema:"for a computed metric: one SELECT (or WITH) returning value_column and optionally time_column (hour bucket start); no semicolons except a trailing one. Omit for a metric whose values are pushed"`
	ValueColumn string   `json:"value_column,omitempty" jsonschema:"column of the SQL result holding the number; default value"`
	TimeColumn  string   `json:"time_column,omitempty" jsonschema:"column of the SQL result holding each hour bucket's start; without it the SQL returns one value"`
	Grain       string   `json:"grain,omitempty" jsonschema:"what one point covers: hour (default), day, or snapshot"`
	Direction   string   `json:"direction,omitempty" jsonschema:"which departures are problems: both (default), up or down"`
	SymptomKind string   `json:"symptom_kind,omitempty" jsonschema:"how an anomaly is reported: value (default), volume, nulls, uniqueness, freshness or load_lag"`
	Column      string   `json:"column,omitempty" jsonschema:"column of the asset the metric is about, if one"`
	MovesWith   []string `json:"moves_with,omitempty" jsonschema:"names of defined metrics that normally move with this one (rides and ride_starts); when they move apart a divergence is reported"`
}

var metricNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_.\-]{0,99}$`) })

// DefineMetric records a metric definition, replacing an earlier one of
// the same name. A SQL definition is judged by its warehouse's engine to be
// one read-only query before it is stored, so it is refused before it
// could ever run.
func (s *Service) DefineMetric(ctx context.Context, p DefineMetricParams) (*MetricDefinition, error) {
	name := strings.TrimSpace(p.Name)
	if !metricNameRE().MatchString(name) {
		return nil, invalid("metric name %q: use lower-case letters, digits, _ . or -, starting with a letter, at most 100 characters", p.Name)
	}
	d := MetricDefinition{Name: name, Description: strings.TrimSpace(p.Description), Unit: strings.TrimSpace(p.Unit),
		Column: strings.TrimSpace(p.Column)}
	if d.Description == "" {
		return nil, invalid("description is empty: say what the number means so an alert on it can be read")
	}
	var err error
	if d.Asset, err = changelog.CleanAsset("asset", p.Asset); err != nil {
		return nil, err
	}
	if strings.TrimSpace(p.SQL) == "" {
		if p.Warehouse != "" || p.ValueColumn != "" || p.TimeColumn != "" {
			return nil, invalid("warehouse, value_column and time_column apply only to a metric defined by sql; give sql or leave them out for pushed values")
		}
		d.Source = SourcePushed
	} else {
		d.Source, d.SQL = SourceSQL, strings.TrimSpace(p.SQL)
		if err := validateMetricSQL(d.SQL); err != nil {
			return nil, err
		}
		if d.Warehouse = strings.TrimSpace(p.Warehouse); d.Warehouse == "" {
			return nil, invalid("warehouse is empty: name the configured warehouse the sql runs on")
		}
		d.ValueColumn = orText(strings.TrimSpace(p.ValueColumn), "value")
		if err := warehouse.ValidIdentifier(d.ValueColumn); err != nil {
			return nil, invalid("value_column: %v", err)
		}
		if d.TimeColumn = strings.TrimSpace(p.TimeColumn); d.TimeColumn != "" {
			if err := warehouse.ValidIdentifier(d.TimeColumn); err != nil {
				return nil, invalid("time_column: %v", err)
			}
		}
		// The engine judges the SQL now, so a refused statement is never
		// stored; without warehouses (library use) it is judged at run.
		if s.OpenWarehouse != nil {
			wh, err := s.OpenWarehouse(ctx, d.Warehouse)
			if err != nil {
				return nil, err
			}
			if err := checkMetricSQL(ctx, wh, d.SQL); err != nil {
				return nil, err
			}
		}
	}
	switch g := strings.ToLower(strings.TrimSpace(p.Grain)); g {
	case "", "hour":
		d.Grain = "hour"
	case "day":
		d.Grain = "day"
	case "snapshot":
		d.Grain = ""
	default:
		return nil, invalid("grain %q: use hour, day or snapshot", p.Grain)
	}
	switch dir := baseline.Direction(strings.ToLower(strings.TrimSpace(p.Direction))); dir {
	case "":
		d.Direction = string(baseline.Both)
	case baseline.Both, baseline.Up, baseline.Down:
		d.Direction = string(dir)
	default:
		return nil, invalid("direction %q: use both, up or down", p.Direction)
	}
	d.SymptomKind = SymptomValue
	if p.SymptomKind != "" {
		k, err := parseSymptomKind(p.SymptomKind)
		if err != nil {
			return nil, err
		}
		if k == SymptomDivergence {
			return nil, invalid("symptom_kind divergence is reported for metric pairs; name the partner in moves_with instead")
		}
		d.SymptomKind = k
	}
	now := s.now()
	d.MovesWith = []string{}
	for _, m := range p.MovesWith {
		m = strings.TrimSpace(m)
		if m == name {
			return nil, invalid("moves_with names the metric itself (%s)", m)
		}
		if !metricNameRE().MatchString(m) {
			return nil, invalid("moves_with %q is not a metric name: use lower-case letters, digits, _ . or -, starting with a letter", m)
		}
		if !slices.Contains(d.MovesWith, m) {
			d.MovesWith = append(d.MovesWith, m)
		}
	}
	// A partner not defined yet is kept, not refused: the pair is judged
	// from the moment both exist (divergences looks both up at each run),
	// so "B moves with A" may be said before A is defined and the
	// judgement is the same either way. The answer names what waits.
	err = s.DB.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO incident_metrics (name, description, asset, unit, source, warehouse, sql_text,
			value_column, time_column, grain, direction, symptom_kind, column_name, moves_with, created_ms, updated_ms, defined_by)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET description = excluded.description, asset = excluded.asset, unit = excluded.unit,
			source = excluded.source, warehouse = excluded.warehouse, sql_text = excluded.sql_text,
			value_column = excluded.value_column, time_column = excluded.time_column, grain = excluded.grain,
			direction = excluded.direction, symptom_kind = excluded.symptom_kind, column_name = excluded.column_name,
			moves_with = excluded.moves_with,
			updated_ms = CASE WHEN `+sameDefinition+` THEN incident_metrics.updated_ms ELSE excluded.updated_ms END,
			defined_by = CASE WHEN `+sameDefinition+` THEN incident_metrics.defined_by ELSE excluded.defined_by END`,
			d.Name, d.Description, d.Asset, d.Unit, d.Source, d.Warehouse, d.SQL, d.ValueColumn, d.TimeColumn, d.Grain,
			d.Direction, string(d.SymptomKind), d.Column, mustJSON(d.MovesWith), store.Millis(now), store.Millis(now), strings.TrimSpace(p.By))
		if err != nil {
			return fmt.Errorf("define metric %s: %w", d.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	def, err := loadMetric(ctx, s.DB, name)
	if err != nil {
		return nil, err
	}
	defs := []MetricDefinition{*def}
	if err := s.fillPairs(ctx, defs); err != nil {
		return nil, err
	}
	*def = defs[0]
	if len(def.MovesWithUndefined) > 0 {
		names, err := s.metricNames(ctx)
		if err != nil {
			return nil, err
		}
		for _, m := range def.MovesWithUndefined {
			note := fmt.Sprintf("moves_with %s: not defined yet; %s and %s are judged as a pair once %s is defined (define order does not matter)", m, def.Name, m, m)
			if c := suggest.Closest(m, names, 3); len(c) > 0 {
				note += "; if it is a typo, the closest defined metrics are " + strings.Join(c, ", ")
			}
			def.Notes = append(def.Notes, note)
		}
	}
	return def, nil
}

// sameDefinition holds when a redefinition leaves everything that decides
// a metric's values and their judgement as it was: updated_at (and
// defined_by) then stay those of the definition in force, so a
// verification can tell a metric redefined after an incident's onset from
// one defined again unchanged.
const sameDefinition = `(incident_metrics.asset = excluded.asset AND incident_metrics.source = excluded.source
	AND incident_metrics.warehouse = excluded.warehouse AND incident_metrics.sql_text = excluded.sql_text
	AND incident_metrics.value_column = excluded.value_column AND incident_metrics.time_column = excluded.time_column
	AND incident_metrics.grain = excluded.grain AND incident_metrics.direction = excluded.direction
	AND incident_metrics.symptom_kind = excluded.symptom_kind AND incident_metrics.column_name = excluded.column_name
	AND incident_metrics.moves_with = excluded.moves_with)`

// metricNames lists every defined metric's name.
func (s *Service) metricNames(ctx context.Context) ([]string, error) {
	out, err := store.Strings(ctx, s.DB, "SELECT name FROM incident_metrics ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("read metric names: %w", err)
	}
	return out, nil
}

// GetMetric returns a metric definition.
func (s *Service) GetMetric(ctx context.Context, name string) (*MetricDefinition, error) {
	return loadMetric(ctx, s.DB, name)
}

const metricSelect = `SELECT name, description, asset, unit, source, warehouse, sql_text, value_column, time_column,
	grain, direction, symptom_kind, column_name, moves_with, created_ms, updated_ms, defined_by FROM incident_metrics`

func loadMetric(ctx context.Context, q store.Querier, name string) (*MetricDefinition, error) {
	defs, err := scanMetrics(q.QueryContext(ctx, metricSelect+" WHERE name = ?", strings.TrimSpace(name)))
	if err != nil {
		return nil, err
	}
	if len(defs) == 1 {
		return &defs[0], nil
	}
	all, err := scanMetrics(q.QueryContext(ctx, metricSelect+" ORDER BY name"))
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%w: unknown metric %q: no metrics are defined yet; define one first", store.ErrNotFound, name)
	}
	names := make([]string, len(all))
	for i, d := range all {
		names[i] = d.Name
	}
	return nil, fmt.Errorf("%w: unknown metric %q; closest: %s", store.ErrNotFound, name, strings.Join(suggest.Closest(name, names, 3), ", "))
}

// ListMetrics lists the defined metrics by name.
func (s *Service) ListMetrics(ctx context.Context) ([]MetricDefinition, error) {
	return scanMetrics(s.DB.QueryContext(ctx, metricSelect+" ORDER BY name"))
}

// ListMetricsPage is one page of the metric definitions by name (the page
// after the cursor's name, so a metric defined or removed between pages
// moves no other), and its Info with how many there are in all.
func (s *Service) ListMetricsPage(ctx context.Context, p page.Params) ([]MetricDefinition, page.Info, error) {
	pg, err := p.ResolveKeyset(metricKey, "list_metrics")
	if err != nil {
		return nil, page.Info{}, err
	}
	var total int
	if err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM incident_metrics").Scan(&total); err != nil {
		return nil, page.Info{}, fmt.Errorf("count metrics: %w", err)
	}
	q, args := metricSelect, []any{}
	if pg.After != nil {
		q, args = q+" WHERE name > ?", pg.After
	}
	defs, err := scanMetrics(s.DB.QueryContext(ctx, q+" ORDER BY name LIMIT ?", append(args, pg.Fetch())...))
	if err != nil {
		return nil, page.Info{}, err
	}
	defs, info := page.Cut(pg, defs, total, func(d MetricDefinition) page.Key { return page.Key{d.Name} })
	if err := s.fillPairs(ctx, defs); err != nil {
		return nil, page.Info{}, err
	}
	return defs, info, nil
}

// metricKey pages list_metrics by name, which is unique (and at most 100
// characters, well within a key's bound).
var metricKey = page.Keyset{page.Text}

// fillPairs sets PairedWith: each metric's own defined moves_with and
// every defined metric whose moves_with names it; and MovesWithUndefined:
// the partners it names that are not defined yet.
func (s *Service) fillPairs(ctx context.Context, defs []MetricDefinition) error {
	names, err := s.metricNames(ctx)
	if err != nil {
		return err
	}
	defined := map[string]bool{}
	for _, n := range names {
		defined[n] = true
	}
	rows, err := s.DB.QueryContext(ctx, "SELECT name, moves_with FROM incident_metrics WHERE moves_with <> '[]'")
	if err != nil {
		return fmt.Errorf("read metric pairs: %w", err)
	}
	defer rows.Close()
	namedBy := map[string][]string{}
	for rows.Next() {
		var name, moves string
		var with []string
		if err := rows.Scan(&name, &moves); err != nil {
			return err
		}
		if err := decodeJSON(moves, &with); err != nil {
			return fmt.Errorf("metric %s moves_with: %w", name, err)
		}
		for _, m := range with {
			namedBy[m] = append(namedBy[m], name)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range defs {
		d := &defs[i]
		paired := []string{}
		d.MovesWithUndefined = nil
		for _, m := range d.MovesWith {
			if defined[m] {
				paired = append(paired, m)
			} else {
				d.MovesWithUndefined = append(d.MovesWithUndefined, m)
			}
		}
		for _, m := range namedBy[d.Name] {
			if !slices.Contains(paired, m) {
				paired = append(paired, m)
			}
		}
		sort.Strings(paired)
		d.PairedWith = paired
	}
	return nil
}

func scanMetrics(rows *sql.Rows, err error) ([]MetricDefinition, error) {
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	defer rows.Close()
	out := []MetricDefinition{}
	for rows.Next() {
		var d MetricDefinition
		var kind, moves string
		var created, updated int64
		if err := rows.Scan(&d.Name, &d.Description, &d.Asset, &d.Unit, &d.Source, &d.Warehouse, &d.SQL, &d.ValueColumn,
			&d.TimeColumn, &d.Grain, &d.Direction, &kind, &d.Column, &moves, &created, &updated, &d.DefinedBy); err != nil {
			return nil, err
		}
		d.SymptomKind, d.CreatedAt, d.UpdatedAt = SymptomKind(kind), store.FromMillis(created), store.FromMillis(updated)
		if err := decodeJSON(moves, &d.MovesWith); err != nil {
			return nil, fmt.Errorf("metric %s moves_with: %w", d.Name, err)
		}
		if d.MovesWith == nil {
			d.MovesWith = []string{}
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// MaxMetricPoints is how many points one monitor_metrics call may push: a
// year of hourly values; a longer history is pushed in several calls.
const MaxMetricPoints = 10_000

// MonitorParams is the input of monitor_metrics.
type MonitorParams struct {
	Metric   string        `json:"metric" jsonschema:"name of a defined metric"`
	Points   []MetricPoint `json:"points,omitempty" jsonschema:"for a pushed metric: the values to record, each with its bucket start; at most 10000 (a year of hours) per call"`
	Window   *Window       `json:"window,omitempty" jsonschema:"for a computed metric: the buckets to compute; default the last complete hour"`
	Backfill bool          `json:"backfill,omitempty" jsonschema:"store the points as history without judging them (loading past values)"`
}

// Judged is the verdict on one recorded point.
type Judged struct {
	At      time.Time        `json:"at" jsonschema:"bucket start"`
	Value   float64          `json:"value" jsonschema:"recorded value"`
	Verdict baseline.Verdict `json:"verdict" jsonschema:"normal, anomalous or learning (too little history); empty for backfill"`
	Median  float64          `json:"median" jsonschema:"baseline median"`
	Low     float64          `json:"low" jsonschema:"lowest expected value"`
	High    float64          `json:"high" jsonschema:"highest expected value"`
	Score   float64          `json:"score" jsonschema:"robust z-score"`
	Basis   baseline.Basis   `json:"basis,omitempty" jsonschema:"which history judged the value: hour_of_week, day_type_hour (same hour on weekdays or on weekends), hour_of_day, all or always_zero"`
	Reason  string           `json:"reason" jsonschema:"the verdict in words"`
}

// MonitorResult is the output of monitor_metrics.
type MonitorResult struct {
	Metric    string        `json:"metric" jsonschema:"metric name"`
	Recorded  int           `json:"recorded" jsonschema:"points stored"`
	Points    []Judged      `json:"points" jsonschema:"each point with its verdict, oldest first"`
	Anomalies []Symptom     `json:"anomalies" jsonschema:"symptoms reported: anomalous points and divergences from related metrics"`
	Incidents []IncidentRef `json:"incidents" jsonschema:"incidents opened or joined"`
	Summary   string        `json:"summary" jsonschema:"short text for a person"`
}

// MonitorMetric records or computes a team metric's points, judges each
// against the metric's seasonal baseline (the points being judged never
// train it), checks whether it moved apart from the metrics it normally
// moves with, and opens or joins an incident for what is anomalous.
func (s *Service) MonitorMetric(ctx context.Context, p MonitorParams) (*MonitorResult, error) {
	def, err := loadMetric(ctx, s.DB, p.Metric)
	if err != nil {
		return nil, err
	}
	now := s.now()
	points, err := s.metricPoints(ctx, def, p, now)
	if err != nil {
		return nil, err
	}
	res := &MonitorResult{Metric: def.Name, Points: []Judged{}, Anomalies: []Symptom{}, Incidents: []IncidentRef{}}
	if len(points) == 0 {
		res.Summary = fmt.Sprintf("%s: no values in the window; nothing recorded", def.Name)
		return res, nil
	}
	first := points[0].At
	var anomalies []Symptom
	if !p.Backfill {
		history, err := baseline.Load(ctx, s.DB, def.series(), first.Add(-s.settings().MetricHistory), first)
		if err != nil {
			return nil, err
		}
		opts := baseline.Options{TrainBefore: first, Direction: baseline.Direction(def.Direction)}
		// A metric whose every value is a whole number is a count of
		// events: a quiet hour's Poisson noise is not an anomaly.
		values := make([]float64, len(points))
		for i, pt := range points {
			values[i] = pt.Value
		}
		opts.Counts = len(history) > 0 && baseline.LooksLikeCounts(history, values...)
		for _, pt := range points {
			j := baseline.Score(history, pt.At, pt.Value, opts)
			res.Points = append(res.Points, Judged{At: pt.At, Value: pt.Value, Verdict: j.Verdict, Median: j.Median,
				Low: j.Low, High: j.High, Score: j.Score, Basis: j.Basis, Reason: j.Reason})
			if j.Verdict == baseline.Anomalous {
				anomalies = append(anomalies, Symptom{Kind: def.SymptomKind, Asset: def.Asset, Metric: def.Name, Column: def.Column,
					Observed: pt.Value, Expected: j.Median, ExpectedLow: j.Low, ExpectedHigh: j.High, At: pt.At,
					Source: "monitor_metrics", Detail: anomalyDetail(def, pt.Value, j)})
			}
		}
	} else {
		for _, pt := range points {
			res.Points = append(res.Points, Judged{At: pt.At, Value: pt.Value, Reason: "backfill: stored as history, not judged"})
		}
	}
	samples := make([]baseline.Sample, len(points))
	for i, pt := range points {
		samples[i] = baseline.Sample{Series: def.series(), Point: baseline.Point{At: pt.At, Value: pt.Value}}
	}
	if err := s.DB.InTx(ctx, func(tx *store.Tx) error { return baseline.Record(ctx, tx, now, samples...) }); err != nil {
		return nil, err
	}
	res.Recorded = len(points)
	if !p.Backfill {
		div, err := s.divergences(ctx, def, points)
		if err != nil {
			return nil, err
		}
		anomalies = append(anomalies, div...)
	}
	res.Anomalies = append(res.Anomalies, anomalies...)
	if len(anomalies) > 0 {
		rep, err := s.ReportSymptoms(ctx, ReportParams{Symptoms: anomalies, Actor: "monitor_metrics"})
		if err != nil {
			return nil, err
		}
		res.Incidents = rep.Incidents
	}
	res.Summary = monitorSummary(def, res)
	return res, nil
}

// metricPoints gets the points to record: the pushed values, or the
// computation of the metric's SQL over the window.
func (s *Service) metricPoints(ctx context.Context, def *MetricDefinition, p MonitorParams, now time.Time) ([]MetricPoint, error) {
	var points []MetricPoint
	switch def.Source {
	case SourcePushed:
		if p.Window != nil {
			return nil, invalid("metric %s is pushed: give points, not a window (a window is for metrics computed by SQL)", def.Name)
		}
		if len(p.Points) == 0 {
			return nil, invalid("points is empty: give the values of %s to record, each with its bucket start", def.Name)
		}
		if len(p.Points) > MaxMetricPoints {
			return nil, invalid("points has %d values; push at most %d (a year of hours) per call, the rest in further calls", len(p.Points), MaxMetricPoints)
		}
		points = append(points, p.Points...)
	case SourceSQL:
		if len(p.Points) > 0 {
			return nil, invalid("metric %s is computed by SQL on %s: give a window, not points", def.Name, def.Warehouse)
		}
		w := Window{Start: now.Truncate(time.Hour).Add(-time.Hour), End: now.Truncate(time.Hour)}
		if p.Window != nil {
			w = *p.Window
		}
		if err := w.validate(now); err != nil {
			return nil, err
		}
		if s.OpenWarehouse == nil {
			return nil, fmt.Errorf("metric %s needs warehouse %s, but this agent has no warehouses configured", def.Name, def.Warehouse)
		}
		wh, err := s.OpenWarehouse(ctx, def.Warehouse)
		if err != nil {
			return nil, err
		}
		if points, err = ComputeMetric(ctx, wh, *def, w); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("metric %s has unknown source %q; redefine it", def.Name, def.Source)
	}
	if len(points) > maxComputedRows {
		return nil, invalid("%d points in one call; at most %d", len(points), maxComputedRows)
	}
	seen := map[int64]bool{}
	for i := range points {
		pt := &points[i]
		if pt.At.IsZero() {
			return nil, invalid("points[%d]: at is required (bucket start, RFC 3339)", i)
		}
		if pt.At.After(now.Add(changelog.FutureSkew)) {
			return nil, invalid("points[%d]: at %s is in the future (now %s): record values only for buckets that have happened",
				i, pt.At.UTC().Format(time.RFC3339), now.Format(time.RFC3339))
		}
		if math.IsNaN(pt.Value) || math.IsInf(pt.Value, 0) {
			return nil, invalid("points[%d]: value must be a finite number", i)
		}
		pt.At = pt.At.UTC().Truncate(time.Millisecond)
		if seen[pt.At.UnixMilli()] {
			return nil, invalid("points[%d]: two values for %s; give one value per bucket", i, pt.At.Format(time.RFC3339))
		}
		seen[pt.At.UnixMilli()] = true
	}
	sort.Slice(points, func(i, j int) bool { return points[i].At.Before(points[j].At) })
	return points, nil
}

// anomalyDetail reads "orders 28543 is 27% below the usual Tuesday 11:00
// (median 39100); outside the expected 32314–46022 (...)": the reason
// already states the move against the baseline.
func anomalyDetail(def *MetricDefinition, v float64, j baseline.Judgement) string {
	detail := def.Name + " " + j.Reason
	if def.Unit != "" {
		detail += " (unit: " + def.Unit + ")"
	}
	return detail
}

// divergences scores, for every metric pair that normally moves together
// and has values in the same buckets, the ratio of the two against the
// ratio's own history. "Rides up 23% while ride starts are flat" is a
// ratio 23% off a steady baseline even when neither metric alone is.
func (s *Service) divergences(ctx context.Context, def *MetricDefinition, points []MetricPoint) ([]Symptom, error) {
	all, err := s.ListMetrics(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]MetricDefinition{}
	for _, d := range all {
		byName[d.Name] = d
	}
	// The pair is oriented the way it was declared, so the ratio and its
	// history are the same whichever of the two is recorded first.
	type pair struct{ num, den MetricDefinition }
	var pairs []pair
	for _, m := range def.MovesWith {
		if other, ok := byName[m]; ok {
			// Declared on both: one ratio, in name order, so the pair is
			// judged once whichever of the two is recorded.
			if slices.Contains(other.MovesWith, def.Name) && other.Name < def.Name {
				pairs = append(pairs, pair{other, *def})
				continue
			}
			pairs = append(pairs, pair{*def, other})
		}
	}
	for _, d := range all {
		if d.Name != def.Name && slices.Contains(d.MovesWith, def.Name) && !slices.Contains(def.MovesWith, d.Name) {
			pairs = append(pairs, pair{d, *def})
		}
	}
	first, last := points[0].At, points[len(points)-1].At
	from := first.Add(-s.settings().MetricHistory)
	var out []Symptom
	for _, pr := range pairs {
		num, err := baseline.Load(ctx, s.DB, pr.num.series(), from, last.Add(time.Millisecond))
		if err != nil {
			return nil, err
		}
		den, err := baseline.Load(ctx, s.DB, pr.den.series(), from, last.Add(time.Millisecond))
		if err != nil {
			return nil, err
		}
		denAt := map[int64]float64{}
		for _, p := range den {
			denAt[p.At.UnixMilli()] = p.Value
		}
		var history, judged []pairPoint
		for _, p := range num {
			dv, ok := denAt[p.At.UnixMilli()]
			if !ok || dv == 0 {
				continue
			}
			pp := pairPoint{at: p.At, num: p.Value, den: dv}
			if p.At.Before(first) {
				history = append(history, pp)
			} else {
				judged = append(judged, pp)
			}
		}
		ratios := make([]baseline.Point, len(history))
		for i, h := range history {
			ratios[i] = h.ratio()
		}
		opts := baseline.Options{TrainBefore: first}
		for _, pp := range judged {
			r := pp.ratio()
			// Judged with its counts: 15 against 17 in a quiet hour is
			// chance even where the ratio is usually a steady 1.
			j := baseline.ScoreRatio(ratios, r.At, pp.num, pp.den, opts)
			if j.Verdict != baseline.Anomalous {
				continue
			}
			out = append(out, Symptom{Kind: SymptomDivergence, Asset: pr.num.Asset, Metric: pr.num.Name, RelatedMetric: pr.den.Name,
				Observed: r.Value, Expected: j.Median, ExpectedLow: j.Low, ExpectedHigh: j.High, At: r.At, Source: "monitor_metrics",
				Detail: divergenceDetail(pr.num.Name, pr.den.Name, pp, j, history)})
		}
	}
	return out, nil
}

// pairPoint is one bucket where both metrics of a pair have a value.
type pairPoint struct {
	at       time.Time
	num, den float64
}

func (p pairPoint) ratio() baseline.Point { return baseline.Point{At: p.at, Value: p.num / p.den} }

// divergenceDetail reads "rides up 23% while ride_starts flat (+1%) for the
// same hour of the week; rides/ride_starts is 1.24, expected 0.97–1.03".
func divergenceDetail(num, den string, pp pairPoint, j baseline.Judgement, history []pairPoint) string {
	// Each metric's own move is measured against its median in the same
	// hour of the week when the history has that hour, so "flat" means
	// flat for a Monday 09:00, not flat against the weekly average.
	var sameNum, sameDen, allNum, allDen []float64
	for _, h := range history {
		allNum, allDen = append(allNum, h.num), append(allDen, h.den)
		if h.at.Weekday() == pp.at.Weekday() && h.at.Hour() == pp.at.Hour() {
			sameNum, sameDen = append(sameNum, h.num), append(sameDen, h.den)
		}
	}
	basis := "the same hour of the week"
	if len(sameNum) == 0 {
		sameNum, sameDen, basis = allNum, allDen, "their history"
	}
	return fmt.Sprintf("%s %s while %s %s against %s; %s/%s is %s, expected %s–%s",
		num, describeMove(pp.num, medianOf(sameNum)), den, describeMove(pp.den, medianOf(sameDen)), basis,
		num, den, formatNumber(j.Value), formatNumber(j.Low), formatNumber(j.High))
}

func describeMove(v, base float64) string {
	if base == 0 || math.IsNaN(base) {
		return "at " + formatNumber(v)
	}
	pct := 100 * (v - base) / math.Abs(base)
	switch {
	case math.Abs(pct) < 5:
		return fmt.Sprintf("flat (%+.0f%%)", pct)
	case pct > 0:
		return fmt.Sprintf("up %.0f%%", pct)
	}
	return fmt.Sprintf("down %.0f%%", -pct)
}

func medianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

func monitorSummary(def *MetricDefinition, r *MonitorResult) string {
	counts := map[baseline.Verdict]int{}
	for _, p := range r.Points {
		counts[p.Verdict]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d point(s) recorded", def.Name, r.Recorded)
	if n := counts[baseline.Anomalous]; n > 0 {
		fmt.Fprintf(&b, ", %d anomalous", n)
	}
	if n := counts[baseline.Learning]; n > 0 {
		fmt.Fprintf(&b, ", %d still learning (too little history)", n)
	}
	divs := 0
	for _, a := range r.Anomalies {
		if a.Kind == SymptomDivergence {
			divs++
		}
	}
	if divs > 0 {
		fmt.Fprintf(&b, ", %d divergence(s) from related metrics", divs)
	}
	for _, inc := range r.Incidents {
		verb := "joined"
		if inc.Opened {
			verb = "opened"
		}
		fmt.Fprintf(&b, "; %s %s", verb, inc.ID)
	}
	return b.String() + "."
}

// PointStats condenses the points one monitor_metrics call judged, so the
// tool answer stays small however many points were recorded.
type PointStats struct {
	Count     int       `json:"count" jsonschema:"points recorded"`
	Anomalous int       `json:"anomalous" jsonschema:"points judged anomalous"`
	Learning  int       `json:"learning" jsonschema:"points not judged for lack of history"`
	First     time.Time `json:"first,omitzero" jsonschema:"bucket start of the oldest point"`
	Latest    *Judged   `json:"latest,omitempty" jsonschema:"the newest point with its verdict and baseline"`
	Worst     *Judged   `json:"worst,omitempty" jsonschema:"the point furthest from its baseline (largest absolute robust z-score)"`
}

// SummarizePoints computes the PointStats of judged points (oldest first).
func SummarizePoints(points []Judged) PointStats {
	st := PointStats{Count: len(points)}
	for i := range points {
		p := &points[i]
		switch p.Verdict {
		case baseline.Anomalous:
			st.Anomalous++
		case baseline.Learning:
			st.Learning++
		}
		if p.Verdict != "" && p.Verdict != baseline.Learning && (st.Worst == nil || math.Abs(p.Score) > math.Abs(st.Worst.Score)) {
			st.Worst = p
		}
	}
	if len(points) > 0 {
		st.First = points[0].At
		st.Latest = &points[len(points)-1]
	}
	return st
}
