package incidents

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/warehouse"
)

// Verification windows. A table is re-checked per hour from the midnight
// before its first symptom (a fix replayed "from today's 00:00" rewrites
// those hours); a table with no recorded history is first scanned over
// the weeks before, so the re-check is judged against its own past.
const (
	maxVerifyWindow = 60 * 24 * time.Hour
	historyScan     = 28 * 24 * time.Hour
	metricHistory   = 28 * 24 * time.Hour
)

// verifier re-runs an incident's assertions and the checks in scope.
type verifier struct {
	h        *handlers
	e        *env
	inc      *incidents.Incident
	approved []*approvals.Proposal
	now      time.Time

	results []incidents.CheckResult // everything Verify judges
	asserts []AssertionResult
	scope   []incidents.CheckResult
	notes   []string
	before  []approvals.Check

	names      map[string]bool
	rerun      map[string]bool               // metrics already re-run
	metricAt   []time.Time                   // first buckets of the asserted metrics
	metricDefs []*incidents.MetricDefinition // the asserted metrics
	tableJobs  []*tableJob
}

// tableJob is one table scanned once for every assertion on it.
type tableJob struct {
	warehouse   string
	table       string // as given to warehouse.Resolve
	asset       string // the symptomatic asset
	replacement string // proposal naming the table as replacement, "" for the symptomatic table itself
	asserts     []incidents.Assertion
	whole       bool // snapshot of the whole table, no window
}

// cannotRerun marks an assertion that cannot be re-run: it fails, so the
// incident goes to a person rather than being verified on less evidence.
type cannotRerun struct{ msg string }

func (c *cannotRerun) Error() string { return c.msg }

func notRerun(format string, args ...any) error { return &cannotRerun{fmt.Sprintf(format, args...)} }

func (v *verifier) run(ctx context.Context) error {
	v.names, v.rerun = map[string]bool{}, map[string]bool{}
	asserts, err := v.e.svc.Assertions(ctx, v.inc.ID)
	if err != nil {
		return err
	}
	if err := v.freshen(ctx, asserts); err != nil {
		return err
	}
	var tableAsserts []incidents.Assertion
	for _, a := range asserts {
		v.before = append(v.before, approvals.Check{Name: a.Name, Passed: false, Detail: a.Fired})
		if def := v.metricOf(ctx, a); def != nil {
			if err := v.metricAssertion(ctx, a, def); err != nil {
				return err
			}
			continue
		}
		tableAsserts = append(tableAsserts, a)
	}
	single := distinctTables(tableAsserts) == 1
	for _, a := range tableAsserts {
		job, err := v.jobFor(a, single)
		var cr *cannotRerun
		if errors.As(err, &cr) {
			v.fail(a, "not re-run", cr.msg)
			continue
		}
		if err != nil {
			return err
		}
		job.asserts = append(job.asserts, a)
	}
	for _, job := range v.tableJobs {
		if err := v.checkTable(ctx, job); err != nil {
			return err
		}
	}
	return v.scopeMetrics(ctx)
}

// fail records an assertion that could not pass.
func (v *verifier) fail(a incidents.Assertion, checked, why string) {
	v.asserts = append(v.asserts, AssertionResult{Name: a.Name, Fired: a.Fired, Checked: checked, Passed: false, Observed: why})
	v.results = append(v.results, incidents.CheckResult{Name: a.Name, Passed: false, Detail: why, Asset: a.Asset})
}

// assertion records an assertion's re-run; asset is the symptomatic asset
// it speaks for.
func (v *verifier) assertion(r AssertionResult, asset string) {
	v.asserts = append(v.asserts, r)
	v.results = append(v.results, incidents.CheckResult{Name: r.Name, Passed: r.Passed, Observed: r.Observed, Expected: r.Expected,
		Detail: r.Checked, Asset: asset, NotJudged: r.NotJudged})
}

// scopeResult records a check in scope under a unique name.
func (v *verifier) scopeResult(c incidents.CheckResult) {
	base := c.Name
	for i := 2; v.names[c.Name]; i++ {
		c.Name = fmt.Sprintf("%s #%d", base, i)
	}
	v.names[c.Name] = true
	v.scope = append(v.scope, c)
	v.results = append(v.results, c)
}

// metricOf is the team metric an assertion is about, if it is one.
func (v *verifier) metricOf(ctx context.Context, a incidents.Assertion) *incidents.MetricDefinition {
	if a.Metric == "" {
		return nil
	}
	def, err := v.e.svc.GetMetric(ctx, a.Metric)
	if err != nil || def.Asset != a.Asset {
		return nil
	}
	return def
}

// tableKey is a table's schema.table in lower case, which every name of
// it (with or without the database) ends with.
func tableKey(ref string) string {
	if _, path, ok := lineage.SplitID(ref); ok {
		ref = path
	}
	parts := strings.Split(strings.ToLower(strings.TrimSpace(ref)), ".")
	if len(parts) > 2 {
		parts = parts[len(parts)-2:]
	}
	return strings.Join(parts, ".")
}

func distinctTables(as []incidents.Assertion) int {
	seen := map[string]bool{}
	for _, a := range as {
		seen[tableKey(a.Asset)] = true
	}
	return len(seen)
}

// jobFor finds the table to re-check for an assertion: the replacement an
// approved proposal names, else the symptomatic table itself.
func (v *verifier) jobFor(a incidents.Assertion, single bool) (*tableJob, error) {
	platform, path, ok := lineage.SplitID(a.Asset)
	if !ok || !lineage.IsWarehouse(platform) {
		return nil, notRerun("%s is not a warehouse table, so no quality check can be re-run on it; define a team metric on it (define_metric) to verify it", a.Asset)
	}
	table, whName, by := path, "", ""
	for _, p := range v.approved {
		vt, _ := p.Details[detailVerifyTable].(string)
		if vt == "" {
			continue
		}
		repl, _ := p.Details[detailReplaces].(string)
		if repl != "" && tableKey(repl) != tableKey(a.Asset) {
			continue
		}
		if repl == "" && !single {
			return nil, fmt.Errorf("proposal %s names replacement table %s, but incident %s has symptoms on several tables: its details need %s naming the table it replaces", p.ID, vt, v.inc.ID, detailReplaces)
		}
		if by != "" && !strings.EqualFold(vt, table) {
			return nil, fmt.Errorf("proposals %s and %s name different replacement tables for %s (%s, %s): one approved fix must name the table to verify", by, p.ID, a.Asset, table, vt)
		}
		table, by = vt, p.ID
		whName, _ = p.Details[detailVerifyWarehouse].(string)
	}
	if whName == "" {
		var err error
		if whName, err = v.warehouseFor(platform, path); err != nil {
			return nil, err
		}
	} else if _, err := v.h.d.Config.Warehouse(whName); err != nil {
		return nil, fmt.Errorf("proposal %s details.%s: %w", by, detailVerifyWarehouse, err)
	}
	for _, j := range v.tableJobs {
		if !j.whole && j.warehouse == whName && tableKey(j.table) == tableKey(table) {
			return j, nil
		}
	}
	j := &tableJob{warehouse: whName, table: table, asset: a.Asset, replacement: by}
	v.tableJobs = append(v.tableJobs, j)
	return j, nil
}

// warehouseFor picks the configured warehouse of an asset's platform; with
// several, the one a database.schema.table path names.
func (v *verifier) warehouseFor(platform, path string) (string, error) {
	var cands []string
	for _, w := range v.h.d.Config.Warehouses {
		if lineage.NormalizePlatform(w.Kind) == platform {
			cands = append(cands, w.Name)
		}
	}
	switch len(cands) {
	case 0:
		return "", fmt.Errorf("no %s warehouse is configured to re-check %s://%s: add one under warehouses: in dw.yaml (kind %s)", platform, platform, path, platform)
	case 1:
		return cands[0], nil
	}
	if parts := strings.Split(path, "."); len(parts) == 3 {
		for _, c := range cands {
			if strings.EqualFold(c, parts[0]) {
				return c, nil
			}
		}
	}
	return "", fmt.Errorf("several %s warehouses are configured (%s) and %s://%s names none of them: put the warehouse in the approved proposal's details.%s", platform, strings.Join(cands, ", "), platform, path, detailVerifyWarehouse)
}

func resolveTable(ctx context.Context, wh warehouse.Warehouse, name string) (*warehouse.Table, error) {
	t, err := warehouse.Resolve(ctx, wh, name)
	if err == nil {
		return t, nil
	}
	// An asset id carries the database as its catalog names it, which a
	// warehouse may spell differently (a DuckDB file's name).
	if parts := strings.Split(name, "."); len(parts) == 3 {
		if t, err2 := warehouse.Resolve(ctx, wh, parts[1]+"."+parts[2]); err2 == nil {
			return t, nil
		}
	}
	return nil, err
}

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
	wh, err := v.h.d.Warehouse(ctx, job.warehouse)
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
	exp, _, err := checks.LoadExpectations(ctx, v.e.db, wh.Name(), table.Ref)
	if err != nil {
		return err
	}
	defaults, _ := checks.Specs(table, d, exp)
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
	cenv := checks.Env{DB: v.e.db, Warehouse: wh, Clock: v.h.d.Clock, Agent: Name, Tool: remediateTool.Name}
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
	series, err := baseline.ListSeries(ctx, v.e.db, asset)
	if err != nil || len(series) > 0 {
		return err
	}
	from := start.Add(-historyScan)
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

// metricAssertion re-runs a team metric the incident fired on (and, for a
// divergence, the metric it moved apart from).
func (v *verifier) metricAssertion(ctx context.Context, a incidents.Assertion, def *incidents.MetricDefinition) error {
	var related *metricRun
	if a.RelatedMetric != "" {
		rdef, err := v.e.svc.GetMetric(ctx, a.RelatedMetric)
		if err != nil {
			v.fail(a, "divergence of "+a.Metric+" from "+a.RelatedMetric, err.Error())
			return nil
		}
		if related, err = v.rerunMetric(ctx, rdef, a.Since); err != nil {
			return err
		}
	}
	run, err := v.rerunMetric(ctx, def, a.Since)
	if err != nil {
		return err
	}
	v.metricAt = append(v.metricAt, a.Since)
	v.metricDefs = append(v.metricDefs, def)
	r := AssertionResult{Name: a.Name, Fired: a.Fired, Checked: fmt.Sprintf("metric %s (%s) %s", def.Name, def.Source, run.window)}
	if a.RelatedMetric != "" {
		r.Checked = fmt.Sprintf("metric %s against %s %s", def.Name, a.RelatedMetric, run.window)
	}
	r.Passed, r.Observed, r.Expected = run.verdict()
	// Points still learning and none anomalous: not judged, not failed.
	r.NotJudged = !r.Passed && len(run.points) > 0 && !anyAnomalous(run.points)
	if related != nil && (r.Passed || r.NotJudged) {
		switch {
		case len(related.points) == 0:
			r.Passed, r.NotJudged, r.Observed = false, false, fmt.Sprintf("no values of %s %s to compare with", a.RelatedMetric, related.window)
		case related.diverged(a.Metric, a.RelatedMetric) || run.diverged(a.Metric, a.RelatedMetric):
			r.Passed, r.NotJudged = false, false
			r.Observed += fmt.Sprintf("; still moving apart from %s", a.RelatedMetric)
		}
	}
	v.assertion(r, a.Asset)
	return nil
}

// metricRun is a metric re-run over the buckets since a symptom.
type metricRun struct {
	def       *incidents.MetricDefinition
	window    string
	points    []incidents.Judged
	anomalies []incidents.Symptom
}

func (m *metricRun) diverged(a, b string) bool {
	for _, s := range m.anomalies {
		if s.Kind == incidents.SymptomDivergence && (s.Metric == a && s.RelatedMetric == b || s.Metric == b && s.RelatedMetric == a) {
			return true
		}
	}
	return false
}

// verdict passes when there is at least one point and every one is normal
// against the baseline: a point still learning cannot count as passed.
func (m *metricRun) verdict() (bool, string, string) {
	if len(m.points) == 0 {
		return false, "no values " + m.window, ""
	}
	passed := true
	var obs []string
	for i, p := range m.points {
		if p.Verdict != baseline.Normal {
			passed = false
		}
		if i < 8 {
			obs = append(obs, fmt.Sprintf("%s %s (%s)", p.At.UTC().Format("01-02 15:04"), num(p.Value), orDefault(string(p.Verdict), "not judged")))
		}
	}
	if len(m.points) > 8 {
		obs = append(obs, fmt.Sprintf("… %d points in all", len(m.points)))
	}
	last := m.points[len(m.points)-1]
	unit := ""
	if m.def.Unit != "" {
		unit = " " + m.def.Unit
	}
	return passed, strings.Join(obs, ", "), fmt.Sprintf("within %s–%s%s (baseline median %s)", num(last.Low), num(last.High), unit, num(last.Median))
}

// rerunMetric computes a SQL metric again over the buckets since `since`
// (recording and judging them, so a metric still off reports again), or
// judges the values of a pushed metric recorded since then.
func (v *verifier) rerunMetric(ctx context.Context, def *incidents.MetricDefinition, since time.Time) (*metricRun, error) {
	v.rerun[def.Name] = true
	run := &metricRun{def: def}
	start, end, err := v.metricWindow(def, since)
	if err != nil {
		return nil, err
	}
	if def.Source != incidents.SourceSQL {
		return v.judgeStored(ctx, def, start)
	}
	run.window = fmt.Sprintf("computed on %s for %s to %s", def.Warehouse, start.Format("2006-01-02 15:04"), end.Format("15:04 UTC"))
	res, err := v.e.svc.MonitorMetric(ctx, incidents.MonitorParams{Metric: def.Name, Window: &incidents.Window{Start: start, End: end}})
	if err != nil {
		return nil, fmt.Errorf("re-run metric %s: %w; nothing was changed", def.Name, err)
	}
	run.points, run.anomalies = res.Points, res.Anomalies
	return run, nil
}

// metricWindow is the buckets a metric is re-run over for a symptom since
// `since`; errTooEarly when a computed metric has no complete one yet.
func (v *verifier) metricWindow(def *incidents.MetricDefinition, since time.Time) (start, end time.Time, err error) {
	start = since.UTC()
	switch def.Grain {
	case "hour":
		start = start.Truncate(time.Hour)
	case "day":
		start = dayStart(start)
	}
	end = v.now.Truncate(time.Hour)
	if def.Source == incidents.SourceSQL && def.TimeColumn == "" {
		// Without a time column the SQL gives one value, recorded at the
		// window's start: take the last complete hour, not the symptom's.
		start = end.Add(-time.Hour)
	}
	if def.Source != incidents.SourceSQL {
		return start, end, nil
	}
	if !end.After(start) || def.TimeColumn == "" && start.Before(since.UTC().Truncate(time.Hour)) {
		return start, end, fmt.Errorf("%w: metric %s has no complete bucket since %s; call remediate again once the next hour has ended (nothing was changed)",
			errTooEarly, def.Name, since.UTC().Format("2006-01-02 15:04 UTC"))
	}
	return start, end, nil
}

// freshen recomputes and stores, without judging, every computed metric
// the asserted metrics are judged with: each asserted metric, its related
// metric and every metric it moves with. Only then is any of them judged,
// so a divergence is always the ratio of two fresh series: re-running the
// partner first can no longer judge it against the stale values of the
// metric that moved, and the verdict is the same in every order.
func (v *verifier) freshen(ctx context.Context, asserts []incidents.Assertion) error {
	defs, err := v.e.svc.ListMetrics(ctx)
	if err != nil {
		return err
	}
	byName := map[string]*incidents.MetricDefinition{}
	for i := range defs {
		byName[defs[i].Name] = &defs[i]
	}
	since := map[string]time.Time{}
	add := func(name string, at time.Time) {
		if cur, ok := since[name]; !ok || at.Before(cur) {
			since[name] = at
		}
	}
	for _, a := range asserts {
		def := byName[a.Metric]
		if def == nil || def.Asset != a.Asset {
			continue
		}
		add(def.Name, a.Since)
		if a.RelatedMetric != "" {
			add(a.RelatedMetric, a.Since)
		}
		for _, m := range def.MovesWith {
			add(m, a.Since)
		}
		for _, d := range defs {
			if slices.Contains(d.MovesWith, def.Name) {
				add(d.Name, a.Since)
			}
		}
	}
	names := make([]string, 0, len(since))
	for n := range since {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		def := byName[n]
		if def == nil || def.Source != incidents.SourceSQL {
			continue // pushed values are already stored; unknown names fail where they are judged
		}
		start, end, err := v.metricWindow(def, since[n])
		if errors.Is(err, errTooEarly) {
			continue // the judging pass reports it
		}
		if err != nil {
			return err
		}
		if _, err := v.e.svc.MonitorMetric(ctx, incidents.MonitorParams{Metric: def.Name, Backfill: true,
			Window: &incidents.Window{Start: start, End: end}}); err != nil {
			return fmt.Errorf("recompute metric %s: %w; nothing was changed", def.Name, err)
		}
	}
	return nil
}

// judgeStored judges the values of a pushed metric recorded since start
// against its history before start: the team pushes corrected values for
// the broken buckets, and until it does the old ones still fail.
func (v *verifier) judgeStored(ctx context.Context, def *incidents.MetricDefinition, start time.Time) (*metricRun, error) {
	series := baseline.Series{Asset: def.Asset, Metric: def.Name, Grain: def.Grain}
	run := &metricRun{def: def, window: fmt.Sprintf("as pushed since %s", start.Format("2006-01-02 15:04 UTC"))}
	points, err := baseline.Load(ctx, v.e.db, series, start, v.now.Add(time.Millisecond))
	if err != nil {
		return nil, err
	}
	history, err := baseline.Load(ctx, v.e.db, series, start.Add(-metricHistory), start)
	if err != nil {
		return nil, err
	}
	opts := baseline.Options{TrainBefore: start, Direction: baseline.Direction(def.Direction)}
	for _, p := range points {
		j := baseline.Score(history, p.At, p.Value, opts)
		run.points = append(run.points, incidents.Judged{At: p.At, Value: p.Value, Verdict: j.Verdict, Median: j.Median,
			Low: j.Low, High: j.High, Score: j.Score, Reason: j.Reason})
	}
	return run, nil
}

// scopeMetrics re-runs the team metrics defined on the incident's assets
// and on the approved proposals' targets and scope, and checks the whole
// tables the asserted metrics describe.
func (v *verifier) scopeMetrics(ctx context.Context) error {
	var scope []string
	scope = append(scope, v.inc.Assets...)
	for _, p := range v.approved {
		scope = append(scope, p.Targets...)
		scope = append(scope, p.Scope...)
	}
	// Every name of every asset in scope, so a metric defined on an alias
	// is found too.
	names, err := v.e.graph.Upstream(ctx, scope, 0)
	if err != nil {
		return err
	}
	defs, err := v.e.svc.ListMetrics(ctx)
	if err != nil {
		return err
	}
	since := v.inc.Onset
	for _, at := range v.metricAt {
		if at.Before(since) {
			since = at
		}
	}
	for i := range defs {
		def := &defs[i]
		if _, in := names[def.Asset]; !in {
			continue
		}
		if v.rerun[def.Name] {
			continue
		}
		run, err := v.rerunMetric(ctx, def, since)
		if errors.Is(err, errTooEarly) {
			v.notes = append(v.notes, fmt.Sprintf("metric %s not judged: no complete bucket since the onset yet", def.Name))
			continue
		}
		if err != nil {
			return err
		}
		passed, obs, expd := run.verdict()
		name := "metric " + def.Name + " on " + def.Asset
		switch {
		case len(run.points) == 0:
			v.notes = append(v.notes, fmt.Sprintf("%s not judged: no values %s", name, run.window))
		case !passed && !anyAnomalous(run.points):
			v.notes = append(v.notes, fmt.Sprintf("%s not judged (too little history): %s", name, obs))
		default:
			v.scopeResult(incidents.CheckResult{Name: name, Passed: passed, Observed: obs, Expected: expd, Detail: run.window, Asset: def.Asset})
		}
	}
	// The table an asserted metric describes is checked whole, as a
	// quality check of its current state. It is context for the metric,
	// so a table that cannot be read is noted rather than fatal.
	for _, job := range v.metricTables() {
		if err := v.checkTable(ctx, job); err != nil {
			v.notes = append(v.notes, fmt.Sprintf("%s not checked as a whole table: %v", job.asset, err))
		}
	}
	return nil
}

// metricTables are the warehouse tables the asserted metrics describe,
// checked whole (a metric's table holds the current state, not a series).
func (v *verifier) metricTables() []*tableJob {
	var out []*tableJob
	seen := map[string]bool{}
	for _, def := range v.metricDefs {
		platform, path, ok := lineage.SplitID(def.Asset)
		if !ok || !lineage.IsWarehouse(platform) || seen[tableKey(def.Asset)] {
			continue
		}
		seen[tableKey(def.Asset)] = true
		wh := def.Warehouse
		if wc, err := v.h.d.Config.Warehouse(wh); err != nil || lineage.NormalizePlatform(wc.Kind) != platform {
			if wh, err = v.warehouseFor(platform, path); err != nil {
				v.notes = append(v.notes, fmt.Sprintf("%s not checked: %v", def.Asset, err))
				continue
			}
		}
		out = append(out, &tableJob{warehouse: wh, table: path, asset: def.Asset, whole: true})
	}
	slices.SortFunc(out, func(a, b *tableJob) int { return strings.Compare(a.asset, b.asset) })
	return out
}

func anyAnomalous(ps []incidents.Judged) bool {
	for _, p := range ps {
		if p.Verdict == baseline.Anomalous {
			return true
		}
	}
	return false
}

// num prints a number without needless decimals.
func num(v float64) string {
	s := fmt.Sprintf("%.4g", v)
	if strings.ContainsAny(s, "e") {
		return fmt.Sprintf("%.0f", v)
	}
	return s
}
