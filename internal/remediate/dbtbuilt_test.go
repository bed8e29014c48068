package remediate

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
)

// A table dbt builds is known to the graph by its model's id, its table
// name an alias. A symptom a check reports on duckdb://shop.orders is
// recorded under the table (not the model); a hold proposed on the model's
// id is routed by the table's domain (duckdb://*) and stored under the
// table too; and remediate re-runs the checks on that table, so a clean
// replay is verified and one that wrote duplicate keys is escalated,
// exactly as for a table the graph knows by its own name. An incident
// recorded under the model's id (before the table was the id, or by a
// caller that does not name assets) is re-checked on the table the graph
// says the model builds.
func TestReplayOnDBTBuiltTable(t *testing.T) {
	for _, c := range []struct {
		name, symptomAsset string
		named              bool // the incidents service names assets through the graph
		want               string
	}{
		{"symptom on the table", "duckdb://shop.orders", true, "duckdb://wh.shop.orders"},
		{"symptom on the model", "dbt://model.shop.orders", true, "duckdb://wh.shop.orders"},
		{"recorded under the model", "dbt://model.shop.orders", false, "dbt://model.shop.orders"},
	} {
		for _, dups := range []int{0, 12} {
			t.Run(fmt.Sprintf("%s, %d duplicates", c.name, dups), func(t *testing.T) {
				f := newFixture(t)
				g := lineage.New(f.db, f.clk)
				if _, err := g.RecordLineage(f.ctx, lineage.Note{Assets: []lineage.NoteAsset{{ID: "dbt://model.shop.orders", Aliases: []string{"duckdb://wh.shop.orders"}}},
					Path: []string{"dbt://model.shop.orders", "sigma://workbook/rev"}}); err != nil {
					t.Fatal(err)
				}
				if c.named {
					f.env.Incidents.Graph = incidents.LineageGraph(g, lineage.NamesFromConfig(f.cfg))
				}
				missing := orders(t, f, "shop.orders", 80)
				f.expect("shop.orders", checks.Expectations{Key: []string{"order_id"}, EventTime: "created_at", IngestTime: "ingested_at"})
				id, props := f.incident([]incidents.Symptom{{Kind: incidents.SymptomVolume, Asset: c.symptomAsset, Metric: checks.MetricRowCount,
					Observed: 80, Expected: 200, ExpectedLow: 170, ExpectedHigh: 230, At: bad, Source: "run_quality_check",
					Detail: "80 rows at 14:00, usually about 200"}}, hold("dbt://model.shop.orders"))
				inc, err := f.env.Incidents.GetIncident(f.ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(inc.Assets, []string{c.want}) {
					t.Fatalf("incident recorded on %v, want %s", inc.Assets, c.want)
				}
				if p := props[0]; p.Domain != "shop" || !slices.Equal(p.Targets, []string{"duckdb://wh.shop.orders"}) {
					t.Fatalf("the hold on the model is in domain %q with targets %v, want shop and the table", p.Domain, p.Targets)
				}
				f.approve(props[0])
				fix := []string{"INSERT INTO shop.orders VALUES " + strings.Join(missing, ",")}
				if dups > 0 {
					fix = append(fix, fmt.Sprintf(`INSERT INTO shop.orders SELECT order_id, amount, TIMESTAMP '%s', TIMESTAMP '%s' FROM shop.orders
						WHERE created_at >= TIMESTAMP '%s' AND created_at < TIMESTAMP '%s' ORDER BY order_id LIMIT %d`,
						bad.Add(59*time.Minute).Format("2006-01-02 15:04:05"), bad.Add(59*time.Minute+30*time.Second).Format("2006-01-02 15:04:05"),
						bad.Add(-time.Hour).Format("2006-01-02 15:04:05"), bad.Format("2006-01-02 15:04:05"), dups))
				}
				f.exec(fix...)
				f.clk.Set(day.Add(16*time.Hour + 5*time.Minute))
				res := f.verify(id)
				if dups == 0 {
					if res.Verification.Outcome != incidents.OutcomeVerified {
						t.Fatalf("a clean replay is %s: %s", res.Verification.Outcome, res.Verification.Reason)
					}
					return
				}
				if res.Verification.Outcome != incidents.OutcomeEscalated || len(res.Verification.Failures) == 0 {
					t.Fatalf("a replay that wrote %d duplicate keys is %s: %s", dups, res.Verification.Outcome, res.Verification.Reason)
				}
				for _, fl := range res.Verification.Failures {
					if !fl.Required || !strings.HasPrefix(fl.Name, "uniqueness(order_id)") || fl.Asset != c.want {
						t.Errorf("failure %+v: want only the declared key on %s", fl, c.want)
					}
				}
			})
		}
	}
}
