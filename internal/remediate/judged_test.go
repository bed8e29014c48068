package remediate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/incidents"
)

// A table created this morning has no history: every re-check of it runs
// but none can be judged. Nothing failed, yet nothing was judged either,
// so the fix is "not verifiable yet", naming the table and what is
// missing; the incident stays fixing, and the receipt records the outcome.
func TestNothingJudgedIsNotVerifiableYet(t *testing.T) {
	f := newFixture(t)
	f.exec("CREATE SCHEMA IF NOT EXISTS shop",
		"CREATE TABLE shop.signups (id BIGINT, plan VARCHAR, created_at TIMESTAMP)",
		fmt.Sprintf(`INSERT INTO shop.signups SELECT i, 'free', TIMESTAMP '%s' + to_seconds(i * 40) FROM range(1400) t(i)`, day.Format("2006-01-02 15:04:05")))
	id, props := f.incident([]incidents.Symptom{{Kind: incidents.SymptomVolume, Asset: "duckdb://shop.signups", Metric: checks.MetricRowCount,
		Observed: 20, At: bad, Source: "run_quality_check", Detail: "20 rows at 14:00"}}, hold("duckdb://shop.signups"))
	f.approve(props[0])
	f.clk.Set(day.Add(16*time.Hour + 5*time.Minute))
	res := f.verify(id)
	v := res.Verification
	if v.Verified || v.Outcome != incidents.OutcomeNotVerifiable || res.Incident.Status != incidents.StatusFixing || len(v.Failures) != 0 {
		t.Fatalf("outcome %s, status %s, failures %+v (%s)", v.Outcome, res.Incident.Status, v.Failures, v.Reason)
	}
	named := false
	for _, u := range v.Unjudged {
		named = named || strings.HasPrefix(u, "duckdb://shop.signups: none of its")
	}
	if !named {
		t.Errorf("unjudged %q does not name the table and what is missing", v.Unjudged)
	}
	if res.Receipt.Seq == 0 {
		t.Error("no receipt entry for a verification that was not verifiable")
	}
	// Not verifiable is not final: the owners call again later.
	if inc, _ := f.env.Incidents.GetIncident(f.ctx, id); inc.Status != incidents.StatusFixing {
		t.Errorf("stored status %s, want fixing", inc.Status)
	}
}
