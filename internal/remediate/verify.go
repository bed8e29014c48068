package remediate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
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
	env      *Env
	inc      *incidents.Incident
	approved []*approvals.Proposal
	repl     []Replacement // approved replacements, read instead of the assets they replace
	now      time.Time
	fixedAt  time.Time // when the fix took effect

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
	readOn     map[string][]string // replacement proposal -> metrics re-run on its table
	*namer                         // asset ids compared and placed by the identity rule
	oneTable   bool                // the incident's symptoms are on one asset
	used       []MetricUsed        // the metric definitions computed or judged with
}

// tableJob is one table scanned once for every assertion on it.
type tableJob struct {
	warehouse   string
	table       string // as given to warehouse.Resolve
	key         string // the table's identity, for one job per table
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
	n, err := v.distinct(ctx, v.inc.Assets)
	if err != nil {
		return err
	}
	v.oneTable = n == 1
	asserts, err := v.env.Incidents.Assertions(ctx, v.inc.ID)
	if err != nil {
		return err
	}
	if err := v.freshen(ctx, asserts); err != nil {
		return err
	}
	var tableAsserts []incidents.Assertion
	for _, a := range asserts {
		v.before = append(v.before, approvals.Check{Name: a.Name, Passed: false, Detail: a.Fired})
		def, err := v.metricOf(ctx, a)
		if err != nil {
			return err
		}
		if def != nil {
			if err := v.metricAssertion(ctx, a, def); err != nil {
				return err
			}
			continue
		}
		tableAsserts = append(tableAsserts, a)
	}
	var tableAssets []string
	for _, a := range tableAsserts {
		tableAssets = append(tableAssets, a.Asset)
	}
	n, err = v.distinct(ctx, tableAssets)
	if err != nil {
		return err
	}
	single := n == 1
	for _, a := range tableAsserts {
		job, err := v.jobFor(ctx, a, single)
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
func (v *verifier) metricOf(ctx context.Context, a incidents.Assertion) (*incidents.MetricDefinition, error) {
	if a.Metric == "" {
		return nil, nil
	}
	def, err := v.env.Incidents.GetMetric(ctx, a.Metric)
	if err != nil {
		return nil, nil
	}
	if same, err := v.same(ctx, def.Asset, a.Asset); err != nil || !same {
		return nil, err
	}
	return def, nil
}

// inScope reports whether an asset is among the names in scope.
func (v *verifier) inScope(ctx context.Context, names map[string]incidents.Hop, asset string) (bool, error) {
	if _, ok := names[asset]; ok {
		return true, nil
	}
	for n := range names {
		if same, err := v.same(ctx, n, asset); err != nil || same {
			return same, err
		}
	}
	return false, nil
}

// jobFor finds the table to re-check for an assertion: the replacement an
// approved proposal names, else the symptomatic table itself.
// An asset recorded under a model or source that builds a table (an
// incident opened before the table was its id, a metric's dbt id) is
// re-checked on that table, as the context graph names it.
func (v *verifier) jobFor(ctx context.Context, a incidents.Assertion, single bool) (*tableJob, error) {
	platform, path, ok, err := v.table(ctx, a.Asset)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, notRerun("%s is not a warehouse table and the context graph knows no single table it builds, so no quality check can be re-run on it; record its table as an alias (record_lineage) or define a team metric on it (define_metric) to verify it", a.Asset)
	}
	table, whName, by := path, "", ""
	r, err := v.replacementFor(ctx, a.Asset, single)
	if err != nil {
		return nil, err
	}
	if r != nil {
		table, whName, by = r.table, r.Warehouse, r.Proposal
		if r.platform != "" {
			platform = r.platform
		}
	}
	if whName == "" {
		if whName, err = v.warehouseFor(platform, table); err != nil {
			return nil, err
		}
	} else if _, err := v.env.Config.Warehouse(whName); err != nil {
		return nil, fmt.Errorf("proposal %s details.%s: %w", by, DetailVerifyWarehouse, err)
	}
	key, err := v.key(ctx, platform+"://"+table)
	if err != nil {
		return nil, err
	}
	for _, j := range v.tableJobs {
		if !j.whole && j.warehouse == whName && j.key == key {
			return j, nil
		}
	}
	j := &tableJob{warehouse: whName, table: table, key: key, asset: a.Asset, replacement: by}
	v.tableJobs = append(v.tableJobs, j)
	return j, nil
}

// warehouseFor picks the configured warehouse of an asset's platform; with
// several, the one a database.schema.table path names.
func (v *verifier) warehouseFor(platform, path string) (string, error) {
	var cands []string
	for _, w := range v.env.Config.Warehouses {
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
	return "", fmt.Errorf("several %s warehouses are configured (%s) and %s://%s names none of them: put the warehouse in the approved proposal's details.%s", platform, strings.Join(cands, ", "), platform, path, DetailVerifyWarehouse)
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

// num prints a number without needless decimals.
func num(v float64) string {
	s := fmt.Sprintf("%.4g", v)
	if strings.ContainsAny(s, "e") {
		return fmt.Sprintf("%.0f", v)
	}
	return s
}
