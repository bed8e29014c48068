package remediate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/warehouse"
)

// aspec is an assertion with the check that re-runs it.
type aspec struct {
	a       incidents.Assertion
	spec    *checks.Spec // nil: match a default check's result by metric
	label   string
	checked string
}

// checkTable scans one table once: the assertions on it with their own
// thresholds, and the table's other checks (its expectations, else a
// profile) as the checks in scope.
func (v *verifier) checkTable(ctx context.Context, job *tableJob) error {
	wh, err := v.env.Warehouse(ctx, job.warehouse)
	if err != nil {
		return err
	}
	table, err := resolveTable(ctx, wh, job.table)
	if err != nil {
		if job.replacement != "" {
			return fmt.Errorf("the replacement table %s named by approved proposal %s is not in warehouse %s (%w): carry out the approved step first; nothing was changed", job.table, job.replacement, wh.Name(), err)
		}
		return fmt.Errorf("re-check %s: %w; nothing was changed", job.asset, err)
	}
	d := wh.Dialect()
	exp, _, err := checks.LoadExpectations(ctx, v.env.DB, wh.Name(), table.Ref)
	if err != nil {
		return err
	}
	defaults, _ := checks.Specs(table, d, exp)
	// A table that should stay empty or stop growing is judged from the
	// fix (stayempty.go), not per hour since the onset: its hours before
	// the fix stay as bad as they were, and say nothing about the fix.
	stay := exp != nil && exp.StayEmpty != "" && !job.whole
	if stay {
		defaults = slices.DeleteFunc(slices.Clone(defaults), func(s checks.Spec) bool { return s.Kind == checks.KindRowCount })
	}
	var stayAsserts []incidents.Assertion
	specs := slices.Clone(defaults)
	where := fmt.Sprintf("%s in warehouse %s", table.Ref, wh.Name())
	if job.replacement != "" {
		where += fmt.Sprintf(" (the replacement approved in %s)", job.replacement)
	}
	start := v.now
	var planned []aspec
	for _, a := range job.asserts {
		if s := dayStart(a.Since); s.Before(start) {
			start = s
		}
		if stay && a.Kind == incidents.SymptomVolume {
			stayAsserts = append(stayAsserts, a)
			continue
		}
		spec, err := v.assertionSpec(a, table, d, defaults)
		var cr *cannotRerun
		if errors.As(err, &cr) {
			v.fail(a, "not re-run on "+where, cr.msg)
			continue
		}
		if err != nil {
			return err
		}
		as := aspec{a: a, spec: spec}
		if spec != nil {
			as.label = spec.Label()
			replaced := false
			for i := range specs {
				if specs[i].Label() == as.label {
					specs[i], replaced = *spec, true
				}
			}
			if !replaced {
				specs = append(specs, *spec)
			}
		}
		planned = append(planned, as)
	}
	if start.Before(v.now.Add(-maxVerifyWindow)) {
		start = dayStart(v.now.Add(-maxVerifyWindow))
	}
	cenv := checks.Env{DB: v.env.DB, Warehouse: wh, Clock: v.env.Clock, Agent: v.env.Agent, Tool: v.env.Tool}
	asset := checks.AssetID(d, table.Ref)
	req := checks.CheckRequest{Table: table.Ref.String(), Checks: specs}
	window := "the whole table"
	if !job.whole {
		req.Since, req.Bucket = start.Format(time.RFC3339), "hour"
		window = "per hour since " + start.Format("2006-01-02 15:04 UTC")
		if err := v.historyFirst(ctx, cenv, asset, table, defaults, start); err != nil {
			return err
		}
	}
	rep, err := checks.RunCheck(ctx, cenv, req)
	if err != nil {
		return fmt.Errorf("re-check %s: %w; nothing was changed", where, err)
	}
	used := map[int]bool{}
	for _, as := range planned {
		var cands []int
		for i, r := range rep.Results {
			switch {
			case as.spec != nil && r.Check == as.label:
				cands = append(cands, i)
			case as.spec == nil && r.Metric == as.a.Metric && (as.a.Column == "" || d.SameIdent(r.Dimension, as.a.Column)):
				cands = append(cands, i)
			}
		}
		if as.a.Metric != "" {
			var same []int
			for _, i := range cands {
				if rep.Results[i].Metric == as.a.Metric {
					same = append(same, i)
				}
			}
			if len(same) > 0 {
				cands = same
			}
		}
		label := as.label
		if label == "" {
			label = as.a.Metric
		}
		r := AssertionResult{Name: as.a.Name, Fired: as.a.Fired, Checked: fmt.Sprintf("%s on %s, %s", label, where, window)}
		if len(cands) == 0 {
			r.Observed = fmt.Sprintf("the re-check produced no %s result", label)
			v.assertion(r, as.a.Asset)
			continue
		}
		r.Passed = true
		failed, learning := false, false
		var obs, expd []string
		for _, i := range cands {
			res := rep.Results[i]
			used[i] = true
			obs = append(obs, res.Message)
			if res.Expectation != "" {
				expd = append(expd, res.Expectation)
			} else if res.Expected != nil {
				expd = append(expd, fmt.Sprintf("%s within %s–%s", res.Metric, num(res.Expected.Low), num(res.Expected.High)))
			}
			switch res.Status {
			case checks.Pass:
			case checks.Learning:
				learning = true
				obs[len(obs)-1] += " (not judged: too little history, so it cannot count as passed)"
			default:
				failed = true
			}
		}
		r.Passed, r.NotJudged = !failed && !learning, !failed && learning
		r.Observed, r.Expected = strings.Join(obs, "; "), strings.Join(expd, "; ")
		v.assertion(r, as.a.Asset)
	}
	onset := v.inc.Onset.UTC().Truncate(time.Hour)
	suffix := ""
	if job.whole {
		suffix = " (whole table)"
	}
	// A declared key is always re-checked and never excused: a replay
	// that wrote duplicates into hours before the onset, or copies of a
	// row into different hours, still fails it.
	keyLabel := ""
	if exp != nil && len(exp.Key) > 0 {
		keyLabel = (&checks.Spec{Kind: checks.KindUniqueness, Columns: exp.Key}).Label()
	}
	var learning []string
	for i, res := range rep.Results {
		if used[i] {
			continue
		}
		label := res.Check
		if res.Metric != "" && !strings.HasPrefix(res.Check, res.Metric) {
			label += " " + res.Metric
		}
		name := fmt.Sprintf("%s on %s%s", label, asset, suffix)
		if keyLabel != "" && res.Check == keyLabel {
			v.scopeResult(incidents.CheckResult{Name: name, Passed: res.Status == checks.Pass, Observed: res.Message,
				Expected: "no repeated key (declared)", Detail: fmt.Sprintf("declared key %s", res.Status), Asset: job.asset, Required: true})
			continue
		}
		switch res.Status {
		case checks.Pass:
			v.scopeResult(incidents.CheckResult{Name: name, Passed: true, Observed: res.Message, Expected: expectedText(res), Asset: job.asset})
		case checks.Learning:
			learning = append(learning, label)
		default:
			if before := failingBefore(res, onset); before != "" {
				v.notes = append(v.notes, fmt.Sprintf("%s was %s only in buckets before the incident's onset (%s), so not part of this verification: %s",
					name, res.Status, before, res.Message))
				continue
			}
			v.scopeResult(incidents.CheckResult{Name: name, Passed: false, Observed: res.Message, Expected: expectedText(res),
				Detail: fmt.Sprintf("%s %s", res.Problem, res.Status), Asset: job.asset})
		}
	}
	if len(learning) > 0 {
		v.notes = append(v.notes, fmt.Sprintf("%d check(s) on %s%s not judged: too little history yet (%s)", len(learning), asset, suffix, strings.Join(learning, ", ")))
	}
	if stay {
		if err := v.stayEmpty(ctx, cenv, table, exp, job, asset, stayAsserts); err != nil {
			return err
		}
	}
	if keyLabel != "" && !job.whole {
		return v.keyOverWindow(ctx, cenv, table, exp.Key, job, asset, start)
	}
	return nil
}

// keyOverWindow re-checks a declared key over the whole verification
// window in one bucket: per-hour buckets cannot see two copies of a key
// written into different hours, which is what an at-least-once replay
// does.
func (v *verifier) keyOverWindow(ctx context.Context, cenv checks.Env, table *warehouse.Table, key []string, job *tableJob, asset string, start time.Time) error {
	spec := checks.Spec{Kind: checks.KindUniqueness, Columns: key}
	rep, err := checks.RunCheck(ctx, cenv, checks.CheckRequest{Table: table.Ref.String(), Since: start.Format(time.RFC3339), Checks: []checks.Spec{spec}})
	if err != nil {
		return fmt.Errorf("re-check the declared key of %s: %w; nothing was changed", table.Ref, err)
	}
	name := fmt.Sprintf("%s on %s since %s (one window)", spec.Label(), asset, start.Format("2006-01-02 15:04 UTC"))
	for _, res := range rep.Results {
		if res.Check != spec.Label() {
			continue
		}
		v.scopeResult(incidents.CheckResult{Name: name, Passed: res.Status == checks.Pass, Observed: res.Message,
			Expected: "no repeated key (declared)", Detail: fmt.Sprintf("declared key %s", res.Status), Asset: job.asset, Required: true})
		return nil
	}
	v.scopeResult(incidents.CheckResult{Name: name, Passed: false, Observed: "the re-check produced no result for the declared key",
		Expected: "no repeated key (declared)", Asset: job.asset, Required: true})
	return nil
}

// historyFirst scans the weeks before the verification window when the
// table has no recorded history (a replacement table is new to the store),
// so its re-check is judged against its own earlier rows.
func (v *verifier) historyFirst(ctx context.Context, cenv checks.Env, asset string, table *warehouse.Table, specs []checks.Spec, start time.Time) error {
	series, err := baseline.ListSeries(ctx, v.env.DB, asset)
	if err != nil || len(series) > 0 {
		return err
	}
	from := start.Add(-historyScan)
	// Hours before a table's first row are not hours of zero rows: a table
	// created this morning has no past to judge against, and scanning its
	// empty weeks would make every hour of today look anomalous.
	before, err := checks.RunCheck(ctx, cenv, checks.CheckRequest{Table: table.Ref.String(), Since: from.Format(time.RFC3339),
		Until: start.Format(time.RFC3339), Checks: []checks.Spec{{Kind: checks.KindRowCount}}})
	if err != nil {
		return fmt.Errorf("scan the history of %s: %w; nothing was changed", table.Ref, err)
	}
	for _, r := range before.Results {
		if r.Metric == checks.MetricRowCount && r.Observed != nil && *r.Observed == 0 {
			v.notes = append(v.notes, fmt.Sprintf("%s had no recorded history and no rows from %s to %s, so it has no past to judge against yet",
				asset, from.Format("2006-01-02"), start.Format("2006-01-02 15:04 UTC")))
			return nil
		}
	}
	if _, err := checks.RunCheck(ctx, cenv, checks.CheckRequest{Table: table.Ref.String(), Since: from.Format(time.RFC3339),
		Until: start.Format(time.RFC3339), Bucket: "hour", Checks: specs}); err != nil {
		return fmt.Errorf("scan the history of %s: %w; nothing was changed", table.Ref, err)
	}
	v.notes = append(v.notes, fmt.Sprintf("%s had no recorded history: its hours from %s to %s were scanned first as its baseline",
		asset, from.Format("2006-01-02"), start.Format("2006-01-02 15:04 UTC")))
	return nil
}

// failingBefore lists the failing buckets when all of them start before
// the onset; "" when any is at or after it, or none is listed.
func failingBefore(r checks.MetricResult, onset time.Time) string {
	var hours []string
	for _, b := range r.Buckets {
		if b.Status != checks.Fail && b.Status != checks.Anomalous {
			continue
		}
		if !b.Start.Before(onset) {
			return ""
		}
		hours = append(hours, b.Start.UTC().Format("15:04"))
	}
	return strings.Join(hours, ", ")
}

func expectedText(r checks.MetricResult) string {
	if r.Expectation != "" {
		return r.Expectation
	}
	if r.Expected != nil {
		return fmt.Sprintf("within %s–%s", num(r.Expected.Low), num(r.Expected.High))
	}
	return ""
}

// assertionSpec is the check that re-runs an assertion, with the
// symptom's own threshold where it has one.
func (v *verifier) assertionSpec(a incidents.Assertion, t *warehouse.Table, d warehouse.Dialect, defaults []checks.Spec) (*checks.Spec, error) {
	column := func() (string, error) {
		if a.Column == "" {
			return "", notRerun("the %s symptom names no column, so it cannot be re-checked", a.Kind)
		}
		c, err := t.Column(d, a.Column)
		if err != nil {
			return "", notRerun("%s has no column %s to re-check: %v", t.Ref, a.Column, err)
		}
		return c.Name, nil
	}
	byKind := func(k checks.Kind) *checks.Spec {
		for _, s := range defaults {
			if s.Kind == k {
				s := s
				return &s
			}
		}
		return nil
	}
	switch a.Kind {
	case incidents.SymptomNulls:
		col, err := column()
		if err != nil {
			return nil, err
		}
		limit := v.nullLimit(a)
		return &checks.Spec{Kind: checks.KindNullRate, Column: col, MaxRate: &limit}, nil
	case incidents.SymptomVolume:
		if s := byKind(checks.KindRowCount); s != nil {
			return s, nil
		}
		return &checks.Spec{Kind: checks.KindRowCount}, nil
	case incidents.SymptomUniqueness:
		if a.Column != "" {
			col, err := column()
			if err != nil {
				return nil, err
			}
			return &checks.Spec{Kind: checks.KindUniqueness, Columns: []string{col}}, nil
		}
		if s := byKind(checks.KindUniqueness); s != nil {
			return s, nil
		}
		return nil, notRerun("no key is known for %s: declare it with set_quality_expectations (dw-quality) so uniqueness can be re-checked", t.Ref)
	case incidents.SymptomFreshness:
		if a.Metric == checks.MetricLagAvg || a.Metric == checks.MetricLagP95 {
			// Recorded as freshness before load lag p95 had its own
			// kind: it is the lag check's, not the staleness'.
			if s := byKind(checks.KindLoadLag); s != nil {
				return s, nil
			}
		}
		if a.Column != "" {
			col, err := column()
			if err != nil {
				return nil, err
			}
			return &checks.Spec{Kind: checks.KindFreshness, Column: col}, nil
		}
		if s := byKind(checks.KindFreshness); s != nil {
			return s, nil
		}
		return nil, notRerun("no time column is known for %s: declare it with set_quality_expectations so freshness can be re-checked", t.Ref)
	case incidents.SymptomLoadLag:
		if s := byKind(checks.KindLoadLag); s != nil {
			return s, nil
		}
		return nil, notRerun("no event and ingest time columns are known for %s: declare them with set_quality_expectations so load lag can be re-checked", t.Ref)
	}
	if a.Metric == "" {
		return nil, notRerun("a %s symptom with no metric cannot be re-checked on %s; define a team metric for it", a.Kind, t.Ref)
	}
	return nil, nil // matched by metric name among the table's declared checks
}

// nullLimit is the highest null rate the symptoms' baseline allowed.
func (v *verifier) nullLimit(a incidents.Assertion) float64 {
	limit := 0.0
	for _, s := range v.inc.Symptoms {
		if s.Kind == a.Kind && s.Asset == a.Asset && s.Column == a.Column && s.Metric == a.Metric {
			limit = math.Max(limit, s.ExpectedHigh)
		}
	}
	return limit
}
