package lineage

import (
	"fmt"
	"strings"
	"testing"
)

// AddWarnings counts every warning and keeps the first within the count
// and character budget, across calls; one long warning is still kept.
func TestAddWarningsKeepsTheFirstAndCountsAll(t *testing.T) {
	var s ImportStats
	for i := range 3000 {
		s.AddWarnings(fmt.Sprintf("model.wide.m%04d depends on a macro", i))
	}
	s.AddWarnings("one more", "and another")
	if s.WarningsTotal != 3002 || len(s.Warnings) != maxWarnings || s.Warnings[0] != "model.wide.m0000 depends on a macro" {
		t.Errorf("%d kept of %d, first %q", len(s.Warnings), s.WarningsTotal, s.Warnings[0])
	}
	var long ImportStats
	long.AddWarnings(strings.Repeat("x", 2*warningsBudget), "short")
	if long.WarningsTotal != 2 || len(long.Warnings) != 1 {
		t.Errorf("a long first warning: %d kept of %d", len(long.Warnings), long.WarningsTotal)
	}
	chars := 0
	for _, w := range s.Warnings {
		chars += len(w)
	}
	if chars > warningsBudget {
		t.Errorf("kept %d characters of warnings, over %d", chars, warningsBudget)
	}
}
