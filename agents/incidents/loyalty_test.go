package incidents

import (
	"github.com/dataworkers/dw/internal/changelog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/demo/tables"
	"github.com/dataworkers/dw/internal/incidents"
)

const avgBalance = "avg_balance_active_last_hour"

// backfillLoyalty loads the team's metric history the way a team starts
// monitoring: past values stored without judging them.
func backfillLoyalty(s *story) {
	s.t.Helper()
	for _, c := range []struct {
		metric   string
		from, to time.Time
	}{
		{avgBalance, s.tl.HistoryStart, s.tl.ReleaseV42},
		{"tier_downgrades", s.tl.HistoryStart, s.tl.Day},
	} {
		res, _, err := s.h.monitorMetrics(s.ctx, MonitorIn{MonitorParams: incidents.MonitorParams{Metric: c.metric, Backfill: true,
			Window: &incidents.Window{Start: c.from, End: c.to}}})
		if err != nil {
			s.t.Fatalf("backfill %s: %v", c.metric, err)
		}
		if res.Recorded < 20 || len(res.Incidents) != 0 {
			s.t.Fatalf("backfill %s recorded %d points, incidents %v", c.metric, res.Recorded, res.Incidents)
		}
	}
}

// Story B end to end through the tools: the team's hourly metric computed
// at 15:05 collapses and opens an incident, the diagnosis ranks the 14:02
// restore that skipped state above the 14:00 release, the owners approve
// the holds and the redeploy, v4.1 comes back from the savepoint with its
// state, and the metric, the tier downgrades and the table re-check clean.
func TestLoyaltyStory(t *testing.T) {
	s := newStory(t, "loyalty")
	ctx, h := s.ctx, s.h
	backfillLoyalty(s)

	mon, summary, err := h.monitorMetrics(ctx, MonitorIn{MonitorParams: incidents.MonitorParams{Metric: avgBalance}, IncludePoints: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(mon.Points) != 1 || mon.Points[0].Verdict != baseline.Anomalous || !mon.Points[0].At.Equal(s.tl.Day.Add(14*time.Hour)) ||
		mon.PointSummary.Count != 1 || mon.PointSummary.Anomalous != 1 || mon.PointSummary.Worst == nil || mon.AnomaliesTotal != len(mon.Anomalies) {
		t.Fatalf("15:05 point = %+v; want the 14:00 hour anomalous:\n%s", mon.Points, summary)
	}
	if len(mon.Incidents) != 1 || !mon.Incidents[0].Opened {
		t.Fatalf("incidents = %+v, want one opened", mon.Incidents)
	}
	id := mon.Incidents[0].ID
	contained(t, "monitor summary", summary, "opened "+id, "91% below the usual weekday 14:00")
	if pct := 100 * mon.Points[0].Value / mon.Points[0].Median; pct > 20 {
		t.Errorf("the metric reads %.0f%% of its baseline; the story has it collapse to about 9%%", pct)
	}

	diag, summary, err := h.diagnose(ctx, DiagnoseIn{Incident: id})
	if err != nil {
		t.Fatal(err)
	}
	causes := diag.Diagnosis.Causes
	if causes[0].Change.Kind != changelog.ChangeRestore || !causes[0].Change.StateSkipped {
		t.Fatalf("top cause %q (%s); want the restore that skipped state:\n%s", causes[0].Change.Summary, causes[0].Change.Kind, summary)
	}
	if causes[1].Change.Kind != changelog.ChangeDeploy || !strings.Contains(causes[1].Change.Summary, "v4.2") {
		t.Errorf("second cause %q; want the v4.2 release", causes[1].Change.Summary)
	}
	contained(t, "top cause evidence", strings.Join(causes[0].Evidence, "\n"), "skipped operator state", "values collapse while the job runs green")
	var reached []string
	for _, a := range diag.BlastRadius.Assets {
		reached = append(reached, a.ID)
	}
	for _, want := range []string{"dbt://model.loyalty.fct_member_tier", "hightouch://sync/braze-tier-changes"} {
		if !slices.Contains(reached, want) {
			t.Errorf("blast radius %v lacks %s", reached, want)
		}
	}

	savepoint := causes[0].Change.Details["savepoint"]
	prop, _, err := h.propose(ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{
		{Kind: "hold", What: "Pause the Hightouch sync braze-tier-changes until balances are verified",
			Targets: []string{"hightouch://sync/braze-tier-changes"}, Undo: "resume the sync in Hightouch"},
		{Kind: "hold", What: "Skip tonight's nightly_tiers run until balances are verified",
			Targets: []string{"dbt-cloud://job/nightly_tiers"}, Scope: []string{"dbt://model.loyalty.fct_member_tier"},
			Undo: "re-enable the nightly_tiers schedule in dbt Cloud"},
		{Kind: "diff", What: "Redeploy points-balance v4.1 from the 14:00 savepoint with allowNonRestoredState: false",
			Targets: []string{"flink://points-balance"}, Scope: []string{"kafka://prod/member-balances", "duckdb://loyalty.member_balances"},
			Undo:    "revert the deployment diff (back to v4.2 as running now)",
			Details: map[string]any{"savepoint": savepoint, "allowNonRestoredState": false, "version": "v4.1"}},
		{Kind: "hold", What: "Hold v4.2 until its state migration is planned",
			Targets: []string{"flink://points-balance"}, Undo: "release v4.2 again"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"hightouch://sync/braze-tier-changes": "lena", "dbt-cloud://job/nightly_tiers": "tomas", "flink://points-balance": "priya"}
	for _, p := range prop.Proposals {
		if who := want[p.Targets[0]]; p.Approver != who {
			t.Errorf("%s (%s): approver %s, want %s", p.ID, p.What, p.Approver, who)
		}
		if p.Approver == "priya" && !slices.Contains(p.Copied, "tomas") {
			t.Errorf("%s: the loyalty data owner is not copied: %v", p.ID, p.Copied)
		}
		s.decide(p.ID, p.Approver, approvals.VerdictApprove)
	}

	s.clk.Set(s.tl.Fix)
	if err := tables.ApplyLoyaltyFix(ctx, s.whPath, s.tl.Fix); err != nil {
		t.Fatal(err)
	}
	s.clk.Set(s.tl.Verify)
	rem, summary, err := h.remediate(ctx, RemediateIn{Incident: id, Note: "v4.1 redeployed from the 14:00 savepoint with its state"})
	if err != nil {
		t.Fatal(err)
	}
	if !rem.Verified {
		t.Fatalf("not verified: %s\n%s\nnotes %q", rem.Reason, summary, rem.Notes)
	}
	a := rem.Assertions[0]
	if !a.Passed || !strings.Contains(a.Checked, "metric "+avgBalance) || !strings.Contains(a.Observed, "14:00") || !strings.Contains(a.Observed, "15:00") {
		t.Errorf("assertion %+v: want the 14:00 and 15:00 hours back on baseline", a)
	}
	var tiers *incidents.CheckResult
	for i, c := range rem.Checks {
		if strings.HasPrefix(c.Name, "metric tier_downgrades") {
			tiers = &rem.Checks[i]
		}
	}
	if tiers == nil || !tiers.Passed || !strings.Contains(tiers.Observed, s.tl.Day.Format("01-02")+" 00:00") || !strings.Contains(tiers.Observed, "(normal)") {
		t.Errorf("tier_downgrades in scope = %+v; want today's run judged in line with its baseline (checks %+v, notes %q)", tiers, rem.Checks, rem.Notes)
	}
	contained(t, "notes", strings.Join(rem.Notes, "\n"), "on duckdb://loyalty.member_balances (whole table) not judged: too little history yet")
	inc, _ := s.env().svc.GetIncident(ctx, id)
	if inc.Status != incidents.StatusVerified || len(inc.Timeline) < 6 {
		t.Errorf("incident %s, timeline %+v", inc.Status, inc.Timeline)
	}
	rec, _, err := h.getReceipt(ctx, ReceiptIn{ID: id})
	if err != nil || !rec.Intact {
		t.Fatalf("receipt: %+v, %v", rec, err)
	}
	contained(t, "receipt markdown", rec.Markdown, "## Undo", "revert the deployment diff", "verified: all")
	// The savepoint the redeploy restores from is recorded with its approval.
	found := false
	for _, e := range rec.Entries {
		if det, ok := e.Facts["details"].(map[string]any); ok && e.Kind == approvals.EntryProposal && det["savepoint"] == savepoint {
			found = true
		}
	}
	if !found || savepoint == "" {
		t.Errorf("no proposal entry records the savepoint %q", savepoint)
	}
}
