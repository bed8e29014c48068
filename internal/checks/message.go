package checks

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
)

// Messages say what was observed, where, and why it has its status, in
// the metric's own units (percent of rows, rows, durations).

func isRate(metric string) bool {
	switch metric {
	case MetricNullRate, MetricDuplicateRate, MetricRejectedRate, MetricOutOfRange, MetricZeroRate, MetricTopValueShare, MetricOrphanRate:
		return true
	}
	return false
}

func isSeconds(metric string) bool {
	switch metric {
	case MetricStaleness, MetricLagAvg, MetricLagP95:
		return true
	}
	return false
}

// inUnits prints a value of metric in its unit.
func inUnits(metric string, v float64) string {
	switch {
	case isRate(metric):
		return percent(v)
	case isSeconds(metric):
		return age(v)
	case isValueMetric(metric):
		return measure(v)
	}
	return number(v)
}

// subject describes one observation.
func subject(pc PlannedCheck, o Observation) string {
	s := pc.Spec
	switch o.Metric {
	case MetricRowCount:
		return number(o.Value) + " rows"
	case MetricNullRate:
		return fmt.Sprintf("%s null in %s of rows (%s of %s)", s.Column, percent(o.Value), thousands(o.Count), thousands(o.Of))
	case MetricDuplicateRate:
		key := strings.Join(s.Columns, ", ")
		if o.Count == 0 {
			return fmt.Sprintf("%s unique across %s rows", key, thousands(o.Of))
		}
		return fmt.Sprintf("%s repeats in %s of %s rows (%s)", key, thousands(o.Count), thousands(o.Of), percent(o.Value))
	case MetricStaleness:
		return fmt.Sprintf("newest %s (%s) is %s old", s.Column, o.Newest.Format("2006-01-02 15:04 MST"), age(o.Value))
	case MetricLagAvg:
		return fmt.Sprintf("load lag (%s after %s) averages %s", s.IngestTime, s.EventTime, age(o.Value))
	case MetricLagP95:
		return fmt.Sprintf("load lag (%s after %s) p95 is %s", s.IngestTime, s.EventTime, age(o.Value))
	case MetricRejectedRate:
		return fmt.Sprintf("%s: %s of %s values (%s) not in the accepted list", s.Column, thousands(o.Count), thousands(o.Of), percent(o.Value))
	case MetricOutOfRange:
		return fmt.Sprintf("%s: %s of %s values (%s) outside the allowed range %s", s.Column, thousands(o.Count), thousands(o.Of), percent(o.Value), rangeText(s.Min, s.Max))
	case MetricFailingRows:
		return fmt.Sprintf("predicate %s: %s of %s rows fail", s.Name, thousands(o.Count), thousands(o.Of))
	case MetricZeroRate:
		return fmt.Sprintf("%s is 0 in %s of values (%s of %s)", s.Column, percent(o.Value), thousands(o.Count), thousands(o.Of))
	case MetricValueMean:
		return fmt.Sprintf("%s averages %s", s.Column, measure(o.Value))
	case MetricValueMedian:
		return fmt.Sprintf("%s median is %s", s.Column, measure(o.Value))
	case MetricValueP95:
		return fmt.Sprintf("%s p95 is %s", s.Column, measure(o.Value))
	case MetricOrphanRate:
		text := fmt.Sprintf("%s: %s of %s values (%s) not found in %s.%s", s.Column, thousands(o.Count), thousands(o.Of), percent(o.Value), s.To, s.Field)
		if o.Count > 0 && o.Example != "" {
			text += ", e.g. " + quoteValue(o.Example)
		}
		return text
	case MetricDistinctValues:
		return fmt.Sprintf("%s holds %s distinct values", s.Column, thousands(o.Count))
	case MetricTopValueShare:
		return fmt.Sprintf("%s: top value %s is %s of rows (%s of %s)", s.Column, quoteValue(o.Example), percent(o.Value), thousands(o.Count), thousands(o.Of))
	}
	return fmt.Sprintf("%s = %v", o.Metric, o.Value)
}

// measure prints a measured value of a column: thousands with separators,
// smaller values to four significant digits (12.35, 0.01234).
func measure(v float64) string {
	if math.Abs(v) >= 1000 {
		return number(math.Round(v))
	}
	return strconv.FormatFloat(roundSig(v), 'f', -1, 64)
}

// quoteValue prints a column value inside a message: quoted, without
// control characters, and cut at 40 characters (it is data, not prose).
func quoteValue(v string) string {
	r := []rune(strings.Map(func(c rune) rune {
		if c < 0x20 || c == 0x7f {
			return ' '
		}
		return c
	}, v))
	if len(r) > 40 {
		return "'" + string(r[:40]) + "…'"
	}
	return "'" + string(r) + "'"
}

// isProfileMetric reports the metrics of the value profile: judged per
// whole bucket only, and a lone odd bucket of them is chance.
func isProfileMetric(metric string) bool {
	return isValueMetric(metric) || metric == MetricZeroRate || metric == MetricDistinctValues || metric == MetricTopValueShare
}

func isValueMetric(metric string) bool {
	switch metric {
	case MetricValueMean, MetricValueMedian, MetricValueP95:
		return true
	}
	return false
}

// roundSig keeps four significant digits of a measured value, so an
// average prints as 12.35 rather than 12.3456789.
func roundSig(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	scale := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*scale) / scale
}

// where names a bucket ("at 15:00", "on 2025-03-11") or the window.
func where(plan *ScanPlan, o Observation) string {
	if o.Metric == MetricStaleness {
		return "" // measured at the moment of the check
	}
	if o.Total {
		if plan.bucketed() {
			return " over the window"
		}
		return ""
	}
	if plan.Window.Grain == Day {
		return " on " + o.Bucket.Format("2006-01-02")
	}
	if plan.Window.End.Sub(plan.Window.Start) <= 24*time.Hour {
		return " at " + o.Bucket.Format("15:04")
	}
	return " at " + o.Bucket.Format("Jan 2 15:04")
}

func basisText(j *baseline.Judgement) string {
	switch j.Basis {
	case baseline.HourOfWeek:
		return fmt.Sprintf("same hour of the week, %d points", j.N)
	case baseline.DayTypeHour:
		return fmt.Sprintf("same hour on %ss, %d points", strings.Fields(j.Slot + " weekday")[0], j.N)
	case baseline.HourOfDay:
		return fmt.Sprintf("same hour of the day, %d points", j.N)
	}
	return fmt.Sprintf("%d earlier points", j.N)
}

// moveText states an anomalous value's move against its baseline in plain
// words and numbers: ", 27% below the usual weekday 11:00 (median 39,100;
// expected 32,314–46,022, 12 points)", or " (0% in every earlier check for
// 14 days, 336 points)".
func moveText(metric string, j *baseline.Judgement, at time.Time) string {
	if j.Basis == baseline.AlwaysZero {
		return fmt.Sprintf(" (%s in every earlier check%s, %d points)", inUnits(metric, 0), spanText(j.Since, at), j.N)
	}
	usual := "the usual level"
	if j.Slot != "" {
		usual = "the usual " + j.Slot
	}
	bounds := fmt.Sprintf("expected %s–%s, %s", inUnits(metric, j.Low), inUnits(metric, j.High), basisText(j))
	pct := baseline.PercentChange(j.Value, j.Median)
	switch {
	case metric == MetricTopValueShare:
		// A mix is read as shares: "97% of rows, usually 40–45%".
		at := ""
		if j.Slot != "" {
			at = " at " + j.Slot
		}
		return fmt.Sprintf(", usually %s–%s%s (median %s; %s)", percent(math.Max(0, j.Low)), percent(math.Min(1, j.High)), at,
			percent(j.Median), basisText(j))
	case isRate(metric), math.IsNaN(pct):
		// A rate's move is read as rates: "against the usual 5.0%", not
		// "260% above".
		return fmt.Sprintf(", against %s of %s (%s)", usual, inUnits(metric, j.Median), bounds)
	case pct >= 0:
		return fmt.Sprintf(", %s above %s (median %s; %s)", pctText(pct), usual, inUnits(metric, j.Median), bounds)
	}
	return fmt.Sprintf(", %s below %s (median %s; %s)", pctText(-pct), usual, inUnits(metric, j.Median), bounds)
}

func pctText(p float64) string {
	if p >= 10 {
		return fmt.Sprintf("%.0f%%", p)
	}
	return fmt.Sprintf("%.1f%%", p)
}

// spanText is " for 28 days" (or hours) from since to at; empty when unknown.
func spanText(since, at time.Time) string {
	if since.IsZero() || !at.After(since) {
		return ""
	}
	d := at.Sub(since)
	if d >= 48*time.Hour {
		return fmt.Sprintf(" for %d days", int(d.Hours()/24))
	}
	return fmt.Sprintf(" for %d hours", int(math.Round(d.Hours())))
}

func message(plan *ScanPlan, pc PlannedCheck, focus *judged, buckets []judged) string {
	o := focus.obs
	text := subject(pc, o) + where(plan, o)
	switch focus.status {
	case Fail:
		if o.Metric == MetricRowCount && pc.Spec.StayEmpty != "" {
			// The broken rule already says what was seen against what was
			// expected: "0 rows in every check for 28 days, 18,940 now".
			text = focus.broken
			break
		}
		text += " (expectation: " + focus.explicit + ")"
	case Anomalous:
		text += moveText(o.Metric, focus.j, focus.slot.at)
	case Pass:
		switch {
		case focus.skip != "":
			text += "; " + focus.skip
		case o.Metric == MetricRowCount && pc.Spec.StayEmpty != "":
			text += "; " + focus.explicit
		case len(buckets) > 0:
			text += fmt.Sprintf("; every %s within expectations", plan.Window.Grain) + loneText(plan, buckets)
		case focus.j != nil && focus.j.Verdict == baseline.Normal && focus.j.Basis == baseline.AlwaysZero:
			text += fmt.Sprintf(" (%s in every earlier check)", inUnits(o.Metric, 0))
		case focus.j != nil && focus.j.Verdict == baseline.Normal:
			text += fmt.Sprintf(", expected %s–%s", inUnits(o.Metric, focus.j.Low), inUnits(o.Metric, focus.j.High))
		}
	case Learning:
		// Not judged is said first: the value after it is not an all-clear.
		text = notJudgedWhy(plan, focus) + "; " + text
	}
	if (focus.status == Fail || focus.status == Anomalous) && !o.Total {
		text += trend(plan, buckets)
	}
	if pc.Spec.Inferred && o.Metric == MetricDuplicateRate && o.Count > 0 && focus.status != Anomalous && focus.skip == "" {
		text += "; the key was inferred: declare it with set_quality_expectations if it must be unique"
	}
	return text
}

// notJudgedWhy says why an observation was not judged, beginning "not
// judged".
func notJudgedWhy(plan *ScanPlan, jd *judged) string {
	o := jd.obs
	switch {
	case plan.rewritten && o.Metric == MetricRowCount:
		return fmt.Sprintf("not judged as volume: %s records each row's latest change, so rows per %s are the rows last changed then, not arrivals",
			plan.Window.Column, orWindow(plan.Window.Grain))
	case jd.partial && o.Metric == MetricRowCount:
		return "not judged: the period has not ended, so its volume is not judged yet"
	case jd.partial && isProfileMetric(o.Metric):
		return "not judged: the period has not ended, and the values of its first rows are not its whole mix"
	case jd.skip != "":
		return jd.skip
	}
	n, need := 0, 0
	if jd.j != nil {
		n = jd.j.History
	}
	if need = baselineOptions(o.Metric, jd.slot.trainBefore).MinPoints; need <= 0 {
		need = baseline.DefaultMinPoints
	}
	return fmt.Sprintf("not judged: too little history yet (%d earlier points, %d needed)", n, need)
}

// wholeWindowNote is added to a result that passed on its buckets while
// its window value was not judged, so the pass is not read as a judgement
// of the window and the "not judged" is not read as the result's.
func wholeWindowNote(plan *ScanPlan, total *judged) string {
	why := strings.TrimPrefix(notJudgedWhy(plan, total), "not judged: ")
	return fmt.Sprintf(" (the window as a whole is not judged: %s)", why)
}

// loneText names the buckets that were outside their expected range on
// their own and passed for it (demoteLoneBuckets), so a pass says so.
func loneText(plan *ScanPlan, buckets []judged) string {
	var at []string
	for _, b := range buckets {
		if b.lone {
			at = append(at, strings.TrimPrefix(strings.TrimPrefix(where(plan, b.obs), " at "), " on "))
		}
	}
	if len(at) == 0 {
		return ""
	}
	return fmt.Sprintf(" but %s, outside the expected range alone: among many %ss judged that is chance, not a problem unless a neighbouring %s is too",
		joinAnd(at), plan.Window.Grain, plan.Window.Grain)
}

// trend describes the run of failing or anomalous buckets at the end of
// the window: since when, and whether it is rising bucket by bucket.
func trend(plan *ScanPlan, buckets []judged) string {
	end := len(buckets)
	for end > 0 && buckets[end-1].status != Fail && buckets[end-1].status != Anomalous {
		end--
	}
	start := end
	for start > 0 && (buckets[start-1].status == Fail || buckets[start-1].status == Anomalous) {
		start--
	}
	run := buckets[start:end]
	if len(run) < 2 {
		return ""
	}
	rising := true
	for i := 1; i < len(run); i++ {
		if run[i].obs.Value <= run[i-1].obs.Value {
			rising = false
			break
		}
	}
	since := strings.TrimPrefix(where(plan, run[0].obs), " at ")
	since = strings.TrimPrefix(since, " on ")
	if rising {
		return fmt.Sprintf(", rising %s by %s since %s", plan.Window.Grain, plan.Window.Grain, since)
	}
	return fmt.Sprintf(", in every %s since %s", plan.Window.Grain, since)
}

// summarize sets the report's status, problems and summary.
func summarize(rep *Report, plan *ScanPlan) {
	rep.Status = Learning
	found := map[Problem][]MetricResult{}
	checked := map[Problem]bool{}
	learning, unjudged := 0, false
	for _, r := range rep.Results {
		// Rows counted by their latest change were not checked as volume.
		if plan.rewritten && r.Metric == MetricRowCount && r.Status == Learning {
			unjudged = true
			continue
		}
		checked[r.Problem] = true
		if r.Status.rank() > rep.Status.rank() {
			rep.Status = r.Status
		}
		switch r.Status {
		case Fail, Anomalous:
			found[r.Problem] = append(found[r.Problem], r)
		case Learning:
			learning++
		}
	}
	var b strings.Builder
	b.WriteString(rep.Table + windowPhrase(plan) + ": ")
	// Too little history is said first when nothing was found: "no problem
	// in 12 checks" over 12 unjudged results would read as an all-clear.
	judged := len(rep.Results) - learning
	if unjudged {
		judged--
	}
	// The results counted here are exactly those whose message begins
	// "not judged" (status learning).
	var which []string
	for _, r := range rep.Results {
		if r.Status == Learning && len(which) < 5 {
			which = append(which, r.label())
		}
	}
	if learning > len(which) {
		which = append(which, fmt.Sprintf("%d more", learning-len(which)))
	}
	if len(found) == 0 && learning > 0 {
		if judged <= 0 {
			// Nothing was judged: the report's status says so too.
			rep.Status = NotJudged
			fmt.Fprintf(&b, "NOT JUDGED: none of the %d results was judged (%s), so this is not an all-clear. "+
				"Record the table's history first (run_quality_check with since and until over the weeks before, bucket hour, no_incident true), or set expectations (set_quality_expectations), then check again.",
				learning, strings.Join(which, ", "))
			rep.Summary = b.String()
			return
		}
		fmt.Fprintf(&b, "Partly judged: %d of %d results not judged (%s); of the %d judged, ", learning, len(rep.Results), strings.Join(which, ", "), judged)
	}
	var normal []string
	for _, p := range problemOrder {
		rs := found[p]
		if len(rs) == 0 {
			if checked[p] && p != ProblemValues {
				normal = append(normal, string(p))
			}
			continue
		}
		rep.Problems = append(rep.Problems, p)
		// Lead with a broken expectation over an anomaly.
		lead := rs[0]
		for _, r := range rs {
			if r.Status == Fail {
				lead = r
				break
			}
		}
		fmt.Fprintf(&b, "%s problem: %s", capitalize(string(p)), lead.Message)
		switch len(rs) {
		case 1:
		case 2:
			fmt.Fprintf(&b, "; 1 more %s result", p)
		default:
			fmt.Fprintf(&b, "; %d more %s results", len(rs)-1, p)
		}
		b.WriteString(". ")
	}
	if len(rep.Problems) > 0 {
		if len(normal) > 0 {
			b.WriteString(capitalize(joinAnd(normal)) + " normal.")
		}
	} else {
		kinds := []string{}
		for _, p := range []Problem{ProblemVolume, ProblemNulls, ProblemUniqueness, ProblemFreshness} {
			if checked[p] {
				noun := string(p)
				if p == ProblemNulls {
					noun = "null"
				}
				kinds = append(kinds, noun)
			}
		}
		fmt.Fprintf(&b, "no %s problem in %d checks", joinOr(kinds), judged)
		if !checked[ProblemFreshness] {
			b.WriteString(" (freshness not checked: no time column known)")
		}
		b.WriteString(". If a number still looks wrong, it is a value problem: check that metric itself against its own history next, not this table's shape.")
	}
	if unjudged {
		fmt.Fprintf(&b, " Volume is not judged per %s: %s records each row's latest change (the table holds current state), so rows rewritten later leave earlier %ss; the row count of the whole table (no period) is judged against earlier checks instead.",
			orWindow(plan.Window.Grain), plan.Window.Column, orWindow(plan.Window.Grain))
	}
	if learning > 0 && len(found) > 0 {
		fmt.Fprintf(&b, " %d of %d results not judged (%s).", learning, len(rep.Results), strings.Join(which, ", "))
	}
	rep.Summary = strings.TrimSpace(b.String())
}

func windowPhrase(plan *ScanPlan) string {
	w := plan.Window
	if w.Start.IsZero() {
		return ""
	}
	s := fmt.Sprintf(" (%s, %s to %s UTC", w.Column, w.Start.Format("2006-01-02 15:04"), w.End.Format("2006-01-02 15:04"))
	if w.Grain != Whole {
		s += ", by " + string(w.Grain)
	}
	return s + ")"
}

// orWindow names a grain for a sentence; the window itself when unbucketed.
func orWindow(g Grain) string {
	if g == Whole {
		return "window"
	}
	return string(g)
}

func joinAnd(xs []string) string { return joinWith(xs, "and") }
func joinOr(xs []string) string  { return joinWith(xs, "or") }

func joinWith(xs []string, word string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " " + word + " " + xs[len(xs)-1]
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// label names a result for a person: its metric and dimension, or the
// check's own name when a result carries no metric (an expectation that
// could not be judged), so a list of them never shows blanks.
func (r MetricResult) label() string {
	name := string(r.Metric)
	if name == "" {
		return r.Check
	}
	if r.Dimension != "" {
		name += "(" + r.Dimension + ")"
	}
	return name
}
