package remediate

import (
	"context"
	"fmt"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/warehouse"
)

// stayEmpty judges a table declared stay_empty (a dead-letter or
// quarantine table) from the fix: "always" must hold no rows now;
// "new_rows" must have had none arrive since the fix, counted by its
// ingest (else event) time column, or, without one, by comparing its row
// count with one taken at or before the fix (else the first one after it).
// With nothing to compare, it is not verifiable yet, saying what is
// missing. The result is required: never excused, and it speaks for the
// symptomatic table, as do its volume assertions, which it re-runs.
func (v *verifier) stayEmpty(ctx context.Context, cenv checks.Env, table *warehouse.Table, exp *checks.Expectations, job *tableJob,
	asset string, asserts []incidents.Assertion) error {
	since := v.fixedAt
	at := since.UTC().Format("2006-01-02 15:04 UTC")
	res := incidents.CheckResult{Asset: job.asset, Required: true}
	spec := checks.Spec{Kind: checks.KindRowCount, StayEmpty: exp.StayEmpty}
	run := func(req checks.CheckRequest) (*checks.MetricResult, error) {
		req.Table, req.Checks = table.Ref.String(), []checks.Spec{spec}
		rep, err := checks.RunCheck(ctx, cenv, req)
		if err != nil {
			return nil, fmt.Errorf("re-check %s as a table that should %s: %w; nothing was changed", table.Ref, stayText(exp.StayEmpty), err)
		}
		for i := range rep.Results {
			if rep.Results[i].Metric == checks.MetricRowCount {
				return &rep.Results[i], nil
			}
		}
		return nil, fmt.Errorf("re-check %s: the scan returned no row count; nothing was changed", table.Ref)
	}
	col := exp.IngestTime
	if col == "" {
		col = exp.EventTime
	}
	switch {
	case exp.StayEmpty == checks.StayAlways:
		res.Name = fmt.Sprintf("row_count on %s (should stay empty)", asset)
		res.Expected = "no rows (the table should stay empty)"
		r, err := run(checks.CheckRequest{})
		if err != nil {
			return err
		}
		res.Passed, res.Observed = r.Status == checks.Pass, r.Message
	case col != "":
		res.Name = fmt.Sprintf("row_count on %s since the fix (%s)", asset, at)
		res.Expected = fmt.Sprintf("no rows arrived since the fix at %s (the table should stop growing)", at)
		r, err := run(checks.CheckRequest{Since: since.Format(time.RFC3339), Until: v.now.Format(time.RFC3339), TimeColumn: col})
		if err != nil {
			return err
		}
		res.Passed = r.Status == checks.Pass
		res.Observed = fmt.Sprintf("%s rows with %s at or after %s", num(observed(r)), col, at)
	default:
		res.Name = fmt.Sprintf("row_count on %s since the fix (%s)", asset, at)
		res.Expected = fmt.Sprintf("no more rows than at the fix (%s): the table should stop growing", at)
		r, err := run(checks.CheckRequest{})
		if err != nil {
			return err
		}
		n := observed(r)
		ref, what, err := v.countAtFix(ctx, asset, since)
		if err != nil {
			return err
		}
		switch {
		case what == "":
			res.NotJudged = true
			res.Observed = fmt.Sprintf("not verifiable yet: %s should stop growing, but it has no time column to count the rows that arrived since the fix (%s), and no row count was taken at or since the fix before this one (%s rows now): declare its ingest_time with set_quality_expectations (dw-quality), or call remediate again later to compare with this count",
				asset, at, num(n))
		case n > ref:
			res.Observed = fmt.Sprintf("%s rows, %s more than at %s: it is still growing", num(n), num(n-ref), what)
		default:
			res.Passed = true
			res.Observed = fmt.Sprintf("%s rows, not grown since %s", num(n), what)
		}
	}
	v.scopeResult(res)
	for _, a := range asserts {
		v.assertion(AssertionResult{Name: a.Name, Fired: a.Fired, Checked: res.Name, Passed: res.Passed, Observed: res.Observed,
			Expected: res.Expected, NotJudged: res.NotJudged}, a.Asset)
	}
	return nil
}

// countAtFix is the table's whole-table row count at the fix: the last one
// taken at or before it, else the first one taken after it (before now);
// what says which, "" when there is none.
func (v *verifier) countAtFix(ctx context.Context, asset string, fix time.Time) (float64, string, error) {
	series := baseline.Series{Asset: asset, Metric: checks.MetricRowCount}
	before, err := baseline.Load(ctx, v.env.DB, series, fix.Add(-maxVerifyWindow), fix.Add(time.Millisecond))
	if err != nil {
		return 0, "", err
	}
	if len(before) > 0 {
		p := before[len(before)-1]
		return p.Value, fmt.Sprintf("the check of %s, before the fix", p.At.UTC().Format("2006-01-02 15:04 UTC")), nil
	}
	after, err := baseline.Load(ctx, v.env.DB, series, fix, v.now)
	if err != nil || len(after) == 0 {
		return 0, "", err
	}
	return after[0].Value, fmt.Sprintf("the first check after the fix (%s)", after[0].At.UTC().Format("2006-01-02 15:04 UTC")), nil
}

func observed(r *checks.MetricResult) float64 {
	if r.Observed == nil {
		return 0
	}
	return *r.Observed
}

func stayText(mode string) string {
	if mode == checks.StayAlways {
		return "stay empty"
	}
	return "stop growing"
}
