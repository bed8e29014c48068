package remediate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/incidents"
)

// A metric's definition is recorded with every verification that computes
// it (its SQL's SHA-256, when and by whom it was defined), and one
// redefined after the incident's onset is stated in the verdict, the
// answer and the receipt with who redefined it. Defining it again
// unchanged after the onset is no redefinition; a metric defined before
// the onset and left alone carries no caveat.
func TestMetricRedefinedAfterTheOnsetIsStated(t *testing.T) {
	const recovered = `SELECT date_trunc('hour', created_at) AS hour, sum(coalesce(amount, 0)) AS revenue FROM shop.orders_v2 GROUP BY 1`
	for _, c := range []struct {
		name      string
		redefine  string // the SQL defined after the onset; "" for none
		redefined bool
	}{
		{"left alone", "", false},
		{"defined again unchanged", plainRevenue, false},
		{"redefined", recovered, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			revenueTables(t, f)
			revenueMetric(t, f, plainRevenue)
			id, props := f.incident(revenueSymptoms()[1:], hold("duckdb://shop.orders"))
			f.approve(props[0])
			sql := plainRevenue
			if c.redefine != "" {
				f.clk.Set(day.Add(16*time.Hour + 30*time.Minute))
				if _, err := f.env.Incidents.DefineMetric(f.ctx, incidents.DefineMetricParams{Name: "orders_revenue", Description: "revenue per hour",
					Asset: "duckdb://shop.orders", Warehouse: "wh", SQL: c.redefine, ValueColumn: "revenue", TimeColumn: "hour", Direction: "down",
					By: "Pat Owner (pat), OS user pat"}); err != nil {
					t.Fatal(err)
				}
				sql = c.redefine
			}
			f.clk.Set(day.Add(17*time.Hour + 5*time.Minute))
			res := f.verify(id)
			t.Logf("outcome %s: %s", res.Verification.Outcome, res.Verification.Reason)

			sum := sha256.Sum256([]byte(sql))
			i := slices.IndexFunc(res.Metrics, func(m MetricUsed) bool { return m.Name == "orders_revenue" })
			if i < 0 {
				t.Fatalf("metrics used %+v lack orders_revenue", res.Metrics)
			}
			m := res.Metrics[i]
			if m.SQLSHA256 != hex.EncodeToString(sum[:]) || m.RedefinedAfterOnset != c.redefined || m.Source != incidents.SourceSQL {
				t.Errorf("orders_revenue used as %+v; want the SHA-256 of the SQL in force and redefined=%v", m, c.redefined)
			}
			// First defined when the fixture's clock starts (after the
			// onset, so only a change counts as a redefinition).
			wantAt, wantBy := bad.Add(65*time.Minute), ""
			if c.redefined {
				wantAt, wantBy = day.Add(16*time.Hour+30*time.Minute), "Pat Owner (pat), OS user pat"
			}
			if !m.DefinedAt.Equal(wantAt) || m.DefinedBy != wantBy {
				t.Errorf("orders_revenue defined at %s by %q, want %s by %q", m.DefinedAt, m.DefinedBy, wantAt, wantBy)
			}
			if got := len(res.Verification.Caveats); c.redefined != (got == 1) || len(res.Caveats) != got {
				t.Fatalf("caveats %q (answer %q), want one only when redefined", res.Verification.Caveats, res.Caveats)
			}
			inc, err := f.env.Incidents.GetIncident(f.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(inc.Verification.Caveats, res.Verification.Caveats) {
				t.Errorf("the incident's stored verdict has caveats %q, want %q", inc.Verification.Caveats, res.Verification.Caveats)
			}

			entries, err := approvals.Entries(f.ctx, f.db, id)
			if err != nil {
				t.Fatal(err)
			}
			last := entries[len(entries)-1]
			var facts struct {
				Metrics []MetricUsed `json:"metric_definitions"`
				Caveats []string     `json:"caveats"`
			}
			if err := json.Unmarshal(last.Payload, &facts); err != nil || last.Kind != EntryVerification {
				t.Fatalf("last receipt entry %s: %v", last.Kind, err)
			}
			if !slices.Equal(facts.Caveats, res.Caveats) || !slices.ContainsFunc(facts.Metrics, func(r MetricUsed) bool {
				return r.Name == m.Name && r.SQLSHA256 == m.SQLSHA256 && r.RedefinedAfterOnset == c.redefined && r.DefinedBy == m.DefinedBy
			}) {
				t.Errorf("receipt records metrics %+v and caveats %q; want %+v and %q", facts.Metrics, facts.Caveats, m, res.Caveats)
			}
		})
	}
}
