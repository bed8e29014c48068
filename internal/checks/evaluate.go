package checks

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/store"
)

// Status is a check's outcome.
type Status string

// Statuses, from worst to best.
const (
	// Fail: an explicit expectation is broken.
	Fail Status = "fail"
	// Anomalous: outside the range the metric's own history expects.
	Anomalous Status = "anomalous"
	// Pass: within expectations and history.
	Pass Status = "pass"
	// Learning: no expectation and too little history to judge yet.
	Learning Status = "learning"
	// NotJudged is a report's status (never one result's) when nothing
	// was found but some results had too little history to judge: it is
	// not an all-clear.
	NotJudged Status = "not_judged"
)

func (s Status) rank() int {
	switch s {
	case Fail:
		return 3
	case Anomalous:
		return 2
	case Pass:
		return 1
	}
	return 0
}

// Problem is the kind of data problem a check points at.
type Problem string

// Problems, in the order summaries name them.
const (
	ProblemVolume     Problem = "volume"
	ProblemNulls      Problem = "nulls"
	ProblemUniqueness Problem = "uniqueness"
	ProblemFreshness  Problem = "freshness"
	// ProblemValues covers accepted values, ranges and predicates.
	ProblemValues Problem = "values"
)

var problemOrder = []Problem{ProblemVolume, ProblemNulls, ProblemUniqueness, ProblemFreshness, ProblemValues}

func problemOf(metric string) Problem {
	switch metric {
	case MetricRowCount:
		return ProblemVolume
	case MetricNullRate:
		return ProblemNulls
	case MetricDuplicateRate:
		return ProblemUniqueness
	case MetricStaleness, MetricLagAvg, MetricLagP95:
		return ProblemFreshness
	}
	return ProblemValues
}

func problemOfKind(k Kind) Problem {
	switch k {
	case KindRowCount:
		return ProblemVolume
	case KindNullRate:
		return ProblemNulls
	case KindUniqueness:
		return ProblemUniqueness
	case KindFreshness, KindLoadLag:
		return ProblemFreshness
	}
	return ProblemValues
}

// Range is an expected interval.
type Range struct {
	Low  float64 `json:"low" jsonschema:"lowest expected value"`
	High float64 `json:"high" jsonschema:"highest expected value"`
}

// HistoryUsed says how much history a value was judged on.
type HistoryUsed struct {
	Points   int            `json:"points" jsonschema:"earlier points the baseline was computed from"`
	Basis    baseline.Basis `json:"basis,omitempty" jsonschema:"hour_of_week, hour_of_day, all or always_zero"`
	Seasonal bool           `json:"seasonal" jsonschema:"whether only the same hour of week or day was used"`
}

// BucketResult is one bucket of a bucketed metric.
type BucketResult struct {
	Start    time.Time `json:"start" jsonschema:"bucket start"`
	Value    float64   `json:"value" jsonschema:"the metric in this bucket"`
	Status   Status    `json:"status" jsonschema:"pass, fail, anomalous or learning"`
	Expected *Range    `json:"expected,omitempty" jsonschema:"range the bucket's history expects"`
	Partial  bool      `json:"partial,omitempty" jsonschema:"the bucket has not ended yet"`
	Reason   string    `json:"reason,omitempty" jsonschema:"why the bucket is not a pass"`
}

// MetricResult is one metric of one check, over the window and per bucket.
type MetricResult struct {
	Check     string  `json:"check" jsonschema:"the check, e.g. null_rate(egress_bytes)"`
	Metric    string  `json:"metric" jsonschema:"metric name as stored in history"`
	Dimension string  `json:"dimension,omitempty" jsonschema:"column, key or predicate the metric is about"`
	Problem   Problem `json:"problem" jsonschema:"volume, nulls, uniqueness, freshness or values"`
	Status    Status  `json:"status" jsonschema:"pass, fail (expectation broken), anomalous (outside history's range) or learning"`
	Message   string  `json:"message" jsonschema:"what was observed and why it has this status"`
	// Observed is the value over the whole window (or table).
	Observed *float64 `json:"observed,omitempty" jsonschema:"value over the whole window or table"`
	// Expected is the range history expects for the value judged.
	Expected *Range `json:"expected,omitempty" jsonschema:"range the metric's history expects"`
	// Usual, ChangePct and ComparedWith state the move in numbers: the
	// value judged is ChangePct percent off the Usual (median) of the
	// ComparedWith slot ("weekday 11:00").
	Usual        *float64     `json:"usual,omitempty" jsonschema:"the usual value (baseline median) the value judged was compared with"`
	ChangePct    *float64     `json:"change_pct,omitempty" jsonschema:"how far the value judged is from usual, in percent of usual (negative is below)"`
	ComparedWith string       `json:"compared_with,omitempty" jsonschema:"the time compared with: e.g. Tuesday 11:00 (same hour of the week), weekday 11:00 or weekend 11:00 (same hour on that kind of day), 11:00 (same hour of any day)"`
	Expectation  string       `json:"expectation,omitempty" jsonschema:"the explicit expectation checked, if any"`
	History      *HistoryUsed `json:"history,omitempty" jsonschema:"how much history the value was judged on"`
	// Buckets are listed when a bucketed metric is not a plain pass, so
	// the reader can see when it started and where it is heading.
	Buckets []BucketResult `json:"buckets,omitempty" jsonschema:"per-bucket values, when not all pass; a long window lists the first buckets that are not a pass and the latest (see buckets_total)"`
	// BucketsTotal is set when the answer lists only some buckets.
	BucketsTotal int `json:"buckets_total,omitempty" jsonschema:"buckets in the window when only some are listed"`
	// TopValue is the most common value a top_value_share is about. A
	// pointer, so that a blank string, often the very value a broken
	// default writes, is named rather than left out.
	TopValue *string `json:"top_value,omitempty" jsonschema:"top_value_share: the most common value in the value judged"`
	Inferred bool    `json:"inferred,omitempty" jsonschema:"the check was chosen by profiling"`
	// Source says who declared the expectation checked.
	Source string `json:"source,omitempty" jsonschema:"who declared the expectation checked: team (set_quality_expectations) or dbt (a test in an imported dbt manifest); empty for profiled or requested checks"`
}

// Report is the outcome of one quality check of one table.
type Report struct {
	Warehouse  string    `json:"warehouse" jsonschema:"warehouse name"`
	Table      string    `json:"table" jsonschema:"table in catalog spelling"`
	Asset      string    `json:"asset" jsonschema:"asset id of the table"`
	ObservedAt time.Time `json:"observed_at" jsonschema:"when the scan ran"`
	Window     *Window   `json:"window,omitempty" jsonschema:"the window and buckets checked"`
	Status     Status    `json:"status" jsonschema:"worst status of any check: fail, anomalous, pass, or not_judged when nothing was found but some checks had too little history to judge"`
	// Problems names the kinds of problem found; empty means none of
	// volume, nulls, uniqueness or freshness (nor values, when checked).
	Problems []Problem `json:"problems" jsonschema:"kinds of problem found: volume, nulls, uniqueness, freshness, values"`
	Summary  string    `json:"summary" jsonschema:"what was found, for a person"`
	// Inferred lists what profiling guessed (key, time columns).
	Inferred     []string       `json:"inferred,omitempty" jsonschema:"what was inferred about the table, and any declared (dbt) expectation that could not be checked and why"`
	Results      []MetricResult `json:"results" jsonschema:"one entry per metric checked"`
	Statements   int            `json:"statements" jsonschema:"SQL statements the scan needed"`
	BytesScanned int64          `json:"bytes_scanned,omitempty" jsonschema:"bytes the warehouse reported scanning"`
}

// historySpan is how far back a judgement looks: enough weeks for the
// hour-of-week slots to fill.
const historySpan = 8 * 7 * 24 * time.Hour

// slot is where an observation's point sits in history.
type slot struct {
	grain       string
	at, end     time.Time
	trainBefore time.Time
}

func slotOf(plan *ScanPlan, o Observation, now time.Time) slot {
	w := plan.Window
	switch {
	case !o.Total:
		g := w.Grain.Duration()
		return slot{string(w.Grain), o.Bucket, o.Bucket.Add(g), w.Start}
	case o.Metric == MetricStaleness || w.Start.IsZero():
		// Freshness is about the moment of the check, and a whole-table
		// value is a snapshot: both are points at the observation time.
		return slot{"", now, now, now}
	}
	return slot{grainLabel(w.End.Sub(w.Start)), w.Start, w.End, w.Start}
}

func baselineOptions(metric string, trainBefore time.Time) baseline.Options {
	o := baseline.Options{TrainBefore: trainBefore}
	switch metric {
	case MetricRowCount:
		// Rows are counts, so a quiet hour's Poisson noise sets the floor;
		// 3% keeps a 20% shift visible at a 3.5-spread threshold.
		o.RelativeFloor, o.Counts = 0.03, true
	case MetricNullRate, MetricDuplicateRate, MetricRejectedRate, MetricOutOfRange, MetricOrphanRate:
		o.Direction, o.ZeroRule, o.AbsoluteFloor = baseline.Up, true, 0.002
	case MetricFailingRows:
		o.Direction, o.ZeroRule, o.AbsoluteFloor = baseline.Up, true, 1
	case MetricZeroRate:
		o.AbsoluteFloor = 0.002
	case MetricTopValueShare:
		// A mix that drifts by a point is not news; one that flips is.
		o.AbsoluteFloor = 0.01
	case MetricDistinctValues:
		// Approximate counts of a few values: one more or fewer status
		// in an hour is ordinary, a column that suddenly holds dozens
		// (or one) is not.
		o.RelativeFloor, o.AbsoluteFloor = 0.1, 1
	case MetricStaleness, MetricLagAvg, MetricLagP95:
		o.Direction, o.RelativeFloor, o.AbsoluteFloor = baseline.Up, 0.1, 30
	}
	return o
}

// Fewest values a bucket needs before its tail statistics are judged.
// The p95 of 30 values of a skewed amount is its second-largest value,
// and the mean is pulled by one large one: both swing far beyond the band
// the same hour's history gives them. The median (judged from
// minProfiledValues on) still catches a unit or mix change in a quiet
// hour.
const (
	minP95Values  = 100
	minMeanValues = 50
)

// tooFewValues says why a value statistic is not judged, or "".
func tooFewValues(o Observation) string {
	need := int64(0)
	switch o.Metric {
	case MetricValueP95:
		need = minP95Values
	case MetricValueMean:
		need = minMeanValues
	}
	if o.Of >= need {
		return ""
	}
	return fmt.Sprintf("not judged: too few values (%s; the %s needs at least %d)", thousands(o.Of), statName(o.Metric), need)
}

func statName(metric string) string {
	if metric == MetricValueP95 {
		return "p95"
	}
	return "mean"
}

// stalenessGapFloors is how many of the table's usual gaps between rows
// the spread of staleness is at least. The newest row of a table written
// at random moments is an exponential wait of mean one gap; with the 3.5
// threshold the band reaches past 7 gaps, which an hour of ordinary
// writes exceeds about once in two thousand checks.
const stalenessGapFloors = 2

// usualGap estimates the usual seconds between rows at the time of the
// check, from the rows per hour (or day) history records for the same
// hour of the week or day; 0 when there is too little of it. A quiet
// Sunday afternoon's newest row is minutes old without anything being
// wrong, a busy Monday's is seconds old.
func usualGap(history map[baseline.Series][]baseline.Point, asset string, now time.Time) float64 {
	for _, g := range []struct {
		grain   Grain
		seconds float64
	}{{Hour, 3600}, {Day, 86400}} {
		s := baseline.Series{Asset: asset, Metric: MetricRowCount, Grain: string(g.grain)}
		at := now.Truncate(time.Hour)
		if g.grain == Day {
			at = now.Truncate(24 * time.Hour)
		}
		j := baseline.Score(history[s], at, 0, baseline.Options{TrainBefore: at, Counts: true, RelativeFloor: 0.03})
		if j.Verdict == baseline.Learning {
			continue
		}
		// An hour that usually holds no rows at all has a gap of hours.
		return g.seconds / math.Max(j.Median, 0.5)
	}
	return 0
}

// notAKey says why a key guessed from column names is not judged as a
// key: its own history shows it repeating. A column named after the
// table (seller_id of seller_payouts) is often the entity the rows are
// about, not the rows' key; judging its repeats would open an incident
// every hour it repeats as usual. "" when the history is too short or
// shows it unique (repeats in at most a tenth of earlier points, so a
// past incident does not unmake a real key).
func notAKey(history map[baseline.Series][]baseline.Point, asset, column string, before time.Time) string {
	var best []baseline.Point
	for s, pts := range history {
		if s.Asset == asset && s.Metric == MetricDuplicateRate && s.Dimension == column && len(pts) > len(best) {
			best = pts // the finest grain has the most points
		}
	}
	n, repeated := 0, 0
	for _, p := range best {
		if !p.At.Before(before) {
			continue
		}
		n++
		if p.Value > 0 {
			repeated++
		}
	}
	if n < 6 || float64(repeated) <= 0.1*float64(n) {
		return ""
	}
	return fmt.Sprintf("not judged as a key: %s was inferred as the key from its name, but repeats in %d of %d earlier checks, so it is not a key (declare the key with set_quality_expectations if one must be unique)",
		column, repeated, n)
}

// judged is one observation with its verdicts.
type judged struct {
	obs      Observation
	slot     slot
	partial  bool
	j        *baseline.Judgement // nil when not judged against history
	skip     string              // why the observation is deliberately not judged
	broken   string              // the explicit expectation broken, if any
	explicit string              // the explicit expectation checked, if any
	status   Status
	// lone marks a bucket outside its expected range that passed because
	// no neighbour was (demoteLoneBuckets).
	lone bool
}

// sizeAware reports the metrics that summarise a bucket's values (a mean,
// median or p95 of its rows): their noise depends on how many rows the
// bucket holds, so a quiet night hour is judged with a wider spread than
// the busy hours a pooled spread mostly comes from.
func sizeAware(metric string) bool {
	return isValueMetric(metric) || metric == MetricLagAvg || metric == MetricLagP95
}

// bucketRows are the rows per bucket of one grain: the scan's own (now)
// and history's (earlier buckets), so sizeAware metrics know how many rows
// each value summarised.
type bucketRows struct {
	now, earlier map[time.Time]float64
}

func newBucketRows(history []baseline.Point, observations []Observation) bucketRows {
	b := bucketRows{now: map[time.Time]float64{}, earlier: make(map[time.Time]float64, len(history))}
	for _, p := range history {
		b.earlier[p.At] = p.Value
	}
	for _, o := range observations {
		if o.Metric == MetricRowCount && !o.Total {
			b.now[o.Bucket] = o.Value
		}
	}
	return b
}

// sized sets opts' sizes for an observation of a bucket whose rows the
// scan counted.
func (b bucketRows) sized(opts *baseline.Options, o Observation) {
	n, ok := b.now[o.Bucket]
	if o.Total || !sizeAware(o.Metric) || !ok || n <= 0 {
		return
	}
	opts.Size = n
	opts.SizeAt = func(at time.Time) (float64, bool) {
		v, ok := b.earlier[at]
		return v, ok
	}
}

// Evaluate judges a scan's observations against the checks' explicit
// expectations and each metric's own history, stores them as metric
// points, and reports.
func Evaluate(ctx context.Context, db *store.DB, scan *Scan) (*Report, error) {
	e, err := newEvaluator(ctx, db, scan.Plan, scan.ObservedAt)
	if err != nil {
		return nil, err
	}
	all, err := e.judge(ctx, scan.Observations)
	if err != nil {
		return nil, err
	}
	return e.report(all, len(scan.Plan.Statements), scan.BytesScanned), nil
}

// evaluator judges observations of one plan against the history loaded
// once before the scan, so a backfill can judge and record each chunk's
// buckets as they arrive and report on all of them at the end.
type evaluator struct {
	db      *store.DB
	plan    *ScanPlan
	now     time.Time
	history map[baseline.Series][]baseline.Point
}

func newEvaluator(ctx context.Context, db *store.DB, plan *ScanPlan, now time.Time) (*evaluator, error) {
	from := now
	if !plan.Window.Start.IsZero() && plan.Window.Start.Before(from) {
		from = plan.Window.Start
	}
	history, err := baseline.LoadAsset(ctx, db, plan.Asset, from.Add(-historySpan), now)
	if err != nil {
		return nil, err
	}
	return &evaluator{db: db, plan: plan, now: now, history: history}, nil
}

// judge judges observations and records their points, with extra ones,
// in one transaction.
func (e *evaluator) judge(ctx context.Context, observations []Observation, extra ...baseline.Sample) ([]judged, error) {
	plan, now, history, db := e.plan, e.now, e.history, e.db
	var all []judged
	samples := extra
	gap := -1.0 // the usual gap between rows, once a staleness needs it
	rows := newBucketRows(history[baseline.Series{Asset: plan.Asset, Metric: MetricRowCount, Grain: string(plan.Window.Grain)}], observations)
	for _, o := range observations {
		pc := plan.Checks[o.Check]
		jd := judged{obs: o, slot: slotOf(plan, o, now)}
		jd.partial = jd.slot.end.After(now)
		series := baseline.Series{Asset: plan.Asset, Metric: o.Metric, Dimension: o.Dimension, Grain: jd.slot.grain}
		if isValueMetric(o.Metric) {
			jd.skip = tooFewValues(o)
		}
		if o.Metric == MetricDuplicateRate && pc.Spec.Inferred {
			jd.skip = notAKey(history, plan.Asset, o.Dimension, jd.slot.trainBefore)
		}
		// A bucket that has not ended has fewer rows than a whole one, and
		// rows counted by their latest change are not arrivals: neither is
		// a volume to judge or keep as history.
		// The values of a bucket still filling are its first rows only
		// (often a different mix), so they are not judged either.
		if !((o.Metric == MetricRowCount || isProfileMetric(o.Metric)) && jd.partial) &&
			!(o.Metric == MetricRowCount && plan.rewritten) {
			opts := baselineOptions(o.Metric, jd.slot.trainBefore)
			rows.sized(&opts, o)
			if o.Metric == MetricStaleness {
				if gap < 0 {
					gap = usualGap(history, plan.Asset, now)
				}
				opts.AbsoluteFloor = max(opts.AbsoluteFloor, stalenessGapFloors*gap)
			}
			var j baseline.Judgement
			if isRate(o.Metric) {
				// Judged with its counts: 2 nulls in a quiet hour of 10
				// rows is not the news 200 in 1,000 is.
				j = baseline.ScoreRate(history[series], jd.slot.at, float64(o.Count), float64(o.Of), opts)
			} else {
				j = baseline.Score(history[series], jd.slot.at, o.Value, opts)
			}
			// A tail of too few values is kept as history (what was
			// observed) but not judged: it is noise, not news.
			if !(isValueMetric(o.Metric) && jd.skip != "") {
				jd.j = &j
			}
			samples = append(samples, baseline.Sample{Series: series, Point: baseline.Point{At: jd.slot.at, Value: o.Value}})
		}
		jd.explicit, jd.broken = explicitCheck(pc, o, jd.partial, plan.Window.Grain)
		if o.Metric == MetricRowCount && pc.Spec.StayEmpty != "" {
			jd.explicit, jd.broken = stayEmptyCheck(plan, pc.Spec.StayEmpty, o, history[series], jd.slot.at)
		}
		// A table declared to stay empty is judged by that alone: its
		// history of incident rows is not a baseline to return to.
		stayEmpty := o.Metric == MetricRowCount && pc.Spec.StayEmpty != ""
		switch {
		case jd.broken != "":
			jd.status = Fail
		case stayEmpty:
			jd.status = Pass
		case jd.skip != "" && o.Metric == MetricDuplicateRate:
			// Not a key, so its repeats are not a uniqueness problem.
			jd.status = Pass
		case jd.skip != "":
			jd.status = Learning
		case jd.j != nil && jd.j.Verdict == baseline.Anomalous:
			jd.status = Anomalous
		case jd.explicit != "" || (jd.j != nil && jd.j.Verdict == baseline.Normal):
			jd.status = Pass
		default:
			jd.status = Learning
		}
		all = append(all, jd)
	}

	if len(samples) > 0 {
		if err := db.InTx(ctx, func(tx *store.Tx) error { return baseline.Record(ctx, tx, now, samples...) }); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// report builds the report from every judged observation.
func (e *evaluator) report(all []judged, statements int, bytes int64) *Report {
	plan, now := e.plan, e.now
	demoteLoneBuckets(all)
	rep := &Report{
		Table: plan.Table.Ref.String(), Asset: plan.Asset, ObservedAt: now,
		Statements: statements, BytesScanned: bytes, Problems: []Problem{},
	}
	if !plan.Window.IsZero() {
		w := plan.Window
		rep.Window = &w
	}
	rep.Results = buildResults(plan, all)
	summarize(rep, plan)
	return rep
}

// loneCountScore is how many standard errors (Poisson ones, for the few
// rows of a quiet hour) a bucket's row count must be from its usual level
// to be anomalous without a neighbour that is too. A check of a day by the
// hour judges 24 counts, a week of them 168: at the 3.5 of one judgement,
// one count in about 2,000 of a healthy table is beyond it, so a table
// would open an incident in about one week in twelve from noise alone (the
// seeded healthy weeks did, issue 14: 10 rows at midnight where 26 is
// usual). Beyond 4.5 it is one in about 150,000 (a week in 900), and a
// real volume problem either moves that far (an empty hour where 20 is
// usual, a fifth of a busy hour's rows missing) or lasts into the next
// bucket, which a lone noisy hour does not.
const loneCountScore = 4.5

// demoteLoneBuckets passes a bucket that is anomalous by history alone
// while its neighbours are not:
//   - a value-profile bucket (mean, median, p95, zero share, distinct
//     count, top-value share): the profile judges several numbers per
//     column per bucket, so one odd hour among hundreds of judgements is
//     chance; a changed distribution (a unit change, a new mix) shows in
//     consecutive buckets;
//   - a row count within loneCountScore of its usual level, whose
//     neighbours are not anomalous on the same side.
//
// A broken explicit expectation is never demoted.
func demoteLoneBuckets(all []judged) {
	type key struct {
		check  int
		metric string
	}
	runs := map[key][]int{}
	for i, jd := range all {
		if !jd.obs.Total && (isProfileMetric(jd.obs.Metric) || jd.obs.Metric == MetricRowCount) {
			k := key{jd.obs.Check, jd.obs.Metric}
			runs[k] = append(runs[k], i)
		}
	}
	side := func(jd judged) float64 {
		if jd.status != Anomalous || jd.j == nil {
			return 0
		}
		return math.Copysign(1, jd.j.Score)
	}
	for k, idx := range runs {
		sort.Slice(idx, func(a, b int) bool { return all[idx[a]].obs.Bucket.Before(all[idx[b]].obs.Bucket) })
		counts := k.metric == MetricRowCount
		lone := []int{}
		for n, i := range idx {
			jd := all[i]
			if jd.status != Anomalous || (counts && math.Abs(jd.j.Score) >= loneCountScore) {
				continue
			}
			near := func(m int) bool {
				if m < 0 || m >= len(idx) {
					return false
				}
				if counts {
					return side(all[idx[m]]) == side(jd)
				}
				return all[idx[m]].status == Anomalous
			}
			if !near(n-1) && !near(n+1) {
				lone = append(lone, i)
			}
		}
		for _, i := range lone {
			all[i].status, all[i].lone = Pass, true
		}
	}
}

// explicitCheck returns the expectation a check declares for this
// observation and, when broken, how.
func explicitCheck(pc PlannedCheck, o Observation, partial bool, grain Grain) (rule, broken string) {
	s := pc.Spec
	switch o.Metric {
	case MetricRowCount:
		if o.Total && grain != Whole {
			return "", "" // bounds are per bucket; the window holds many
		}
		var parts []string
		if s.Min != nil {
			parts = append(parts, "at least "+number(*s.Min))
			if !partial && o.Value < *s.Min {
				broken = fmt.Sprintf("%s rows, fewer than the %s expected", number(o.Value), number(*s.Min))
			}
		}
		if s.Max != nil {
			parts = append(parts, "at most "+number(*s.Max))
			if o.Value > *s.Max {
				broken = fmt.Sprintf("%s rows, more than the %s allowed", number(o.Value), number(*s.Max))
			}
		}
		if len(parts) > 0 {
			rule = strings.Join(parts, " and ") + " rows"
			if !o.Total {
				rule += " per " + string(grain)
			}
		}
	case MetricNullRate:
		if s.MaxRate != nil {
			rule = "null in at most " + percent(*s.MaxRate) + " of rows"
			if o.Value > *s.MaxRate {
				broken = fmt.Sprintf("null in %s of rows, above the %s allowed", percent(o.Value), percent(*s.MaxRate))
			}
		}
	case MetricDuplicateRate:
		if !s.Inferred {
			rule = "key must be unique"
			if o.Total && o.Count > 0 {
				broken = fmt.Sprintf("%s duplicate keys in %s rows", thousands(o.Count), thousands(o.Of))
			}
		}
	case MetricStaleness:
		if pc.maxAge > 0 {
			rule = "newest row at most " + pc.Spec.MaxAge + " old"
			if o.Value > pc.maxAge.Seconds() {
				broken = fmt.Sprintf("newest row is %s old, more than the %s allowed", age(o.Value), pc.Spec.MaxAge)
			}
		}
	case MetricLagAvg:
		if pc.maxAge > 0 && o.Total {
			rule = "average load lag at most " + pc.Spec.MaxAge
			if o.Value > pc.maxAge.Seconds() {
				broken = fmt.Sprintf("average load lag %s, more than the %s allowed", age(o.Value), pc.Spec.MaxAge)
			}
		}
	case MetricRejectedRate, MetricOutOfRange:
		rule = "every non-null value accepted"
		if o.Metric == MetricOutOfRange {
			rule = "every non-null value in " + rangeText(s.Min, s.Max)
		}
		if o.Total && o.Count > 0 {
			broken = fmt.Sprintf("%s of %s values (%s) outside", thousands(o.Count), thousands(o.Of), percent(o.Value))
		}
	case MetricOrphanRate:
		rule = fmt.Sprintf("every %s found in %s.%s", s.Column, s.To, s.Field)
		if o.Total && o.Count > 0 {
			broken = fmt.Sprintf("%s of %s values (%s) not found", thousands(o.Count), thousands(o.Of), percent(o.Value))
		}
	case MetricFailingRows:
		allowed := int64(0)
		if s.MaxFailing != nil {
			allowed = *s.MaxFailing
		}
		rule = fmt.Sprintf("at most %s rows failing", thousands(allowed))
		if o.Total && o.Count > allowed {
			broken = fmt.Sprintf("%s of %s rows fail, more than the %s allowed", thousands(o.Count), thousands(o.Of), thousands(allowed))
		}
	}
	return rule, broken
}

// stayEmptyCheck judges a table that should hold no rows (always) or stop
// growing (new_rows). Without a window, "stopped growing" compares the
// table's rows with the previous check's, so it can be verified after a
// fix however many rows the incident left behind.
func stayEmptyCheck(plan *ScanPlan, mode string, o Observation, history []baseline.Point, now time.Time) (rule, broken string) {
	at := where(plan, o)
	var prior []baseline.Point
	for _, p := range history {
		if p.At.Before(now) {
			prior = append(prior, p)
		}
	}
	if mode == StayAlways {
		rule = "no rows at all (the table should stay empty)"
		if o.Value <= 0 {
			return rule, ""
		}
		earlier := 0
		for _, p := range prior {
			if p.Value != 0 {
				return rule, fmt.Sprintf("%s rows%s; the table should stay empty", number(o.Value), at)
			}
			earlier++
		}
		if earlier == 0 {
			return rule, fmt.Sprintf("%s rows%s; the table should stay empty", number(o.Value), at)
		}
		return rule, fmt.Sprintf("0 rows in every check%s (%d checks), %s now%s; the table should stay empty",
			spanText(prior[0].At, now), earlier, number(o.Value), at)
	}
	rule = "no new rows (the table should stop growing)"
	if !o.Total || !plan.Window.IsZero() {
		// Rows in a window (or bucket) of the time column are new rows.
		if o.Value > 0 {
			return rule, fmt.Sprintf("%s new rows%s; the table should stop growing", number(o.Value), at)
		}
		return rule, ""
	}
	if len(prior) == 0 {
		return rule + "; judged from the next check, against this one's " + number(o.Value) + " rows", ""
	}
	last := prior[len(prior)-1]
	if o.Value > last.Value {
		return rule, fmt.Sprintf("%s rows, %s more than at the previous check (%s); the table should stop growing",
			number(o.Value), number(o.Value-last.Value), last.At.UTC().Format("2006-01-02 15:04 UTC"))
	}
	return rule + fmt.Sprintf("; not grown since the previous check (%s)", last.At.UTC().Format("2006-01-02 15:04 UTC")), ""
}

func rangeText(lo, hi *float64) string {
	switch {
	case lo != nil && hi != nil:
		return fmt.Sprintf("[%s, %s]", trimFloat(*lo), trimFloat(*hi))
	case lo != nil:
		return "[" + trimFloat(*lo) + ", ∞)"
	case hi != nil:
		return "(-∞, " + trimFloat(*hi) + "]"
	}
	return "any"
}

func trimFloat(v float64) string {
	s, _ := numberLiteral(v)
	return s
}

type metricKey struct {
	check  int
	metric string
}

func buildResults(plan *ScanPlan, all []judged) []MetricResult {
	groups := map[metricKey][]judged{}
	var order []metricKey
	for _, jd := range all {
		k := metricKey{jd.obs.Check, jd.obs.Metric}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], jd)
	}
	// A check with no observation at all (freshness over no rows) still
	// gets a result, so silence is never mistaken for a pass.
	observed := map[int]bool{}
	for _, k := range order {
		observed[k.check] = true
	}
	for ci := range plan.Checks {
		if !observed[ci] {
			order = append(order, metricKey{ci, ""})
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].check < order[j].check })

	out := make([]MetricResult, 0, len(order))
	for _, k := range order {
		out = append(out, buildResult(plan, k, groups[k]))
	}
	return out
}

func buildResult(plan *ScanPlan, k metricKey, js []judged) MetricResult {
	pc := plan.Checks[k.check]
	r := MetricResult{Check: pc.Label, Metric: k.metric, Inferred: pc.Spec.Inferred}
	if len(js) == 0 {
		return emptyResult(pc, r)
	}
	r.Dimension = js[0].obs.Dimension
	r.Problem = problemOf(k.metric)

	var total *judged
	var buckets []judged
	for i := range js {
		if js[i].obs.Total {
			total = &js[i]
		} else {
			buckets = append(buckets, js[i])
		}
	}
	r.Status = Learning
	for _, jd := range js {
		if jd.status.rank() > r.Status.rank() {
			r.Status = jd.status
		}
		if jd.explicit != "" {
			r.Expectation = jd.explicit
		}
	}
	if total != nil {
		v := total.obs.Value
		r.Observed = &v
	}

	// The observation that speaks for the metric: the latest bucket with
	// the worst status, else the window total, else the latest bucket.
	var focus *judged
	if r.Status == Fail || r.Status == Anomalous {
		for i := len(buckets) - 1; i >= 0 && focus == nil; i-- {
			if buckets[i].status == r.Status {
				focus = &buckets[i]
			}
		}
	}
	if focus == nil {
		focus = total
	}
	if focus == nil {
		focus = &buckets[len(buckets)-1]
	}
	if focus.j != nil {
		j := focus.j
		if j.Verdict != baseline.Learning {
			r.Expected = &Range{Low: j.Low, High: j.High}
			usual := j.Median
			r.Usual, r.ComparedWith = &usual, j.Slot
			if pct := baseline.PercentChange(j.Value, j.Median); !math.IsNaN(pct) {
				r.ChangePct = &pct
			}
		}
		r.History = &HistoryUsed{Points: j.N, Basis: j.Basis, Seasonal: j.Seasonal}
	}
	if r.Status == Fail || r.Status == Anomalous {
		for _, b := range buckets {
			br := BucketResult{Start: b.obs.Bucket, Value: b.obs.Value, Status: b.status, Partial: b.partial}
			if b.j != nil && b.j.Verdict != baseline.Learning {
				br.Expected = &Range{Low: b.j.Low, High: b.j.High}
			}
			switch b.status {
			case Fail:
				br.Reason = b.broken
			case Anomalous:
				br.Reason = b.j.Reason
			default:
				br.Reason = b.skip
			}
			r.Buckets = append(r.Buckets, br)
		}
	}
	if r.Expectation != "" {
		r.Source = pc.Spec.source
	}
	if k.metric == MetricTopValueShare {
		v := focus.obs.Example
		r.TopValue = &v
	}
	r.Message = message(plan, pc, focus, buckets)
	// Passed on its buckets while the window value was not judged: the
	// buckets speak for the result, and the window's "not judged" is a
	// note, not the verdict.
	if r.Status == Pass && focus == total && total.status == Learning && slices.ContainsFunc(buckets, func(b judged) bool { return b.status == Pass }) {
		r.Message = subject(pc, total.obs) + where(plan, total.obs) + fmt.Sprintf("; every %s within expectations", plan.Window.Grain) +
			loneText(plan, buckets) + wholeWindowNote(plan, total)
	}
	// A rate judged per bucket is read first for the whole window ("18% of
	// today's rows"), then for the bucket that fired.
	if total != nil && focus != total && isRate(k.metric) && (r.Status == Fail || r.Status == Anomalous) {
		r.Message = subject(pc, total.obs) + " over the window; " + r.Message
	}
	return r
}

func emptyResult(pc PlannedCheck, r MetricResult) MetricResult {
	switch pc.Spec.Kind {
	case KindFreshness:
		r.Metric, r.Dimension, r.Problem = MetricStaleness, pc.Spec.Column, ProblemFreshness
		r.Status = Learning
		r.Message = fmt.Sprintf("no %s values to judge: the table or window has no rows with one", pc.Spec.Column)
		if pc.maxAge > 0 {
			r.Status = Fail
			r.Expectation = "newest row at most " + pc.Spec.MaxAge + " old"
			r.Message = fmt.Sprintf("no rows with %s at all, so nothing is newer than the %s allowed", pc.Spec.Column, pc.Spec.MaxAge)
		}
	case KindLoadLag:
		r.Metric, r.Dimension, r.Problem = MetricLagAvg, pc.Spec.IngestTime+"-"+pc.Spec.EventTime, ProblemFreshness
		r.Status = Learning
		r.Message = fmt.Sprintf("no rows with both %s and %s, so no load lag to judge", pc.Spec.EventTime, pc.Spec.IngestTime)
	default:
		r.Problem = problemOfKind(pc.Spec.Kind)
		r.Status = Learning
		r.Message = "no rows to judge"
	}
	return r
}
