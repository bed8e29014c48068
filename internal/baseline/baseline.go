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
	"strconv"
	"strings"
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
	// DayTypeHour: earlier points in the same hour of the same kind of
	// day (weekday or weekend), shrunk toward the same hour of any day
	// when the two barely differ. It needs two weeks, not four.
	DayTypeHour Basis = "day_type_hour"
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
	// Counts says the values are counts of events (rows, orders): a count
	// of 15 where 20 is usual is Poisson noise, so the expected range is
	// never narrower than Poisson noise at the threshold.
	Counts bool
	// Size is how many values the judged value summarises (a mean, median
	// or p95 of the rows of its bucket), and SizeAt the same for an earlier
	// point (false when unknown). A summary of 12 values is noisier than
	// one of 200, and a spread pooled over a day is mostly busy hours: it
	// is widened by sqrt(their usual size / Size), never narrowed.
	Size   float64
	SizeAt func(time.Time) (float64, bool)
}

// DefaultMinPoints is the least history judged when Options.MinPoints is
// unset: six points give a median and a spread that are not one value's.
const DefaultMinPoints = 6

// medianErrorFactor is the variance of a median of n points over the
// variance of one point, times n (pi/2 for normal noise): the slot median
// judged against is itself an estimate, so a new value is expected within
// spread * sqrt(1 + medianErrorFactor/n) of it, not within spread.
const medianErrorFactor = math.Pi / 2

// Seasonal slots need this many points before they are trusted.
const (
	// Three weeks give a slot median that is itself noise; four is the
	// least that separates a weekly pattern from chance.
	minHourOfWeek = 4
	minHourOfDay  = 7
	// Two weeks give four weekend days per hour; three of them (one may
	// be missing) with the pooled spread as a floor are enough for the
	// weekday/weekend split, shrunk toward the hour of day.
	minDayType = 3
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
	N        int   `json:"n" jsonschema:"points in the baseline"`
	History  int   `json:"history" jsonschema:"earlier points available"`
	Basis    Basis `json:"basis,omitempty" jsonschema:"hour_of_week, hour_of_day, all or always_zero"`
	Seasonal bool  `json:"seasonal" jsonschema:"whether the baseline used only the same hour (of week or day)"`
	// Slot names the time the value was compared with, for messages:
	// "Tuesday 11:00", "weekday 11:00", "11:00", or "" for all points.
	Slot string `json:"slot,omitempty" jsonschema:"the time of week or day the value was compared with, e.g. weekday 11:00"`
	// Since is the oldest point of the history available, so a message
	// can say "0 in every check for 28 days".
	Since  time.Time `json:"since,omitzero" jsonschema:"oldest earlier point available"`
	Reason string    `json:"reason" jsonschema:"one sentence explaining the verdict"`

	// mean is the mean of the slot judged against: for a rate of a few
	// events in a quiet hour the median is 0 while the rate is not.
	mean float64
}

func (o *Options) defaults() {
	if o.Threshold <= 0 {
		o.Threshold = 3.5
	}
	if o.Direction == "" {
		o.Direction = Both
	}
	if o.MinPoints <= 0 {
		o.MinPoints = DefaultMinPoints
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
	for _, p := range train {
		if j.Since.IsZero() || p.At.Before(j.Since) {
			j.Since = p.At
		}
	}
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
	j.Slot = slotName(basis, at.In(opts.Location))
	values := valuesOf(slot)
	med := median(values)
	j.mean = mean(values)
	// A slot of three points can have a MAD near zero by chance; the noise
	// of the whole series around its own seasonal centres is a floor that
	// does not depend on that luck. Each is widened for a value that
	// summarises fewer rows than the points it was learnt from.
	spread := widenForSize(madScale*mad(values, med), slot, opts)
	if pooled := widenForSize(pooledSpread(train, basis, opts.Location, med), train, opts); pooled > spread {
		spread = pooled
	}
	if basis == DayTypeHour {
		med = shrinkTowardHour(train, at, opts.Location, med, spread, len(slot))
	}
	spread = math.Max(spread, math.Max(opts.RelativeFloor*math.Abs(med), opts.AbsoluteFloor))
	// The centre is a median of len(slot) points, not the truth.
	predictive := math.Sqrt(1 + medianErrorFactor/float64(len(slot)))
	spread *= predictive

	j.Median, j.Spread = med, spread
	j.Low, j.High = med-opts.Threshold*spread, med+opts.Threshold*spread
	score := (value - med) / spread
	if opts.Counts && med >= 0 && value >= 0 {
		// Counts are never judged tighter than Poisson noise allows. On
		// the Anscombe scale 2*sqrt(x+3/8) a Poisson count has unit
		// spread (the slot median's own error added), so the band is
		// exact enough for small counts too: 0 where 10 is usual is
		// news, 10 where 26 is usual is not.
		root := math.Sqrt(med + 0.375)
		half := opts.Threshold * predictive / 2
		if lo := root - half; lo > 0 {
			j.Low = math.Min(j.Low, lo*lo-0.375)
		} else {
			j.Low = math.Min(j.Low, 0)
		}
		hi := root + half
		j.High = math.Max(j.High, hi*hi-0.375)
		if ps := 2 * (math.Sqrt(value+0.375) - root) / predictive; math.Abs(ps) < math.Abs(score) {
			score = ps
		}
	}
	if minValue(values) >= 0 && j.Low < 0 {
		j.Low = 0
	}
	j.Score = clampScore(score)
	above, below := value > j.High, value < j.Low
	switch {
	case above && opts.Direction != Down, below && opts.Direction != Up:
		j.Verdict = Anomalous
	default:
		j.Verdict = Normal
	}
	j.Reason = describeMove(j)
	return j
}

// widenForSize widens a spread learnt from points for a value that
// summarises fewer rows than they usually did: the noise of a mean or
// median of n values goes as 1/sqrt(n). It never narrows one, as part of
// the noise (a late partition, a batch) does not shrink with more rows.
func widenForSize(spread float64, points []Point, opts Options) float64 {
	if opts.Size <= 0 || opts.SizeAt == nil || spread <= 0 {
		return spread
	}
	var sizes []float64
	for _, p := range points {
		if n, ok := opts.SizeAt(p.At); ok && n > 0 {
			sizes = append(sizes, n)
		}
	}
	if len(sizes) == 0 {
		return spread
	}
	if usual := median(sizes); usual > opts.Size {
		return spread * math.Sqrt(usual/opts.Size)
	}
	return spread
}

// describeMove says how value sits against the usual level in plain
// words: "27% below the usual weekday 11:00 (median 39100; expected
// 32314–46022, 12 points)".
func describeMove(j Judgement) string {
	usual := "the usual level"
	if j.Slot != "" {
		usual = "the usual " + j.Slot
	}
	var move string
	switch pct := PercentChange(j.Value, j.Median); {
	case math.IsNaN(pct):
		move = "against " + usual
	case math.Abs(pct) < 0.5:
		move = "at " + usual
	case pct > 0:
		move = fmt.Sprintf("%s above %s", formatPercent(pct), usual)
	default:
		move = fmt.Sprintf("%s below %s", formatPercent(-pct), usual)
	}
	verdict := "within"
	if j.Verdict == Anomalous {
		verdict = "outside"
	}
	return fmt.Sprintf("%s is %s (median %s); %s the expected %s–%s (%s, %d points)", formatValue(j.Value), move,
		formatValue(j.Median), verdict, formatValue(j.Low), formatValue(j.High), describeBasis(j.Basis), j.N)
}

// PercentChange is how far v is from base, in percent of base; NaN when
// base is zero.
func PercentChange(v, base float64) float64 {
	if base == 0 || math.IsNaN(base) {
		return math.NaN()
	}
	return 100 * (v - base) / math.Abs(base)
}

func formatPercent(p float64) string {
	if p >= 10 {
		return fmt.Sprintf("%.0f%%", p)
	}
	return fmt.Sprintf("%.1f%%", p)
}

// slotName is the time a value is compared with, as a person says it.
func slotName(b Basis, at time.Time) string {
	hour := at.Format("15:00")
	switch b {
	case HourOfWeek:
		return at.Weekday().String() + " " + hour
	case DayTypeHour:
		if weekend(at) {
			return "weekend " + hour
		}
		return "weekday " + hour
	case HourOfDay:
		return hour
	}
	return ""
}

func weekend(t time.Time) bool { return t.Weekday() == time.Saturday || t.Weekday() == time.Sunday }

// shrinkTowardHour pulls the weekday-or-weekend median of a small slot
// toward the median of the same hour on every day, by how little the two
// differ compared with the slot median's own uncertainty (an empirical
// Bayes weight): a real weekend dip stays, a difference that three points
// could show by chance is mostly taken back.
func shrinkTowardHour(train []Point, at time.Time, loc *time.Location, slotMedian, spread float64, n int) float64 {
	at = at.In(loc)
	var day []float64
	for _, p := range train {
		if p.At.In(loc).Hour() == at.Hour() {
			day = append(day, p.Value)
		}
	}
	effect := slotMedian - median(day)
	// The standard error of a median is about 1.25 sigma / sqrt(n).
	se2 := 1.57 * spread * spread / float64(n)
	if se2+effect*effect == 0 {
		return slotMedian
	}
	return slotMedian - effect*se2/(se2+effect*effect)
}

// seasonalSlot picks the most specific history with enough points: the
// same hour of the week, else the same hour of the day, else everything.
func seasonalSlot(train []Point, at time.Time, loc *time.Location) ([]Point, Basis) {
	at = at.In(loc)
	var week, dayType, day []Point
	for _, p := range train {
		t := p.At.In(loc)
		if t.Hour() != at.Hour() {
			continue
		}
		day = append(day, p)
		if weekend(t) == weekend(at) {
			dayType = append(dayType, p)
		}
		if t.Weekday() == at.Weekday() {
			week = append(week, p)
		}
	}
	switch {
	case len(week) >= minHourOfWeek:
		return week, HourOfWeek
	case len(dayType) >= minDayType:
		return dayType, DayTypeHour
	case len(day) >= minHourOfDay:
		return day, HourOfDay
	}
	return train, All
}

// pooledSpread is the scaled MAD of every point's distance from the median
// of its own slot under basis, over slots big enough to have a median. The
// distances are relative to their slot's median (then scaled to med) when
// every slot median is positive: a night hour of 400 rows is not as noisy
// in rows as a midday hour of 1,800.
func pooledSpread(train []Point, basis Basis, loc *time.Location, med float64) float64 {
	if basis == All {
		return 0
	}
	slots := map[int][]float64{}
	for _, p := range train {
		t := p.At.In(loc)
		k := t.Hour()
		switch {
		case basis == HourOfWeek:
			k += 24 * int(t.Weekday())
		case basis == DayTypeHour && weekend(t):
			k += 24
		}
		slots[k] = append(slots[k], p.Value)
	}
	least := minHourOfWeek
	if basis == DayTypeHour {
		least = minDayType
	}
	var residuals, relative []float64
	positive := med > 0
	for _, vs := range slots {
		if len(vs) < least {
			continue
		}
		m := median(vs)
		positive = positive && m > 0
		for _, v := range vs {
			residuals = append(residuals, math.Abs(v-m))
			if m > 0 {
				relative = append(relative, math.Abs(v-m)/m)
			}
		}
	}
	if len(residuals) == 0 {
		return 0
	}
	if positive {
		return madScale * median(relative) * med
	}
	return madScale * median(residuals)
}

func describeBasis(b Basis) string {
	switch b {
	case HourOfWeek:
		return "same hour of the week"
	case DayTypeHour:
		return "same hour on the same kind of day, weekday or weekend"
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

func mean(vs []float64) float64 {
	sum := 0.0
	for _, v := range vs {
		sum += v
	}
	return sum / float64(len(vs))
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
	case math.Abs(v) >= 1e15:
		return fmt.Sprintf("%.4g", v)
	case math.Abs(v) >= 1000 || v == math.Trunc(v):
		// 39,100 rather than 39100.4: thousands are read, not compared
		// to the decimal.
		return Thousands(math.Round(v))
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.4g", v)
}

// Thousands prints a whole number with thousands separators: 39,100.
func Thousands(v float64) string {
	s := strconv.FormatFloat(math.Abs(v), 'f', 0, 64)
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
