package incidents

import (
	"testing"

	"github.com/dataworkers/dw/internal/checks"
)

// Both metrics of a load lag check are load lag, so verification re-runs
// the lag check for either, never the table's staleness; staleness stays
// freshness.
func TestLoadLagMetricsAreLoadLag(t *testing.T) {
	for metric, want := range map[string]SymptomKind{
		checks.MetricLagAvg: SymptomLoadLag, checks.MetricLagP95: SymptomLoadLag, "staleness_seconds": SymptomFreshness,
	} {
		if got := checkSymptomKind(checks.MetricResult{Problem: checks.ProblemFreshness, Metric: metric}); got != want {
			t.Errorf("%s is a %s symptom, want %s", metric, got, want)
		}
	}
}
