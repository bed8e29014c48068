package checks

import (
	"slices"
	"testing"
)

// A result without a metric (an expectation that could not be judged) is
// named by its check in the "not judged" list, never as a blank.
func TestNotJudgedListNamesEveryResult(t *testing.T) {
	rep := &Report{Table: "shop.orders"}
	var want []string
	for _, c := range []string{"row_count", "unique(order_id)", "not_null(customer_id)"} {
		rep.Results = append(rep.Results, MetricResult{Check: c, Status: Learning})
		want = append(want, c)
	}
	rep.Results = append(rep.Results, MetricResult{Check: "null_rate(amount)", Metric: "null_rate", Dimension: "amount", Status: Learning})
	want = append(want, "null_rate(amount)")
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.label())
	}
	if !slices.Equal(got, want) {
		t.Errorf("labels %q, want %q", got, want)
	}
	summarize(rep, &ScanPlan{})
	if rep.Status != NotJudged {
		t.Errorf("status %s, want not_judged", rep.Status)
	}
}
