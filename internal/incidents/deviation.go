package incidents

import (
	"cmp"
	"math"
	"slices"
)

// Deviation is how far a symptom's observed value lies outside its
// expected range, relative to the range's width (at least 1% of the
// expected value, so a flat baseline does not make every miss infinite);
// without a range, the plain distance from the expected value. Inside the
// range it is 0.
func (s Symptom) Deviation() float64 {
	width := math.Max(s.ExpectedHigh-s.ExpectedLow, math.Abs(s.Expected)*0.01)
	switch {
	case width <= 0:
		return math.Abs(s.Observed - s.Expected)
	case s.Observed > s.ExpectedHigh:
		return (s.Observed - s.ExpectedHigh) / width
	case s.Observed < s.ExpectedLow:
		return (s.ExpectedLow - s.Observed) / width
	}
	return 0
}

// ByDeviation is a copy of syms, largest Deviation first; symptoms that
// deviate alike keep their order.
func ByDeviation(syms []Symptom) []Symptom {
	out := slices.Clone(syms)
	slices.SortStableFunc(out, func(a, b Symptom) int { return cmp.Compare(b.Deviation(), a.Deviation()) })
	return out
}
