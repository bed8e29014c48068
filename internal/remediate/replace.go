package remediate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/warehouse"
)

// The details keys of an approved proposal verification reads.
// DetailReplacement is the sealed "replaces A with B" a proposal's
// replaces field records ({"asset": A, "with": B}, canonical asset ids).
// The older free-form keys are still read: verify_table names the table
// (schema.table) verification reads instead of the symptomatic one,
// replaces the symptomatic table it stands for when the incident has
// several, verify_warehouse the warehouse to read it in.
const (
	DetailReplacement     = "replacement"
	DetailVerifyTable     = "verify_table"
	DetailReplaces        = "replaces"
	DetailVerifyWarehouse = "verify_warehouse"
)

// Replacement is an approved "replaces A with B": verification reads B
// for A's checks and metrics.
type Replacement struct {
	Proposal   string `json:"proposal" jsonschema:"the approved proposal that names the replacement"`
	Replaces   string `json:"replaces" jsonschema:"the asset replaced (A)"`
	With       string `json:"with" jsonschema:"the asset read instead (B)"`
	ApprovedBy string `json:"approved_by" jsonschema:"who approved it, and through which channel"`
	Warehouse  string `json:"warehouse,omitempty" jsonschema:"the warehouse B is read in, when the proposal names it"`

	table    string // B as warehouse.Resolve takes it
	platform string // B's platform, "" when only a table name was given
}

// ReplacementSpec is a proposal's "replaces A with B".
type ReplacementSpec struct {
	Asset string `json:"asset" jsonschema:"the symptomatic asset replaced, e.g. duckdb://usage.usage_hourly"`
	With  string `json:"with" jsonschema:"the asset that replaces it, e.g. duckdb://usage.usage_hourly_v2: a table in the warehouse catalog or the context graph"`
}

// CheckReplacement validates a proposal's replacement before it is sent:
// both are canonical asset ids of warehouse tables on one platform, A is
// one of the incident's symptomatic assets, B is not A, and B exists in a
// configured warehouse's catalog or in the context graph. The answer is the
// canonical pair, for the details the approval seals.
func CheckReplacement(ctx context.Context, env *Env, inc *incidents.Incident, r ReplacementSpec, graph interface {
	Resolve(ctx context.Context, ref string) (string, error)
}) (ReplacementSpec, error) {
	a, err := lineage.CanonicalID(r.Asset)
	if err != nil {
		return r, fmt.Errorf("replaces.asset: %w", err)
	}
	b, err := lineage.CanonicalID(r.With)
	if err != nil {
		return r, fmt.Errorf("replaces.with: %w", err)
	}
	n := newNamer(env)
	pa, _, _ := lineage.SplitID(a)
	pb, pathB, _ := lineage.SplitID(b)
	same, err := n.same(ctx, a, b)
	if err != nil {
		return r, err
	}
	switch {
	case !lineage.IsWarehouse(pa) || !lineage.IsWarehouse(pb):
		return r, fmt.Errorf("replaces: %s and %s must both be warehouse tables (verification re-runs quality checks and metric SQL on the replacement)", a, b)
	case pa != pb:
		return r, fmt.Errorf("replaces: %s is on %s but %s is on %s: a replacement is read by the same metric SQL, so it must be on the same platform", a, pa, b, pb)
	case same:
		return r, fmt.Errorf("replaces: %s and %s name the same table; with must name the table that replaces it", a, b)
	}
	symptomatic := false
	for _, s := range inc.Assets {
		if same, err := n.same(ctx, s, a); err != nil {
			return r, err
		} else if same {
			symptomatic, a = true, s
		}
	}
	if !symptomatic {
		return r, fmt.Errorf("replaces.asset %s is not one of incident %s's symptomatic assets (%s)", a, inc.ID, strings.Join(inc.Assets, ", "))
	}
	if graph != nil {
		if _, err := graph.Resolve(ctx, b); err == nil {
			return ReplacementSpec{Asset: a, With: b}, nil
		}
	}
	var tried []string
	for _, w := range env.Config.Warehouses {
		if lineage.NormalizePlatform(w.Kind) != pb {
			continue
		}
		wh, err := env.Warehouse(ctx, w.Name)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s (%v)", w.Name, err))
			continue
		}
		if _, err := resolveTable(ctx, wh, pathB); err == nil {
			return ReplacementSpec{Asset: a, With: b}, nil
		}
		tried = append(tried, w.Name)
	}
	return r, fmt.Errorf("replaces.with %s is neither in the context graph nor in the catalog of a configured %s warehouse (looked in: %s): create the replacement first, or record it in lineage, then propose",
		b, pb, orDefault(strings.Join(tried, ", "), "none configured"))
}

// approvedReplacements reads the replacements the approved proposals name.
// Each must come from a proposal whose approval can be proven (its seal
// and a sealed decision hold): what verification reads is decided by
// people, not by a row anyone can edit.
func approvedReplacements(ctx context.Context, env *Env, n *namer, approved []*approvals.Proposal) ([]Replacement, error) {
	var out []Replacement
	for _, p := range approved {
		r, ok, err := replacementOf(p)
		if err != nil {
			return nil, fmt.Errorf("approved proposal %s: %w; nothing was changed", p.ID, err)
		}
		if !ok {
			continue
		}
		if err := env.Approvals.ProvenApproval(ctx, p); err != nil {
			return nil, fmt.Errorf("the replacement %s named by %s is not read: %w; nothing was changed", r.With, p.ID, err)
		}
		for _, o := range out {
			if o.Replaces == "" {
				continue
			}
			sameA, err := n.same(ctx, o.Replaces, r.Replaces)
			if err != nil {
				return nil, err
			}
			sameB, err := n.same(ctx, o.With, r.With)
			if err != nil {
				return nil, err
			}
			if sameA && !sameB {
				return nil, fmt.Errorf("proposals %s and %s name different replacement tables for %s (%s, %s): one approved fix must name the table to verify",
					o.Proposal, p.ID, r.Replaces, o.With, r.With)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// replacementOf reads a proposal's replacement: the sealed replaces field,
// else the older details keys.
func replacementOf(p *approvals.Proposal) (Replacement, bool, error) {
	r := Replacement{Proposal: p.ID, ApprovedBy: approvedBy(p)}
	if raw, ok := p.Details[DetailReplacement]; ok {
		m, _ := raw.(map[string]any)
		a, _ := m["asset"].(string)
		b, _ := m["with"].(string)
		ca, errA := lineage.CanonicalID(a)
		cb, errB := lineage.CanonicalID(b)
		if m == nil || errors.Join(errA, errB) != nil {
			return r, false, fmt.Errorf("details.%s is not {asset, with} of two asset ids: %v", DetailReplacement, errors.Join(errA, errB))
		}
		r.Replaces, r.With = ca, cb
		r.platform, r.table, _ = lineage.SplitID(cb)
		return r, true, nil
	}
	vt, _ := p.Details[DetailVerifyTable].(string)
	if vt == "" {
		return r, false, nil
	}
	if _, err := warehouse.ParseTableName(vt); err != nil {
		return r, false, fmt.Errorf("details.%s: %w", DetailVerifyTable, err)
	}
	r.Replaces, _ = p.Details[DetailReplaces].(string)
	r.With, r.table = vt, vt
	r.Warehouse, _ = p.Details[DetailVerifyWarehouse].(string)
	return r, true, nil
}

// replacementFor is the approved replacement of a symptomatic asset, nil
// when there is none. A replacement that names no asset stands for the
// incident's one table; with several it is ambiguous.
func (v *verifier) replacementFor(ctx context.Context, asset string, single bool) (*Replacement, error) {
	for i := range v.repl {
		r := &v.repl[i]
		if r.Replaces == "" {
			if !single {
				return nil, fmt.Errorf("proposal %s names replacement table %s, but incident %s has symptoms on several tables: its details need %s naming the table it replaces",
					r.Proposal, r.With, v.inc.ID, DetailReplaces)
			}
			return r, nil
		}
		if same, err := v.same(ctx, r.Replaces, asset); err != nil || same {
			return r, err
		}
	}
	return nil, nil
}

// replacementFacts are the approved replacements the verification read B
// for, for the receipt: an auditor sees which table the checks judged,
// which metrics were re-run on it, and who approved the substitution.
func (v *verifier) replacementFacts() []map[string]any {
	var out []map[string]any
	for _, r := range v.repl {
		replaces := r.Replaces
		if replaces == "" && len(v.inc.Assets) == 1 {
			replaces = v.inc.Assets[0]
		}
		f := map[string]any{"proposal": r.Proposal, "replaces": replaces, "with": r.With, "approved_by": r.ApprovedBy,
			"read": "the re-checks of " + replaces + " read " + r.With}
		if ms := v.readOn[r.Proposal]; len(ms) > 0 {
			f["metrics"] = ms
		}
		out = append(out, f)
	}
	return out
}

// notVerifiable marks a re-run that cannot be done yet for a reason a
// person can remove (define the metric on the replacement): neither a pass
// nor a failure, so the incident is not verifiable yet.
type notVerifiable struct{ msg string }

func (n *notVerifiable) Error() string { return n.msg }

// rerunOnReplacement computes a SQL metric of a replaced table on its
// replacement: the metric's own SQL with the table reference substituted
// (sqlsubst.go), over the buckets since the symptom, judged against the
// metric's history before them. The values are not stored: they are the
// replacement's, not the series' own.
func (v *verifier) rerunOnReplacement(ctx context.Context, def *incidents.MetricDefinition, r *Replacement, start, end time.Time) (*metricRun, error) {
	cannot := func(why string) error {
		return &notVerifiable{fmt.Sprintf("not verifiable yet: metric %s reads %s, which approved proposal %s replaces with %s, and %s; define it on %s (define_metric) or redefine it so it reads the table in FROM or JOIN",
			def.Name, def.Asset, r.Proposal, r.With, why, r.With)}
	}
	wh, err := v.env.Warehouse(ctx, def.Warehouse)
	if err != nil {
		return nil, fmt.Errorf("re-run metric %s: %w; nothing was changed", def.Name, err)
	}
	if r.platform != "" && r.platform != lineage.NormalizePlatform(wh.Dialect().Name()) {
		return nil, cannot(fmt.Sprintf("it runs on %s warehouse %s, where %s is not", wh.Dialect().Name(), def.Warehouse, r.With))
	}
	// The metric's table as its SQL names it: the id it was defined on,
	// else the table that id builds (a dbt model's relation).
	platform, path, ok := lineage.SplitID(def.Asset)
	if !ok || !lineage.IsWarehouse(platform) {
		var err error
		if _, path, _, err = v.table(ctx, def.Asset); err != nil {
			return nil, err
		}
	}
	from, err := warehouse.ParseTableName(path)
	if err != nil || path == "" {
		return nil, cannot(fmt.Sprintf("%s is not a table name the SQL can be matched against", def.Asset))
	}
	table, err := resolveTable(ctx, wh, r.table)
	if err != nil {
		return nil, fmt.Errorf("the replacement table %s named by approved proposal %s is not in warehouse %s (%w): carry out the approved step first; nothing was changed",
			r.With, r.Proposal, wh.Name(), err)
	}
	var parts []string
	for _, p := range []string{from.Database, from.Schema, from.Name} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	sqlText, err := substituteTable(def.SQL, wh.Dialect(), parts, table.Ref)
	var us *unsubstitutable
	if errors.As(err, &us) {
		return nil, cannot(us.why)
	}
	if err != nil {
		return nil, err
	}
	alt := *def
	alt.SQL = sqlText
	points, err := incidents.ComputeMetric(ctx, wh, alt, incidents.Window{Start: start, End: end})
	if err != nil {
		return nil, fmt.Errorf("re-run metric %s on the replacement %s: %w; nothing was changed", def.Name, r.With, err)
	}
	if v.readOn == nil {
		v.readOn = map[string][]string{}
	}
	if !contains(v.readOn[r.Proposal], def.Name) {
		v.readOn[r.Proposal] = append(v.readOn[r.Proposal], def.Name)
	}
	run := &metricRun{def: def, window: fmt.Sprintf("computed on %s reading %s instead of %s (approved in %s by %s) for %s to %s",
		def.Warehouse, table.Ref, def.Asset, r.Proposal, r.ApprovedBy, start.Format("2006-01-02 15:04"), end.Format("15:04 UTC"))}
	series := baseline.Series{Asset: def.Asset, Metric: def.Name, Grain: def.Grain}
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
