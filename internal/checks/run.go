package checks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/warehouse"
)

// Metric names, as stored in metric history.
const (
	MetricRowCount      = "row_count"
	MetricNullRate      = "null_rate"
	MetricDuplicateRate = "duplicate_rate"
	MetricStaleness     = "staleness_seconds"
	MetricLagAvg        = "load_lag_avg_seconds"
	MetricLagP95        = "load_lag_p95_seconds"
	MetricRejectedRate  = "rejected_rate"
	MetricOutOfRange    = "out_of_range_rate"
	MetricFailingRows   = "failing_rows"
	// The value profile of a numeric column.
	MetricValueMean   = "value_mean"
	MetricValueMedian = "value_median"
	MetricValueP95    = "value_p95"
	MetricZeroRate    = "zero_rate"
	// The value profile of a low-cardinality text column.
	MetricDistinctValues = "distinct_values"
	MetricTopValueShare  = "top_value_share"
	// MetricOrphanRate is the share of a column's values missing from the
	// column it references.
	MetricOrphanRate = "orphan_rate"
)

// minProfiledValues is the fewest values a bucket needs before its mean,
// median and p95 are observed: the median of five values is noise.
const minProfiledValues = 20

// Observation is one metric value from a scan: for one bucket, or for the
// whole window (Total) or table.
type Observation struct {
	// Check indexes ScanPlan.Checks.
	Check     int
	Metric    string
	Dimension string
	// Bucket is the bucket's start; zero for the window or table total.
	Bucket time.Time
	Total  bool
	Value  float64
	// Count and Of are the numerator and denominator of a rate, or the
	// failing rows and all rows of a count.
	Count, Of int64
	// Newest is the newest time seen, for freshness.
	Newest time.Time
	// Example is a value the metric is about: the most common value of a
	// top-value share, one missing value of an orphan rate.
	Example string
}

// Scan is what Run read: observations plus the bookkeeping Evaluate needs.
type Scan struct {
	Plan *ScanPlan
	// ObservedAt is when the scan started; freshness is measured from it
	// and the bucket containing it is partial.
	ObservedAt   time.Time
	Observations []Observation
	// Buckets lists every bucket of the window up to ObservedAt, including
	// buckets without rows.
	Buckets      []time.Time
	BytesScanned int64

	// total is the window's row of aggregates (the ROLLUP row, the only
	// row, or combined from the buckets), kept for a backfill to combine
	// its chunks; rows holds each bucket's row by its start (Unix ms), for
	// a backfill to add up the days its chunks cover.
	total []any
	rows  map[int64][]any
}

// RunOptions says who runs a scan, for the warehouse's cost labels.
type RunOptions struct {
	Agent string
	Tool  string
	// Clock dates the observation; default the system clock.
	Clock clock.Clock
	// Timeout overrides the warehouse's statement timeout.
	Timeout time.Duration
}

// Preflighter is a warehouse that can vet several statements before any
// runs (BigQuery: dry-run them all against the scan budget), so a split
// plan is refused whole rather than half run.
type Preflighter interface {
	Preflight(ctx context.Context, qs []warehouse.Query) error
}

// Run executes the plan's statements on wh and turns the aggregates into
// observations.
func Run(ctx context.Context, wh warehouse.Warehouse, plan *ScanPlan, opts RunOptions) (*Scan, error) {
	if wh.Dialect().Name() != plan.Dialect.Name() {
		return nil, fmt.Errorf("plan is written for %s but warehouse %s is %s", plan.Dialect.Name(), wh.Name(), wh.Dialect().Name())
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.System{}
	}
	scan := &Scan{Plan: plan, ObservedAt: clk.Now().UTC()}
	qs := make([]warehouse.Query, len(plan.Statements))
	for i, st := range plan.Statements {
		qs[i] = warehouse.Query{SQL: st.SQL, Agent: opts.Agent, Tool: opts.Tool, Timeout: opts.Timeout}
	}
	if pf, ok := wh.(Preflighter); ok && len(qs) > 1 {
		if err := pf.Preflight(ctx, qs); err != nil {
			return nil, err
		}
	}
	// values[bucket ms] holds each aggregate's value; total is the ROLLUP
	// row, or the only row of an unbucketed scan.
	buckets := map[int64][]any{}
	total := make([]any, len(plan.aggs))
	for i, st := range plan.Statements {
		res, err := wh.Query(ctx, qs[i])
		if err != nil {
			return nil, fmt.Errorf("check scan of %s: %w", plan.Table.Ref, err)
		}
		scan.BytesScanned += res.BytesScanned
		for _, row := range res.Rows {
			dst, vals := total, row
			if plan.bucketed() && !st.whole {
				if len(row) != len(st.aggs)+1 {
					return nil, fmt.Errorf("check scan of %s returned %d columns, want %d", plan.Table.Ref, len(row), len(st.aggs)+1)
				}
				vals = row[1:]
				if row[0] != nil {
					at, ok := toTime(row[0])
					if !ok {
						return nil, fmt.Errorf("check scan of %s returned bucket %v (%T), not a time", plan.Table.Ref, row[0], row[0])
					}
					key := at.UTC().UnixMilli()
					if buckets[key] == nil {
						buckets[key] = make([]any, len(plan.aggs))
					}
					dst = buckets[key]
				}
			}
			if len(vals) != len(st.aggs) {
				return nil, fmt.Errorf("check scan of %s returned %d aggregates, want %d", plan.Table.Ref, len(vals), len(st.aggs))
			}
			for j, a := range st.aggs {
				dst[a] = vals[j]
			}
		}
	}
	if plan.bucketed() && !plan.rollup {
		combineBuckets(plan, buckets, total)
	}
	scan.total, scan.rows = total, buckets
	if plan.bucketed() {
		scan.Buckets = bucketGrid(plan.Window, scan.ObservedAt, buckets)
		for _, b := range scan.Buckets {
			vals := buckets[b.UnixMilli()]
			if vals == nil {
				vals = make([]any, len(plan.aggs)) // a bucket without rows
			}
			for ci := range plan.Checks {
				obs, err := observe(plan, ci, vals, b, false, scan.ObservedAt)
				if err != nil {
					return nil, err
				}
				scan.Observations = append(scan.Observations, obs...)
			}
		}
	}
	for ci := range plan.Checks {
		obs, err := observe(plan, ci, total, time.Time{}, true, scan.ObservedAt)
		if err != nil {
			return nil, err
		}
		scan.Observations = append(scan.Observations, obs...)
	}
	return scan, nil
}

// combineBuckets fills the window's row from the buckets when the scan
// had no ROLLUP row: counts and sums add, maxima take the largest.
func combineBuckets(plan *ScanPlan, buckets map[int64][]any, total []any) {
	for a, agg := range plan.aggs {
		var sum float64
		var newest any
		seen := false
		for _, vals := range buckets {
			v := vals[a]
			if v == nil {
				continue
			}
			switch agg.combine {
			case combineSum:
				if f, ok := toFloat(v); ok {
					sum += f
					seen = true
				}
			case combineMax:
				if newest == nil || later(v, newest) {
					newest = v
				}
			}
		}
		switch {
		case agg.combine == combineSum && seen:
			total[a] = sum
		case agg.combine == combineMax:
			total[a] = newest
		}
	}
}

// later reports whether a is after b, for times or numbers.
func later(a, b any) bool {
	if ta, ok := toTime(a); ok {
		if tb, ok := toTime(b); ok {
			return ta.After(tb)
		}
	}
	fa, okA := toFloat(a)
	fb, okB := toFloat(b)
	return okA && okB && fa > fb
}

// bucketGrid lists the window's buckets that have started by now, plus any
// bucket the scan returned (a table's own clock may run ahead).
func bucketGrid(w Window, now time.Time, seen map[int64][]any) []time.Time {
	g := w.Grain.Duration()
	var out []time.Time
	have := map[int64]bool{}
	for b := w.Start; b.Before(w.End) && !b.After(now); b = b.Add(g) {
		out = append(out, b)
		have[b.UnixMilli()] = true
	}
	var extra []time.Time
	for ms := range seen {
		if !have[ms] {
			extra = append(extra, time.UnixMilli(ms).UTC())
		}
	}
	if len(extra) > 0 {
		out = append(out, extra...)
		slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	}
	return out
}

// observe computes one check's metrics from one row of aggregates. Metrics
// that are undefined for the row (a null rate of no rows) are left out.
func observe(plan *ScanPlan, ci int, vals []any, bucket time.Time, isTotal bool, now time.Time) ([]Observation, error) {
	pc := plan.Checks[ci]
	base := Observation{Check: ci, Bucket: bucket, Total: isTotal}
	intOf := func(role string) (int64, error) {
		v := vals[pc.inputs[role]]
		if v == nil {
			return 0, nil // COUNT over no rows, or a bucket the scan did not return
		}
		f, ok := toFloat(v)
		if !ok {
			return 0, fmt.Errorf("%s: aggregate %s returned %v (%T), not a number", pc.Label, role, v, v)
		}
		return int64(f), nil
	}
	rows, err := intOf("rows")
	if err != nil {
		return nil, err
	}
	rate := func(metric, dim string, count, of int64) []Observation {
		if of == 0 {
			return nil
		}
		o := base
		o.Metric, o.Dimension, o.Count, o.Of, o.Value = metric, dim, count, of, float64(count)/float64(of)
		return []Observation{o}
	}
	s := pc.Spec
	switch s.Kind {
	case KindRowCount:
		o := base
		o.Metric, o.Value, o.Count, o.Of = MetricRowCount, float64(rows), rows, rows
		return []Observation{o}, nil
	case KindNullRate:
		nonnull, err := intOf("nonnull")
		if err != nil {
			return nil, err
		}
		return rate(MetricNullRate, s.Column, rows-nonnull, rows), nil
	case KindUniqueness:
		keyRows, err := intOf("keyrows")
		if err != nil {
			return nil, err
		}
		if vals[pc.inputs["distinct"]] == nil {
			// No distinct count for this row (a backfill's window of an
			// inferred key, see backfill.go): no duplicate rate, rather
			// than every key counted a duplicate.
			return nil, nil
		}
		distinct, err := intOf("distinct")
		if err != nil {
			return nil, err
		}
		return rate(MetricDuplicateRate, strings.Join(s.Columns, ","), keyRows-distinct, keyRows), nil
	case KindFreshness:
		// Newest-per-bucket says nothing about freshness: only the window
		// or table total is observed.
		v := vals[pc.inputs["newest"]]
		if !isTotal || v == nil {
			return nil, nil
		}
		newest, ok := toTime(v)
		if !ok {
			return nil, fmt.Errorf("%s: newest value %v (%T) is not a time", pc.Label, v, v)
		}
		o := base
		o.Metric, o.Dimension, o.Newest = MetricStaleness, s.Column, newest.UTC()
		o.Value = now.Sub(newest).Seconds()
		o.Of = rows
		return []Observation{o}, nil
	case KindLoadLag:
		var out []Observation
		dim := s.IngestTime + "-" + s.EventTime
		lagRows, err := intOf("lag_rows")
		if err != nil || lagRows == 0 {
			return nil, err
		}
		sum, ok := toFloat(vals[pc.inputs["lag_sum"]])
		if !ok {
			return nil, fmt.Errorf("%s: lag sum %v is not a number", pc.Label, vals[pc.inputs["lag_sum"]])
		}
		o := base
		o.Metric, o.Dimension, o.Value, o.Of = MetricLagAvg, dim, sum/float64(lagRows)/1000, lagRows
		out = append(out, o)
		// The window's p95 exists only when the scan had a ROLLUP row.
		if v := vals[pc.inputs["lag_p95"]]; v != nil {
			f, ok := toFloat(v)
			if !ok {
				return nil, fmt.Errorf("%s: lag %v (%T) is not a number", pc.Label, v, v)
			}
			o.Metric, o.Value = MetricLagP95, f/1000
			out = append(out, o)
		}
		return out, nil
	case KindAcceptedValues, KindRange:
		nonnull, err := intOf("nonnull")
		if err != nil {
			return nil, err
		}
		bad, err := intOf("bad")
		if err != nil {
			return nil, err
		}
		metric := MetricRejectedRate
		if s.Kind == KindRange {
			metric = MetricOutOfRange
		}
		return rate(metric, s.Column, bad, nonnull), nil
	case KindDistribution:
		nonnull, err := intOf("nonnull")
		if err != nil || nonnull < minProfiledValues {
			return nil, err
		}
		if _, text := pc.inputs["distinct"]; text {
			return observeText(pc, base, vals, nonnull)
		}
		zeros, err := intOf("zeros")
		if err != nil {
			return nil, err
		}
		out := rate(MetricZeroRate, s.Column, zeros, nonnull)
		for _, m := range []struct{ role, metric string }{{"mean", MetricValueMean}, {"median", MetricValueMedian}, {"p95", MetricValueP95}} {
			v := vals[pc.inputs[m.role]]
			if v == nil {
				continue // bucketed without the window row
			}
			f, ok := toFloat(v)
			if !ok {
				return nil, fmt.Errorf("%s: %s %v (%T) is not a number", pc.Label, m.role, v, v)
			}
			o := base
			o.Metric, o.Dimension, o.Value, o.Of = m.metric, s.Column, f, nonnull
			out = append(out, o)
		}
		return out, nil
	case KindRelationship:
		// The anti-join runs once for the window: buckets have no value.
		if !isTotal {
			return nil, nil
		}
		nonnull, err := intOf("nonnull")
		if err != nil {
			return nil, err
		}
		orphans, err := intOf("orphans")
		if err != nil {
			return nil, err
		}
		out := rate(MetricOrphanRate, s.Column, min(orphans, nonnull), nonnull)
		if len(out) == 1 && orphans > 0 {
			if v := vals[pc.inputs["orphan_example"]]; v != nil {
				out[0].Example = textCell(v)
			}
		}
		return out, nil
	case KindPredicate:
		bad, err := intOf("bad")
		if err != nil {
			return nil, err
		}
		o := base
		o.Metric, o.Dimension, o.Value, o.Count, o.Of = MetricFailingRows, s.Name, float64(bad), bad, rows
		return []Observation{o}, nil
	}
	return nil, fmt.Errorf("unknown check kind %q", s.Kind)
}

// observeText reads a text column's distinct count and top-value share.
// The engines' sketches are approximate, so a top count above the rows is
// capped; a top value that is null (BigQuery counts nulls as a value) has
// no share to judge, as the null rate covers it.
func observeText(pc PlannedCheck, base Observation, vals []any, nonnull int64) ([]Observation, error) {
	var out []Observation
	col := pc.Spec.Column
	if v := vals[pc.inputs["distinct"]]; v != nil {
		f, ok := toFloat(v)
		if !ok {
			return nil, fmt.Errorf("%s: distinct count %v (%T) is not a number", pc.Label, v, v)
		}
		o := base
		o.Metric, o.Dimension, o.Value, o.Count, o.Of = MetricDistinctValues, col, f, int64(f), nonnull
		out = append(out, o)
	}
	ti, ok := pc.inputs["top"]
	if !ok || vals[ti] == nil || vals[pc.inputs["topcount"]] == nil {
		return out, nil
	}
	n, ok := toFloat(vals[pc.inputs["topcount"]])
	if !ok {
		return nil, fmt.Errorf("%s: top value count %v (%T) is not a number", pc.Label, vals[pc.inputs["topcount"]], vals[pc.inputs["topcount"]])
	}
	count := min(int64(n), nonnull)
	o := base
	o.Metric, o.Dimension, o.Count, o.Of = MetricTopValueShare, col, count, nonnull
	o.Value = float64(count) / float64(nonnull)
	o.Example = textCell(vals[ti])
	return append(out, o), nil
}

// textCell prints a text value as the drivers return it.
func textCell(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case []byte:
		return string(t)
	}
	return fmt.Sprint(v)
}

// toFloat reads a number as the engines' drivers return it: Go numbers,
// decimal strings (Snowflake NUMBER), big numbers (BigQuery NUMERIC,
// DuckDB HUGEINT) or DuckDB decimals.
func toFloat(v any) (float64, bool) {
	f, null, err := warehouse.Float(v)
	return f, !null && err == nil
}

// toTime reads a time value; drivers hand back time.Time for dates and
// timestamps (the BigQuery driver converts civil types).
func toTime(v any) (time.Time, bool) {
	t, null, err := warehouse.Time(v)
	return t, !null && err == nil
}
