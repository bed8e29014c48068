package remediate

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
)

// revenueTables writes shop.orders (A), whose amount is null in 40% of the
// rows from 14:00 today and stays so, and shop.orders_v2 (B), the same
// orders recovered with every amount: the table approved to replace A.
func revenueTables(t *testing.T, f *fixture) {
	t.Helper()
	rng := rand.New(rand.NewPCG(9, 21))
	var a, b []string
	id := 0
	for h := day.Add(-10 * 24 * time.Hour); h.Before(day.Add(17 * time.Hour)); h = h.Add(time.Hour) {
		n := 150 + rng.IntN(30)
		for i := 0; i < n; i++ {
			id++
			at := h.Add(time.Duration(i*10) * time.Second).Format("2006-01-02 15:04:05")
			amount := fmt.Sprintf("%d.0", 20+rng.IntN(10))
			b = append(b, fmt.Sprintf("(%d, %s, TIMESTAMP '%s')", id, amount, at))
			if !h.Before(bad) && i%5 < 2 {
				amount = "NULL"
			}
			a = append(a, fmt.Sprintf("(%d, %s, TIMESTAMP '%s')", id, amount, at))
		}
	}
	stmts := []string{"CREATE SCHEMA IF NOT EXISTS shop",
		"CREATE TABLE shop.orders (order_id BIGINT, amount DOUBLE, created_at TIMESTAMP)",
		"CREATE TABLE shop.orders_v2 (order_id BIGINT, amount DOUBLE, created_at TIMESTAMP)"}
	for table, rows := range map[string][]string{"shop.orders": a, "shop.orders_v2": b} {
		for len(rows) > 0 {
			k := min(len(rows), 5000)
			stmts = append(stmts, "INSERT INTO "+table+" VALUES "+strings.Join(rows[:k], ","))
			rows = rows[k:]
		}
	}
	f.exec(stmts...)
}

// revenueMetric defines the team's hourly revenue on shop.orders with sql
// and records ten days of it before the bad hour.
func revenueMetric(t *testing.T, f *fixture, sql string) {
	t.Helper()
	svc := f.env.Incidents
	if _, err := svc.DefineMetric(f.ctx, incidents.DefineMetricParams{Name: "orders_revenue", Description: "revenue per hour",
		Asset: "duckdb://shop.orders", Warehouse: "wh", SQL: sql, ValueColumn: "revenue", TimeColumn: "hour", Direction: "down"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.MonitorMetric(f.ctx, incidents.MonitorParams{Metric: "orders_revenue", Backfill: true,
		Window: &incidents.Window{Start: bad.Add(-10 * 24 * time.Hour), End: bad}}); err != nil {
		t.Fatal(err)
	}
}

const plainRevenue = `SELECT date_trunc('hour', created_at) AS hour, sum(coalesce(amount, 0)) AS revenue FROM shop.orders GROUP BY 1`

func revenueSymptoms() []incidents.Symptom {
	return []incidents.Symptom{
		{Kind: incidents.SymptomNulls, Asset: "duckdb://shop.orders", Metric: "null_rate", Column: "amount", Observed: 0.4, At: bad,
			Source: "run_quality_check", Detail: "amount null in 40% of rows since 14:00, 0% before"},
		{Kind: incidents.SymptomValue, Asset: "duckdb://shop.orders", Metric: "orders_revenue", Observed: 2400, Expected: 4000,
			ExpectedLow: 3500, ExpectedHigh: 4500, At: bad, Source: "monitor_metrics", Detail: "revenue 40% below the usual 14:00"},
	}
}

func replaceOrders() approvals.NewProposal {
	return approvals.NewProposal{Kind: approvals.KindDiff, What: "dbt: read orders from shop.orders_v2, the recovered table",
		Why: "shop.orders lost amounts from 14:00", Targets: []string{"duckdb://shop.orders"}, Undo: "point the dbt source back to shop.orders",
		Details: map[string]any{DetailReplacement: map[string]any{"asset": "duckdb://shop.orders", "with": "duckdb://shop.orders_v2"}}}
}

// The original table stays broken and the recovered one is right. Without
// an approved replacement, verification reads the original and escalates;
// once a person approves "replaces shop.orders with shop.orders_v2", it
// reads the replacement for the table's checks and the metric's SQL, is
// verified, and the receipt shows which table was read instead of which,
// for which metric, approved by whom.
func TestApprovedReplacementIsWhatVerificationReads(t *testing.T) {
	for _, replaced := range []bool{false, true} {
		t.Run(fmt.Sprintf("replacement approved=%v", replaced), func(t *testing.T) {
			f := newFixture(t)
			revenueTables(t, f)
			revenueMetric(t, f, plainRevenue)
			prop := hold("duckdb://shop.orders")
			if replaced {
				prop = replaceOrders()
			}
			id, props := f.incident(revenueSymptoms(), prop)
			f.approve(props[0])
			f.clk.Set(day.Add(17*time.Hour + 5*time.Minute))
			res := f.verify(id)
			if !replaced {
				if res.Verification.Outcome != incidents.OutcomeEscalated || len(res.Replacements) != 0 {
					t.Fatalf("without the replacement the broken table is read: outcome %s (%s)", res.Verification.Outcome, res.Verification.Reason)
				}
				return
			}
			if res.Verification.Outcome != incidents.OutcomeVerified {
				t.Fatalf("with the approved replacement: %s (%s)\n%+v", res.Verification.Outcome, res.Verification.Reason, res.Assertions)
			}
			if len(res.Replacements) != 1 || res.Replacements[0].With != "duckdb://shop.orders_v2" || res.Replacements[0].Proposal != props[0].ID {
				t.Errorf("replacements read %+v", res.Replacements)
			}
			for _, a := range res.Assertions {
				if !a.Passed || !strings.Contains(a.Checked, "orders_v2") {
					t.Errorf("assertion %+v should have passed on the replacement", a)
				}
			}
			entries, err := approvals.Entries(f.ctx, f.db, id)
			if err != nil {
				t.Fatal(err)
			}
			last := entries[len(entries)-1]
			var facts struct {
				Outcome      string `json:"outcome"`
				Replacements []struct {
					Proposal   string   `json:"proposal"`
					Replaces   string   `json:"replaces"`
					With       string   `json:"with"`
					ApprovedBy string   `json:"approved_by"`
					Metrics    []string `json:"metrics"`
				} `json:"replacements"`
			}
			if err := json.Unmarshal(last.Payload, &facts); err != nil || last.Kind != EntryVerification || last.Seq != res.Receipt.Seq {
				t.Fatalf("last receipt entry %s #%d (%v), want the verification #%d", last.Kind, last.Seq, err, res.Receipt.Seq)
			}
			if len(facts.Replacements) != 1 || facts.Outcome != incidents.OutcomeVerified {
				t.Fatalf("receipt: outcome %s, replacements %+v", facts.Outcome, facts.Replacements)
			}
			r := facts.Replacements[0]
			if r.Proposal != props[0].ID || r.Replaces != "duckdb://shop.orders" || r.With != "duckdb://shop.orders_v2" ||
				r.ApprovedBy != "pat via terminal" || !slices.Equal(r.Metrics, []string{"orders_revenue"}) {
				t.Errorf("the receipt's substitution %+v", r)
			}
		})
	}
}

// A metric whose SQL names the replaced table where it cannot be swapped
// safely (a fully qualified column) is not read wrongly: the incident is
// not verifiable yet, naming the metric and what to do.
func TestMetricThatCannotBePointedAtTheReplacementIsNotVerifiableYet(t *testing.T) {
	f := newFixture(t)
	revenueTables(t, f)
	revenueMetric(t, f, `SELECT date_trunc('hour', created_at) AS hour, sum(coalesce(shop.orders.amount, 0)) AS revenue FROM shop.orders GROUP BY 1`)
	id, props := f.incident(revenueSymptoms(), replaceOrders())
	f.approve(props[0])
	f.clk.Set(day.Add(17*time.Hour + 5*time.Minute))
	res := f.verify(id)
	if res.Verification.Outcome != incidents.OutcomeNotVerifiable || res.Incident.Status != incidents.StatusFixing {
		t.Fatalf("outcome %s, status %s (%s)", res.Verification.Outcome, res.Incident.Status, res.Verification.Reason)
	}
	var metric *AssertionResult
	for i, a := range res.Assertions {
		if strings.Contains(a.Name, "orders_revenue") {
			metric = &res.Assertions[i]
		} else if !a.Passed {
			t.Errorf("assertion %+v should pass on the replacement", a)
		}
	}
	if metric == nil || metric.Passed || !metric.NotJudged ||
		!strings.HasPrefix(metric.Observed, "not verifiable yet: metric orders_revenue reads duckdb://shop.orders") ||
		!strings.Contains(metric.Observed, "define it on duckdb://shop.orders_v2") {
		t.Fatalf("metric assertion %+v", metric)
	}
}

// A replacement in a proposal whose approval cannot be proven (its state
// set to approved by hand) is never read.
func TestReplacementNeedsAProvenApproval(t *testing.T) {
	f := newFixture(t)
	revenueTables(t, f)
	id, props := f.incident(revenueSymptoms()[:1], replaceOrders())
	if _, err := f.db.ExecContext(f.ctx, `UPDATE approval_proposals SET state = 'approved' WHERE id = ?`, props[0].ID); err != nil {
		t.Fatal(err)
	}
	f.clk.Set(day.Add(17*time.Hour + 5*time.Minute))
	_, err := Verify(f.ctx, f.env, Params{IncidentID: id})
	if err == nil || !strings.Contains(err.Error(), "is not read") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("err %v", err)
	}
	if inc, _ := f.env.Incidents.GetIncident(f.ctx, id); inc.Status != incidents.StatusProposed {
		t.Errorf("status %s after a refusal, want proposed", inc.Status)
	}
}

// The replacement a person proposes is checked before it is sent.
func TestCheckReplacementRefusesBadPairs(t *testing.T) {
	f := newFixture(t)
	revenueTables(t, f)
	inc := &incidents.Incident{ID: "INC-1", Assets: []string{"duckdb://shop.orders"}}
	g := lineage.New(f.db, f.clk)
	for _, c := range []struct {
		a, b, want string
	}{
		{"shop.orders", "duckdb://shop.orders_v2", "replaces.asset"},
		{"duckdb://shop.orders", "orders_v2", "replaces.with"},
		{"duckdb://shop.orders", "duckdb://SHOP.Orders", "same table"},
		{"duckdb://shop.orders", "snowflake://shop.orders_v2", "same platform"},
		{"duckdb://shop.orders", "kafka://prod/orders", "warehouse tables"},
		{"duckdb://shop.refunds", "duckdb://shop.orders_v2", "not one of incident INC-1's symptomatic assets"},
		{"duckdb://shop.orders", "duckdb://shop.orders_v3", "neither in the context graph nor in the catalog"},
	} {
		_, err := CheckReplacement(f.ctx, f.env, inc, ReplacementSpec{Asset: c.a, With: c.b}, g)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s -> %s: err %v, want %q", c.a, c.b, err, c.want)
		}
	}
	got, err := CheckReplacement(f.ctx, f.env, inc, ReplacementSpec{Asset: " DuckDB://Shop.Orders ", With: "duckdb://shop.ORDERS_V2"}, g)
	if err != nil || got != (ReplacementSpec{Asset: "duckdb://shop.orders", With: "duckdb://shop.orders_v2"}) {
		t.Errorf("canonical pair %+v, %v", got, err)
	}
}
