package remediate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
)

// metricAssertion re-runs a team metric the incident fired on (and, for a
// divergence, the metric it moved apart from).
func (v *verifier) metricAssertion(ctx context.Context, a incidents.Assertion, def *incidents.MetricDefinition) error {
	var related *metricRun
	if a.RelatedMetric != "" {
		rdef, err := v.env.Incidents.GetMetric(ctx, a.RelatedMetric)
		if err != nil {
			v.fail(a, "divergence of "+a.Metric+" from "+a.RelatedMetric, err.Error())
			return nil
		}
		if related, err = v.rerunMetric(ctx, rdef, a.Since); err != nil {
			return v.unverifiable(a, "metric "+a.RelatedMetric, err)
		}
	}
	run, err := v.rerunMetric(ctx, def, a.Since)
	if err != nil {
		return v.unverifiable(a, "metric "+def.Name, err)
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

// unverifiable records an assertion whose metric cannot be re-run yet as
// neither passed nor failed; any other error is returned.
func (v *verifier) unverifiable(a incidents.Assertion, checked string, err error) error {
	var nv *notVerifiable
	if !errors.As(err, &nv) {
		return err
	}
	v.assertion(AssertionResult{Name: a.Name, Fired: a.Fired, Checked: checked, Observed: nv.msg, NotJudged: true}, a.Asset)
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
	v.involve(def)
	run := &metricRun{def: def}
	start, end, err := v.metricWindow(def, since)
	if err != nil {
		return nil, err
	}
	if def.Source != incidents.SourceSQL {
		return v.judgeStored(ctx, def, start)
	}
	if r, err := v.replacementFor(ctx, def.Asset, v.oneTable); err != nil {
		return nil, err
	} else if r != nil {
		return v.rerunOnReplacement(ctx, def, r, start, end)
	}
	run.window = fmt.Sprintf("computed on %s for %s to %s", def.Warehouse, start.Format("2006-01-02 15:04"), end.Format("15:04 UTC"))
	res, err := v.env.Incidents.MonitorMetric(ctx, incidents.MonitorParams{Metric: def.Name, Window: &incidents.Window{Start: start, End: end}})
	if err != nil {
		return nil, fmt.Errorf("re-run metric %s: %w; nothing was changed", def.Name, err)
	}
	run.points, run.anomalies = res.Points, res.Anomalies
	return run, nil
}

// metricWindow is the buckets a metric is re-run over for a symptom since
// `since`; ErrTooEarly when a computed metric has no complete one yet.
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
			ErrTooEarly, def.Name, since.UTC().Format("2006-01-02 15:04 UTC"))
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
	defs, err := v.env.Incidents.ListMetrics(ctx)
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
		if def == nil {
			continue
		}
		if same, err := v.same(ctx, def.Asset, a.Asset); err != nil {
			return err
		} else if !same {
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
		if def == nil {
			continue // unknown names fail where they are judged
		}
		v.involve(def) // judged with, as a partner, even where not re-run itself
		if def.Source != incidents.SourceSQL {
			continue // pushed values are already stored
		}
		if r, _ := v.replacementFor(ctx, def.Asset, v.oneTable); r != nil {
			continue // judged on the replacement, never stored as the replaced table's values
		}
		start, end, err := v.metricWindow(def, since[n])
		if errors.Is(err, ErrTooEarly) {
			continue // the judging pass reports it
		}
		if err != nil {
			return err
		}
		if _, err := v.env.Incidents.MonitorMetric(ctx, incidents.MonitorParams{Metric: def.Name, Backfill: true,
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
	points, err := baseline.Load(ctx, v.env.DB, series, start, v.now.Add(time.Millisecond))
	if err != nil {
		return nil, err
	}
	history, err := baseline.Load(ctx, v.env.DB, series, start.Add(-metricHistory), start)
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
	names := map[string]incidents.Hop{}
	for _, a := range scope {
		names[a] = incidents.Hop{}
	}
	if g := v.env.Incidents.Graph; g != nil {
		var err error
		if names, err = g.Upstream(ctx, scope, 0); err != nil {
			return err
		}
	}
	defs, err := v.env.Incidents.ListMetrics(ctx)
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
		if in, err := v.inScope(ctx, names, def.Asset); err != nil {
			return err
		} else if !in {
			continue
		}
		if v.rerun[def.Name] {
			continue
		}
		run, err := v.rerunMetric(ctx, def, since)
		if errors.Is(err, ErrTooEarly) {
			v.notes = append(v.notes, fmt.Sprintf("metric %s not judged: no complete bucket since the onset yet", def.Name))
			continue
		}
		var nv *notVerifiable
		if errors.As(err, &nv) {
			// It would read the replaced table: the incident cannot be
			// verified on it until the metric reads the replacement.
			v.scopeResult(incidents.CheckResult{Name: "metric " + def.Name + " on " + def.Asset, Observed: nv.msg, NotJudged: true, Asset: def.Asset})
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
	jobs, err := v.metricTables(ctx)
	if err != nil {
		return err
	}
	for _, job := range jobs {
		if err := v.checkTable(ctx, job); err != nil {
			v.notes = append(v.notes, fmt.Sprintf("%s not checked as a whole table: %v", job.asset, err))
		}
	}
	return nil
}

// metricTables are the warehouse tables the asserted metrics describe,
// checked whole (a metric's table holds the current state, not a series).
// A metric defined on a model's dbt id describes the table it builds.
func (v *verifier) metricTables(ctx context.Context) ([]*tableJob, error) {
	var out []*tableJob
	seen := map[string]bool{}
	for _, def := range v.metricDefs {
		platform, path, ok, err := v.table(ctx, def.Asset)
		if err != nil {
			return nil, err
		}
		key := platform + "://" + path
		if !ok || seen[key] {
			continue
		}
		seen[key] = true
		wh := def.Warehouse
		if wc, err := v.env.Config.Warehouse(wh); err != nil || lineage.NormalizePlatform(wc.Kind) != platform {
			if wh, err = v.warehouseFor(platform, path); err != nil {
				v.notes = append(v.notes, fmt.Sprintf("%s not checked: %v", def.Asset, err))
				continue
			}
		}
		out = append(out, &tableJob{warehouse: wh, table: path, key: key, asset: def.Asset, whole: true})
	}
	slices.SortFunc(out, func(a, b *tableJob) int { return strings.Compare(a.asset, b.asset) })
	return out, nil
}

func anyAnomalous(ps []incidents.Judged) bool {
	for _, p := range ps {
		if p.Verdict == baseline.Anomalous {
			return true
		}
	}
	return false
}
