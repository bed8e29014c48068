package checks

import (
	"context"
	"crypto/sha256"

	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/suggest"
	"github.com/dataworkers/dw/internal/warehouse"
)

// Env is what the quality tools need: the store, one warehouse, a clock,
// and who is asking (for the warehouse's cost labels).
type Env struct {
	DB        *store.DB
	Warehouse warehouse.Warehouse
	Clock     clock.Clock
	Agent     string
	Tool      string
	// Timeout overrides the warehouse's statement timeout for scans.
	Timeout time.Duration
	// Progress, when set, hears how far a backfill has come: done of
	// total chunks, after each one is recorded.
	Progress func(done, total int, msg string)
}

func (e Env) validate() error {
	if e.DB == nil || e.Warehouse == nil {
		return errors.New("checks: Env needs a store and a warehouse")
	}
	return nil
}

func (e Env) now() time.Time {
	if e.Clock == nil {
		return clock.System{}.Now()
	}
	return e.Clock.Now().UTC()
}

// CheckRequest is run_quality_check's input.
type CheckRequest struct {
	Table      string `json:"table" jsonschema:"table to check: table, schema.table or database.schema.table"`
	Period     string `json:"period,omitempty" jsonschema:"today, yesterday, last_24h or last_7d (UTC); or give since and until"`
	Since      string `json:"since,omitempty" jsonschema:"window start, RFC 3339 or YYYY-MM-DD"`
	Until      string `json:"until,omitempty" jsonschema:"window end (excluded), RFC 3339 or YYYY-MM-DD; default now"`
	Bucket     string `json:"bucket,omitempty" jsonschema:"hour or day: one value per bucket of the time column"`
	TimeColumn string `json:"time_column,omitempty" jsonschema:"time column for the window and buckets; default the table's event time"`
	Checks     []Spec `json:"checks,omitempty" jsonschema:"checks to run; default the table's expectations, or a profile when it has none"`
}

// RunCheck is run_quality_check: resolve the table, choose its checks
// (requested, else declared expectations, else a profile), scan it once,
// judge every metric and store the results.
func RunCheck(ctx context.Context, env Env, req CheckRequest) (*Report, error) {
	if err := env.validate(); err != nil {
		return nil, err
	}
	wh, d := env.Warehouse, env.Warehouse.Dialect()
	table, err := warehouse.Resolve(ctx, wh, req.Table)
	if err != nil {
		return nil, err
	}
	exp, _, err := LoadExpectations(ctx, env.DB, wh.Name(), table.Ref)
	if err != nil {
		return nil, err
	}
	// The declared (else inferred) key and time columns choose the
	// default checks and the window's time column.
	specs, inf := Specs(table, d, exp)
	if len(req.Checks) > 0 {
		specs, inf.Notes = req.Checks, nil
	}
	now := env.now()
	w, err := requestWindow(req, table, d, inf, now)
	if err != nil {
		return nil, err
	}
	if specs, err = gateTextProfiles(ctx, env.DB, AssetID(d, table.Ref), specs, now); err != nil {
		return nil, err
	}
	specs, notes, err := resolveParents(ctx, wh, table, specs)
	if err != nil {
		return nil, err
	}
	inf.Notes = append(inf.Notes, notes...)
	if full, cws := backfillChunks(table, d, w); cws != nil {
		rep, err := runBackfill(ctx, env, table, specs, full, cws, now)
		if err != nil {
			return nil, err
		}
		rep.Warehouse, rep.Inferred = wh.Name(), append(inf.Notes, rep.Inferred...)
		return rep, nil
	}
	plan, err := Plan(table, d, specs, w)
	if err != nil {
		return nil, err
	}
	scan, err := Run(ctx, wh, plan, RunOptions{Agent: env.Agent, Tool: env.Tool, Clock: fixedClock{now}, Timeout: env.Timeout})
	if err != nil {
		return nil, err
	}
	rep, err := Evaluate(ctx, env.DB, scan)
	if err != nil {
		return nil, err
	}
	rep.Warehouse, rep.Inferred = wh.Name(), inf.Notes
	return rep, nil
}

// resolveParents finds the referenced table of every relationships check
// in the warehouse's catalog, so Plan can validate and quote it. A dbt
// test that no longer fits the warehouse (a table or column renamed since
// the manifest was built) is left out with a note rather than failing the
// table's other checks; a team's or a request's is an error.
func resolveParents(ctx context.Context, wh warehouse.Warehouse, table *warehouse.Table, specs []Spec) ([]Spec, []string, error) {
	d := wh.Dialect()
	var out []Spec
	var notes []string
	for _, s := range specs {
		if s.Kind == KindRelationship {
			parent, err := warehouse.Resolve(ctx, wh, s.To)
			if err != nil {
				if s.source != SourceDBT {
					return nil, nil, fmt.Errorf("relationships check on %s: %w", s.Column, err)
				}
				notes = append(notes, fmt.Sprintf("dbt relationships test %s -> %s.%s not checked: %v", s.Column, s.To, s.Field, err))
				continue
			}
			s.parent = parent
		}
		if s.source == SourceDBT {
			if _, err := Plan(table, d, []Spec{s}, Window{}); err != nil {
				notes = append(notes, fmt.Sprintf("dbt test not checked (%s): %v", s.Label(), err))
				continue
			}
		}
		out = append(out, s)
	}
	return out, notes, nil
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// requestWindow turns a request's period, since/until and bucket into a
// Window over the chosen time column.
func requestWindow(req CheckRequest, t *warehouse.Table, d warehouse.Dialect, inf Inference, now time.Time) (Window, error) {
	grain, err := ParseGrain(req.Bucket)
	if err != nil {
		return Window{}, err
	}
	period := strings.ToLower(strings.TrimSpace(req.Period))
	if period != "" && (req.Since != "" || req.Until != "") {
		return Window{}, errors.New("give a period or since/until, not both")
	}
	if period == "" && req.Since == "" && req.Until == "" {
		switch grain {
		case Whole:
			if req.TimeColumn != "" {
				return Window{}, errors.New("time_column sets the column of a window: give a period or since/until too")
			}
			return Window{}, nil
		case Hour:
			period = "last_24h"
		case Day:
			period = "last_7d"
		}
	}
	var w Window
	midnight := now.Truncate(24 * time.Hour)
	switch period {
	case "":
		if req.Since == "" {
			return Window{}, errors.New("until needs since: give the window's start too")
		}
		if w.Start, err = parseWhen(req.Since, "since"); err != nil {
			return Window{}, err
		}
		w.End = now
		if req.Until != "" {
			if w.End, err = parseWhen(req.Until, "until"); err != nil {
				return Window{}, err
			}
		}
	case "today":
		w.Start, w.End = midnight, midnight.Add(24*time.Hour)
	case "yesterday":
		w.Start, w.End = midnight.Add(-24*time.Hour), midnight
	case "last_24h":
		w.Start, w.End = now.Add(-24*time.Hour), now
	case "last_7d":
		w.Start, w.End = now.Add(-7*24*time.Hour), now
	default:
		return Window{}, fmt.Errorf("unknown period %q: use today, yesterday, last_24h or last_7d, or give since and until", req.Period)
	}
	w.Grain = grain
	w.Column = req.TimeColumn
	if w.Column == "" {
		w.Column = inf.EventTime
	}
	if w.Column == "" {
		w.Column = inf.IngestTime
	}
	if w.Column == "" {
		return Window{}, fmt.Errorf("no time column known for %s: pass time_column (time columns: %s)", t.Ref, strings.Join(timeColumns(t, d), ", "))
	}
	return w, nil
}

func parseWhen(s, what string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s %q is not a time: use RFC 3339 (2025-03-11T14:00:00Z) or a date (2025-03-11)", what, s)
}

// ExpectationsRequest is set_quality_expectations' input: the table and
// its whole set of expectations, which replaces any earlier set.
type ExpectationsRequest struct {
	Table string `json:"table" jsonschema:"table the expectations are for"`
	Expectations
}

// ExpectationsResult confirms what was stored.
type ExpectationsResult struct {
	Warehouse    string       `json:"warehouse" jsonschema:"warehouse name"`
	Table        string       `json:"table" jsonschema:"table in catalog spelling"`
	Expectations Expectations `json:"expectations" jsonschema:"the stored expectations, in catalog spelling"`
	// Checks lists the checks run_quality_check will now run.
	Checks   []string `json:"checks" jsonschema:"checks run_quality_check will run for this table"`
	Inferred []string `json:"inferred,omitempty" jsonschema:"what is still inferred because it was not declared"`
	// FromDBT lists the checks whose expectation comes from dbt's tests.
	FromDBT   []string  `json:"from_dbt,omitempty" jsonschema:"checks whose expectation comes from an imported dbt manifest's tests (kept; these expectations win where both speak of a column)"`
	UpdatedAt time.Time `json:"updated_at" jsonschema:"when the expectations were stored"`
}

// SetExpectations is set_quality_expectations: validate against the
// catalog, then store. Nothing is stored when any part is invalid.
func SetExpectations(ctx context.Context, env Env, req ExpectationsRequest) (*ExpectationsResult, error) {
	if err := env.validate(); err != nil {
		return nil, err
	}
	wh, d := env.Warehouse, env.Warehouse.Dialect()
	table, err := warehouse.Resolve(ctx, wh, req.Table)
	if err != nil {
		return nil, err
	}
	norm, err := req.Expectations.Normalize(table, d)
	if err != nil {
		return nil, err
	}
	for i, r := range norm.Relationships {
		parent, err := warehouse.Resolve(ctx, wh, r.To)
		if err != nil {
			return nil, fmt.Errorf("relationships on %s: %w", r.Column, err)
		}
		f, err := parent.Column(d, r.Field)
		if err != nil {
			return nil, fmt.Errorf("relationships on %s: field of %s: %w", r.Column, parent.Ref, err)
		}
		norm.Relationships[i].To, norm.Relationships[i].Field = parent.Ref.String(), f.Name
		s := Spec{Kind: KindRelationship, Column: r.Column, To: r.To, Field: r.Field, parent: parent}
		if _, err := Plan(table, d, []Spec{s}, Window{}); err != nil {
			return nil, err
		}
	}
	now := env.now()
	if err := SaveExpectations(ctx, env.DB, wh.Name(), table.Ref, norm, now); err != nil {
		return nil, err
	}
	// The checks listed are those run_quality_check will run: these
	// merged with any an imported dbt manifest's tests declare.
	merged, _, err := LoadExpectations(ctx, env.DB, wh.Name(), table.Ref)
	if err != nil {
		return nil, err
	}
	specs, inf := Specs(table, d, merged)
	res := &ExpectationsResult{
		Warehouse: wh.Name(), Table: table.Ref.String(), Expectations: norm,
		Checks: labels(specs), Inferred: inf.Notes, UpdatedAt: now,
	}
	for _, s := range specs {
		if s.source == SourceDBT {
			res.FromDBT = append(res.FromDBT, s.Label())
		}
	}
	return res, nil
}

// HistoryRequest is get_quality_history's input.
type HistoryRequest struct {
	Table  string `json:"table" jsonschema:"table the metric belongs to"`
	Metric string `json:"metric" jsonschema:"metric name, e.g. row_count, null_rate, duplicate_rate, staleness_seconds"`
	// Dimension selects the column, key or predicate for metrics that
	// have one.
	Dimension string `json:"dimension,omitempty" jsonschema:"column, key (a,b) or predicate name the metric is about"`
	Grain     string `json:"grain,omitempty" jsonschema:"hour, day, a window such as window:24h, or empty for the series with most points"`
	Days      int    `json:"days,omitempty" jsonschema:"how many days of points to look at; default 14, at most 366"`
	// Pages run backwards in time: the first holds the newest points.
	Limit  int    `json:"limit,omitempty" jsonschema:"points per page, newest first: 1 to 500 (default 200)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor from the previous answer, for the page of earlier points; omit for the newest"`
}

// HistoryResult is a metric's recent points and the baseline its latest
// point was judged against.
type HistoryResult struct {
	Series baseline.Series  `json:"series" jsonschema:"the series returned"`
	Points []baseline.Point `json:"points" jsonschema:"this page of points (the newest not yet shown), oldest first"`
	// Total and NextCursor page the points.
	Total      int    `json:"total" jsonschema:"points in the days looked at, across pages"`
	NextCursor string `json:"next_cursor,omitempty" jsonschema:"pass as cursor for the page of earlier points; absent when none are left"`
	// Latest is the newest point judged against the points before it.
	Latest *baseline.Judgement `json:"latest,omitempty" jsonschema:"the newest point judged against the points before it"`
	// Others lists the asset's other series, to browse.
	Others []string `json:"others,omitempty" jsonschema:"other series recorded for this table (the first 50)"`
	// OthersTotal counts them all.
	OthersTotal int `json:"others_total,omitempty" jsonschema:"other series recorded for this table in all"`
}

// Bounds on get_quality_history's answer.
const (
	historyDefaultPoints = 200
	maxOtherSeries       = 50
)

// MaxHistoryDays is the longest history get_quality_history reads: a
// year (a page of points at a time).
const MaxHistoryDays = 366

// History is get_quality_history.
func History(ctx context.Context, env Env, req HistoryRequest) (*HistoryResult, error) {
	if err := env.validate(); err != nil {
		return nil, err
	}
	days := req.Days
	switch {
	case days == 0:
		days = 14
	case days < 0 || days > MaxHistoryDays:
		return nil, fmt.Errorf("days %d: give 1 to %d", req.Days, MaxHistoryDays)
	}
	pg, err := page.Params{Limit: req.Limit, Cursor: req.Cursor}.ResolveKeysetWith(historyDefaultPoints, page.MaxLimit, historyKey,
		"get_quality_history", req.Table, req.Metric, req.Dimension, req.Grain, strconv.Itoa(days))
	if err != nil {
		return nil, err
	}
	wh, d := env.Warehouse, env.Warehouse.Dialect()
	table, err := warehouse.Resolve(ctx, wh, req.Table)
	if err != nil {
		return nil, err
	}
	asset := AssetID(d, table.Ref)
	all, err := baseline.ListSeries(ctx, env.DB, asset)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("no history for %s yet: run run_quality_check on it first", table.Ref)
	}
	var matches []baseline.Series
	names := map[string]bool{}
	for _, s := range all {
		names[s.Metric] = true
		if s.Metric != req.Metric {
			continue
		}
		if req.Dimension != "" && !d.SameIdent(s.Dimension, req.Dimension) && !strings.EqualFold(s.Dimension, req.Dimension) {
			continue
		}
		if req.Grain != "" && s.Grain != req.Grain {
			continue
		}
		matches = append(matches, s)
	}
	if len(matches) == 0 {
		if !names[req.Metric] {
			return nil, fmt.Errorf("no metric %q recorded for %s; closest: %s", req.Metric, table.Ref, strings.Join(suggest.Closest(req.Metric, keys(names), 5), ", "))
		}
		return nil, fmt.Errorf("no %s series for %s matches dimension %q and grain %q; recorded: %s",
			req.Metric, table.Ref, req.Dimension, req.Grain, strings.Join(seriesNames(all, req.Metric), "; "))
	}
	now := env.now()
	from := now.Add(-time.Duration(days) * 24 * time.Hour)
	var best baseline.Series
	var points []baseline.Point
	dims := map[string]bool{}
	for _, s := range matches {
		dims[s.Dimension] = true
	}
	if len(dims) > 1 {
		return nil, fmt.Errorf("%s is recorded for several dimensions of %s: name one with dimension (%s)", req.Metric, table.Ref, strings.Join(keys(dims), ", "))
	}
	for _, s := range matches {
		ps, err := baseline.Load(ctx, env.DB, s, from, now.Add(time.Millisecond))
		if err != nil {
			return nil, err
		}
		// A later page stays on the series its first page showed, even
		// if another grain has gained more points since.
		if pg.After != nil && grainKey(s.Grain) == pg.After.Int(0) {
			best, points = s, ps
			break
		}
		if points == nil || len(ps) > len(points) {
			best, points = s, ps
		}
	}
	res := &HistoryResult{Series: best, Points: points}
	if points == nil {
		res.Points = []baseline.Point{}
	}
	if n := len(points); n > 0 {
		last := points[n-1]
		// Judge against the full stored history, not just the days shown.
		hist, err := baseline.Load(ctx, env.DB, best, last.At.Add(-historySpan), last.At)
		if err != nil {
			return nil, err
		}
		j := baseline.Score(hist, last.At, last.Value, baselineOptions(best.Metric, last.At))
		res.Latest = &j
	}
	for _, s := range all {
		if s != best {
			res.OthersTotal++
			if len(res.Others) < maxOtherSeries {
				res.Others = append(res.Others, s.String())
			}
		}
	}
	// Page from the newest point back, each page the points before the
	// previous page's oldest: points recorded since the first page (the
	// series grows at its newest end) shift nothing.
	n := len(res.Points)
	hi := n
	if pg.After != nil {
		hi = sort.Search(n, func(i int) bool { return store.Millis(res.Points[i].At) >= pg.After.Int(1) })
	}
	lo := max(0, hi-pg.Limit)
	res.Points, res.Total = res.Points[lo:hi:hi], n
	if lo > 0 {
		res.NextCursor = pg.NextAfter(page.Key{grainKey(best.Grain), store.Millis(res.Points[0].At)}, true)
	}
	return res, nil
}

// historyKey is a position in get_quality_history: the series (its
// grain, by grainKey) and the time of the oldest point shown (a series
// holds one point a time).
var historyKey = page.Keyset{page.Int, page.Int}

// grainKey names a grain in a cursor in a fixed 8 bytes, however long the
// grain's text.
func grainKey(grain string) int64 {
	sum := sha256.Sum256([]byte(grain))
	var k int64
	for _, b := range sum[:8] {
		k = k<<8 | int64(b)
	}
	return k
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func seriesNames(all []baseline.Series, metric string) []string {
	var out []string
	for _, s := range all {
		if s.Metric == metric {
			out = append(out, fmt.Sprintf("dimension %q grain %q", s.Dimension, s.Grain))
		}
	}
	return out
}
