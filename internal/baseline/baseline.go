// Package baseline judges a metric's value against the metric's own
// history: a robust centre and spread (median and MAD), seasonal by hour of
// week or hour of day once there is enough history, and a rule for values
// that were zero in every earlier check.
//
// It knows nothing about warehouses or checks: dw-quality feeds it table
// metrics, dw-incidents feeds it team metrics, both as time-stamped points.
//
// Robust statistics, because history contains incidents: a day of zeros or
// a spike moves a mean and a standard deviation, but barely moves a median,
// so an incident does not teach the baseline that it is normal. And the
// period being judged never trains its own baseline (Options.TrainBefore).
package baseline

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Point is one value of a series: At is the bucket start for bucketed
// metrics, or the observation time for snapshots.
type Point struct {
	At    time.Time `json:"at" jsonschema:"bucket start or observation time"`
	Value float64   `json:"value" jsonschema:"the metric's value"`
}

// Direction says which departures from the baseline are problems.
type Direction string

// Directions.
const (
	// Both flags values above and below the expected range.
	Both Direction = "both"
	// Up flags only values above it (null rates, lag, duplicates).
	Up Direction = "up"
	// Down flags only values below it.
	Down Direction = "down"
)

// Verdict is the outcome of scoring one value.
type Verdict string

// Verdicts.
const (
	Normal    Verdict = "normal"
	Anomalous Verdict = "anomalous"
	// Learning means too little history to judge: the value is recorded
	// and will be part of the baseline for later checks.
	Learning Verdict = "learning"
)

// Basis names which history a value was judged against.
type Basis string

// Bases, from most to least specific.
const (
	// HourOfWeek: earlier points in the same weekday and hour.
	HourOfWeek Basis = "hour_of_week"
	// HourOfDay: earlier points in the same hour of any day.
	HourOfDay Basis = "hour_of_day"
	// All: every earlier point.
	All Basis = "all"
	// AlwaysZero: every earlier point was exactly zero.
	AlwaysZero Basis = "always_zero"
)

// Options tune one judgement. The zero value works: defaults are filled
// in by Score.
type Options struct {
	// TrainBefore excludes points at or after it from the baseline, so
	// the window being judged (today's hours, an incident's day) never
	// trains its own baseline. When zero, the judged time itself is used.
	TrainBefore time.Time
	// Threshold is how many robust standard deviations from the median a
	// value may be before it is anomalous. Default 3.5.
	Threshold float64
	// Direction says which departures matter. Default Both.
	Direction Direction
	// ZeroRule judges a series that was zero in every earlier check: any
	// non-zero value is anomalous however small, because "0% in every
	// earlier check" is a stronger expectation than a spread can express.
	ZeroRule bool
	// MinPoints is the least history needed to judge. Default 6.
	MinPoints int
	// RelativeFloor is the smallest spread, as a fraction of the median,
	// so a perfectly steady series does not flag every tiny wobble.
	// Default 0.02.
	RelativeFloor float64
	// AbsoluteFloor is the smallest spread in the metric's own units.
	AbsoluteFloor float64
	// Location sets the clock that hour-of-day and weekday are read in.
	// Default UTC.
	Location *time.Location
}

// Seasonal slots need this many points before they are trusted.
const (
	// Three weeks give a slot median that is itself noise; four is the
	// least that separates a weekly pattern from chance.
	minHourOfWeek = 4
	minHourOfDay  = 7
)

// madScale turns a median absolute deviation into a standard deviation
// for normally distributed noise.
const madScale = 1.4826

// Judgement is the verdict on one value and what it was judged against.
type Judgement struct {
	Verdict Verdict `json:"verdict" jsonschema:"normal, anomalous or learning (too little history)"`
	Value   float64 `json:"value" jsonschema:"the value judged"`
	// Median and Spread describe the baseline: Spread is the scaled MAD
	// after the floors.
	Median float64 `json:"median" jsonschema:"median of the history judged against"`
	Spread float64 `json:"spread" jsonschema:"robust standard deviation (1.4826 x MAD), after floors"`
	Low    float64 `json:"low" jsonschema:"lowest expected value"`
	High   float64 `json:"high" jsonschema:"highest expected value"`
	// Score is (value - median) / spread.
	Score float64 `json:"score" jsonschema:"robust z-score of the value"`
	// N is how many points the baseline was computed from; History is
	// how many earlier points were available in all.
	N        int    `json:"n" jsonschema:"points in the baseline"`
	History  int    `json:"history" jsonschema:"earlier points available"`
	Basis    Basis  `json:"basis,omitempty" jsonschema:"hour_of_week, hour_of_day, all or always_zero"`
	Seasonal bool   `json:"seasonal" jsonschema:"whether the baseline used only the same hour (of week or day)"`
	Reason   string `json:"reason" jsonschema:"one sentence explaining the verdict"`
}

func (o *Options) defaults() {
	if o.Threshold <= 0 {
		o.Threshold = 3.5
	}
	if o.Direction == "" {
		o.Direction = Both
	}
	if o.MinPoints <= 0 {
		o.MinPoints = 6
	}
	if o.RelativeFloor <= 0 {
		o.RelativeFloor = 0.02
	}
	if o.AbsoluteFloor <= 0 {
		// Keeps scores finite for a series that never moved.
		o.AbsoluteFloor = 1e-9
	}
	if o.Location == nil {
		o.Location = time.UTC
	}
}

// Score judges value, observed for the bucket or moment at, against
// history. Points at or after opts.TrainBefore (or at, when unset) are
// ignored, as are NaNs.
func Score(history []Point, at time.Time, value float64, opts Options) Judgement {
	opts.defaults()
	cutoff := opts.TrainBefore
	if cutoff.IsZero() {
		cutoff = at
	}
	train := make([]Point, 0, len(history))
	for _, p := range history {
		if p.At.Before(cutoff) && !math.IsNaN(p.Value) && !math.IsInf(p.Value, 0) {
			train = append(train, p)
		}
	}
	j := Judgement{Value: value, History: len(train)}
	if len(train) < opts.MinPoints {
		j.Verdict = Learning
		j.N = len(train)
		j.Reason = fmt.Sprintf("%d earlier points; %d needed before values are judged", len(train), opts.MinPoints)
		return j
	}

	if opts.ZeroRule && allZero(train) {
		j.Basis = AlwaysZero
		j.N = len(train)
		if value == 0 || (value < 0 && opts.Direction == Up) || (value > 0 && opts.Direction == Down) {
			j.Verdict = Normal
			j.Reason = fmt.Sprintf("0, as in every one of %d earlier points", len(train))
			return j
		}
		j.Verdict = Anomalous
		j.Score = clampScore(math.Copysign(math.Inf(1), value))
		j.Reason = fmt.Sprintf("%s where every one of %d earlier points was 0", formatValue(value), len(train))
		return j
	}

	slot, basis := seasonalSlot(train, at, opts.Location)
	j.Basis, j.Seasonal, j.N = basis, basis != All, len(slot)
	values := valuesOf(slot)
	med := median(values)
	spread := madScale * mad(values, med)
	// A slot of three points can have a MAD near zero by chance; the noise
	// of the whole series around its own seasonal centres is a floor that
	// does not depend on that luck.
	if pooled := pooledSpread(train, basis, opts.Location); pooled > spread {
		spread = pooled
	}
	spread = math.Max(spread, math.Max(opts.RelativeFloor*math.Abs(med), opts.AbsoluteFloor))

	j.Median, j.Spread = med, spread
	j.Low, j.High = med-opts.Threshold*spread, med+opts.Threshold*spread
	if minValue(values) >= 0 && j.Low < 0 {
		j.Low = 0
	}
	j.Score = clampScore((value - med) / spread)
	above, below := value > j.High, value < j.Low
	switch {
	case above && opts.Direction != Down, below && opts.Direction != Up:
		j.Verdict = Anomalous
		word := "above"
		if below {
			word = "below"
		}
		j.Reason = fmt.Sprintf("%s is %s the expected %s–%s (%s, %d points)", formatValue(value), word, formatValue(j.Low), formatValue(j.High), describeBasis(basis), j.N)
	default:
		j.Verdict = Normal
		j.Reason = fmt.Sprintf("%s is within the expected %s–%s (%s, %d points)", formatValue(value), formatValue(j.Low), formatValue(j.High), describeBasis(basis), j.N)
	}
	return j
}

// seasonalSlot picks the most specific history with enough points: the
// same hour of the week, else the same hour of the day, else everything.
func seasonalSlot(train []Point, at time.Time, loc *time.Location) ([]Point, Basis) {
	at = at.In(loc)
	var week, day []Point
	for _, p := range train {
		t := p.At.In(loc)
		if t.Hour() != at.Hour() {
			continue
		}
		day = append(day, p)
		if t.Weekday() == at.Weekday() {
			week = append(week, p)
		}
	}
	switch {
	case len(week) >= minHourOfWeek:
		return week, HourOfWeek
	case len(day) >= minHourOfDay:
		return day, HourOfDay
	}
	return train, All
}

// pooledSpread is the scaled MAD of every point's distance from the median
// of its own slot under basis, over slots big enough to have a median.
func pooledSpread(train []Point, basis Basis, loc *time.Location) float64 {
	if basis == All {
		return 0
	}
	slots := map[int][]float64{}
	for _, p := range train {
		t := p.At.In(loc)
		k := t.Hour()
		if basis == HourOfWeek {
			k += 24 * int(t.Weekday())
		}
		slots[k] = append(slots[k], p.Value)
	}
	var residuals []float64
	for _, vs := range slots {
		if len(vs) < minHourOfWeek {
			continue
		}
		m := median(vs)
		for _, v := range vs {
			residuals = append(residuals, math.Abs(v-m))
		}
	}
	if len(residuals) == 0 {
		return 0
	}
	return madScale * median(residuals)
}

func describeBasis(b Basis) string {
	switch b {
	case HourOfWeek:
		return "same hour of the week"
	case HourOfDay:
		return "same hour of the day"
	case AlwaysZero:
		return "always zero"
	}
	return "all earlier points"
}

func allZero(ps []Point) bool {
	for _, p := range ps {
		if p.Value != 0 {
			return false
		}
	}
	return true
}

func valuesOf(ps []Point) []float64 {
	out := make([]float64, len(ps))
	for i, p := range ps {
		out[i] = p.Value
	}
	return out
}

func minValue(vs []float64) float64 {
	m := math.Inf(1)
	for _, v := range vs {
		m = math.Min(m, v)
	}
	return m
}

// median sorts a copy; histories are a few thousand points at most.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func mad(vs []float64, med float64) float64 {
	dev := make([]float64, len(vs))
	for i, v := range vs {
		dev[i] = math.Abs(v - med)
	}
	return median(dev)
}

// clampScore keeps scores JSON-encodable: an infinite score means the same
// as a very large one to a reader.
func clampScore(s float64) float64 {
	const limit = 1e6
	switch {
	case math.IsNaN(s):
		return 0
	case s > limit:
		return limit
	case s < -limit:
		return -limit
	}
	return s
}

// formatValue prints a value compactly for reasons: integers without
// decimals, small fractions with enough digits to tell them apart.
func formatValue(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.4g", v)
}
