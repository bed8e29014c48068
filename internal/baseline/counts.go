package baseline

import (
	"fmt"
	"math"
	"time"
)

// Rates and ratios are judged with their counts: 2 nulls in 10 rows is
// 20%, but it says far less than 200 in 1,000. A rate outside the range its
// history expects is anomalous only if its counts also rule out the usual
// rate, by a Wilson score interval at the judgement's threshold.

// ScoreRate judges count/of (a proportion: nulls in rows, duplicates in
// keys) against the history of the rate.
func ScoreRate(history []Point, at time.Time, count, of float64, opts Options) Judgement {
	opts.defaults()
	value := 0.0
	if of > 0 {
		value = count / of
	}
	j := Score(history, at, value, opts)
	if j.Verdict != Anomalous || j.Basis == AlwaysZero || !isCount(count) || !isCount(of) || of == 0 {
		return j
	}
	lo, hi := Wilson(count, of, opts.Threshold)
	// The usual rate is the slot's median, or its mean when that is the
	// one the counts cannot rule out: a quiet hour's rate of 2% is a median
	// of 0 (most such hours have no event at all), and one event in 27 rows
	// is then not news.
	usual := clamp01(j.Median)
	if mean := clamp01(j.mean); (usual < lo || usual > hi) && mean >= lo && mean <= hi {
		usual = mean
	}
	if usual >= lo && usual <= hi {
		j.Verdict = Normal
		j.Reason = fmt.Sprintf("%s of %s (%s) against the usual %s: too few to tell apart from chance (%s–%s is possible at this count)",
			formatValue(count), formatValue(of), formatRate(value), formatRate(usual), formatRate(lo), formatRate(hi))
	}
	return j
}

// ScoreRatio judges num/den, two counts that normally move together
// (orders and payments), against the history of the ratio. Given their sum,
// num is binomial with the share the usual ratio implies, so a quiet hour
// of 15 against 17 is not told apart from a usual 1:1.
func ScoreRatio(history []Point, at time.Time, num, den float64, opts Options) Judgement {
	opts.defaults()
	j := Score(history, at, num/den, opts)
	if j.Verdict != Anomalous || !isCount(num) || !isCount(den) || j.Median < 0 {
		return j
	}
	n := num + den
	lo, hi := Wilson(num, n, opts.Threshold)
	share := j.Median / (1 + j.Median)
	if share >= lo && share <= hi {
		j.Verdict = Normal
		j.Reason = fmt.Sprintf("%s against %s (ratio %s, usually %s): too few to tell apart from chance", formatValue(num), formatValue(den),
			formatValue(j.Value), formatValue(j.Median))
	}
	return j
}

// Wilson is the Wilson score interval of k successes in n trials at z
// standard errors.
func Wilson(k, n, z float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	p := k / n
	z2 := z * z
	centre := (p + z2/(2*n)) / (1 + z2/n)
	half := z / (1 + z2/n) * math.Sqrt(p*(1-p)/n+z2/(4*n*n))
	return math.Max(0, centre-half), math.Min(1, centre+half)
}

// LooksLikeCounts reports whether every value is a non-negative whole
// number, as counts of events are.
func LooksLikeCounts(points []Point, values ...float64) bool {
	for _, p := range points {
		if !isCount(p.Value) {
			return false
		}
	}
	for _, v := range values {
		if !isCount(v) {
			return false
		}
	}
	return true
}

func isCount(v float64) bool { return v >= 0 && v == math.Trunc(v) && v < 1e15 }

func clamp01(v float64) float64 { return math.Min(1, math.Max(0, v)) }

func formatRate(v float64) string {
	switch p := 100 * v; {
	case p == 0:
		return "0%"
	case p < 0.1:
		return fmt.Sprintf("%.3f%%", p)
	case p < 10:
		return fmt.Sprintf("%.1f%%", p)
	default:
		return fmt.Sprintf("%.0f%%", p)
	}
}
