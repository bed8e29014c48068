package incidents

import "testing"

func TestDeviation(t *testing.T) {
	for _, c := range []struct {
		name string
		s    Symptom
		want float64
	}{
		{"above the range, in widths", Symptom{Observed: 130, Expected: 100, ExpectedLow: 90, ExpectedHigh: 110}, 1},
		{"below the range", Symptom{Observed: 60, Expected: 100, ExpectedLow: 90, ExpectedHigh: 110}, 1.5},
		{"inside the range", Symptom{Observed: 105, Expected: 100, ExpectedLow: 90, ExpectedHigh: 110}, 0},
		{"flat baseline: 1% of expected is the width", Symptom{Observed: 102, Expected: 100, ExpectedLow: 100, ExpectedHigh: 100}, 2},
		{"no range at all", Symptom{Observed: 0.8}, 0.8},
	} {
		if got := c.s.Deviation(); got != c.want {
			t.Errorf("%s: %g, want %g", c.name, got, c.want)
		}
	}
}

func TestByDeviation(t *testing.T) {
	in := []Symptom{
		{Metric: "a", Observed: 105, ExpectedLow: 90, ExpectedHigh: 110},
		{Metric: "b", Observed: 200, ExpectedLow: 90, ExpectedHigh: 110},
		{Metric: "c", Observed: 100, ExpectedLow: 90, ExpectedHigh: 110},
		{Metric: "d", Observed: 120, ExpectedLow: 90, ExpectedHigh: 110},
	}
	got := ByDeviation(in)
	order := ""
	for _, s := range got {
		order += s.Metric
	}
	if order != "bdac" {
		t.Errorf("order %s, want bdac (largest deviation first, ties in their order)", order)
	}
	if in[0].Metric != "a" || in[1].Metric != "b" {
		t.Error("ByDeviation reordered its argument")
	}
}
