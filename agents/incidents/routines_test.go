package incidents

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/routines"
	"github.com/dataworkers/dw/internal/routines/runlog"
	"github.com/dataworkers/dw/internal/warehouse"
)

// watchStoryA runs a routine over story A's table at 15:05, as `dw watch`
// would, with the pack's people and domains.
func watchStoryA(t *testing.T, s *story) *routines.Run {
	t.Helper()
	s.cfg.Routines = []config.Routine{{Name: "usage-billing", Cron: "5 * * * *",
		Checks: []config.RoutineCheck{{Table: "usage.usage_hourly", Period: "today", Bucket: "hour", HistoryDays: 21}}}}
	g, err := s.d.Graph(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := routines.New(routines.Options{DB: s.db(), Config: s.cfg, Graph: g, Clock: s.clk, Watcher: "test",
		Warehouse: func(ctx context.Context, name string) (warehouse.Warehouse, error) { return s.d.Warehouse(ctx, name) }})
	if err != nil {
		t.Fatal(err)
	}
	ran, err := r.RunDue(s.ctx, s.clk.Now().Truncate(time.Minute))
	if err != nil || len(ran) != 1 || len(ran[0].Incidents) != 1 {
		t.Fatalf("run: %v %+v", err, ran)
	}
	return ran[0]
}

func count(t *testing.T, s *story, table string) int {
	t.Helper()
	var n int
	if err := s.db().QueryRowContext(s.ctx, "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A routine watches story A's table at 15:05; a client then asks what the
// watching saw, through list_routine_runs over MCP. The routine told sam
// and drafted a hold of the Stripe sync for bea to decide; it dispatched
// nothing.
func TestListRoutineRunsThroughMCP(t *testing.T) {
	s := newStory(t, "billing")
	ran := watchStoryA(t, s)
	cs := client(t, s)
	var out runlog.ListResult
	call(t, cs, "list_routine_runs", map[string]any{"since": s.tl.Day.Format(time.RFC3339)}, &out)
	if out.Total != 1 || len(out.Runs) != 1 || out.Runs[0].ID != ran.ID {
		t.Fatalf("runs: %+v", out)
	}
	run := out.Runs[0]
	if run.Routine != "usage-billing" || run.Status != runlog.StatusFlagged || len(run.Incidents) != 1 || !run.Incidents[0].Opened {
		t.Fatalf("run %+v", run)
	}
	if len(run.Notified) != 1 || run.Notified[0].Person != "sam" || run.Notified[0].Via != "none" || run.Notified[0].Incident != run.Incidents[0].ID {
		t.Fatalf("notified %+v: want sam, who owns usage.usage_hourly, recorded as would-have-been-told", run.Notified)
	}
	var hold *runlog.Proposal
	for i, p := range run.Proposals {
		if p.ID != "" {
			hold = &run.Proposals[i]
		}
	}
	if hold == nil || hold.Target != "airflow://dag/sync_metered_usage_to_stripe" || hold.Approver != "bea" {
		t.Fatalf("proposals %+v: want a hold of the Stripe sync for bea (billing, L2)", run.Proposals)
	}
	// Drafted, not carried out: one pending proposal, no run dispatched.
	if n := count(t, s, "approval_proposals"); n != 1 {
		t.Fatalf("%d proposals stored, want the one hold", n)
	}
	if n := count(t, s, "orchestrate_runs"); n != 0 {
		t.Fatalf("a routine dispatched %d runs", n)
	}
	p, err := s.env().apv.Get(s.ctx, hold.ID)
	if err != nil || string(p.State) != "pending" || p.Kind != "hold" {
		t.Fatalf("proposal %+v %v: want a pending hold", p, err)
	}
	call(t, cs, "list_routine_runs", map[string]any{"status": "ok"}, &out)
	if out.Total != 0 {
		t.Fatalf("status ok: %d runs", out.Total)
	}
	callErr(t, cs, "list_routine_runs", map[string]any{"status": "exploded"})
	callErr(t, cs, "list_routine_runs", map[string]any{"since": "last night"})
	callErr(t, cs, "list_routine_runs", map[string]any{"limit": 501})
	callErr(t, cs, "list_routine_runs", map[string]any{"cursor": "not-a-cursor"})
}

// `dw stop` pauses the routines' proposals: the incident is opened and
// the owner told, but nothing is proposed, and the run says why.
func TestStopPausesRoutineProposals(t *testing.T) {
	s := newStory(t, "billing")
	if _, err := s.env().apv.Stop(s.ctx, "ops", "freeze for the audit"); err != nil {
		t.Fatal(err)
	}
	run := watchStoryA(t, s)
	if n := count(t, s, "approval_proposals"); n != 0 {
		t.Fatalf("%d proposals drafted during dw stop", n)
	}
	if len(run.Proposals) == 0 || run.Proposals[0].ID != "" || !strings.Contains(run.Proposals[0].Note, "dw stop") {
		t.Fatalf("proposals during stop: %+v", run.Proposals)
	}
	if len(run.Notified) != 1 || run.Notified[0].Person != "sam" {
		t.Fatalf("the owner was not told during the stop: %+v", run.Notified)
	}
}

// Below L2 a domain only observes: no proposal.
func TestObserveOnlyDomainGetsNoProposal(t *testing.T) {
	s := newStory(t, "billing")
	for i := range s.cfg.Domains {
		if s.cfg.Domains[i].Name == "billing" {
			s.cfg.Domains[i].Autonomy = "L1"
		}
	}
	run := watchStoryA(t, s)
	if n := count(t, s, "approval_proposals"); n != 0 {
		t.Fatalf("%d proposals drafted in an L1 domain", n)
	}
	if len(run.Proposals) == 0 || !strings.Contains(run.Proposals[0].Note, "L1") {
		t.Fatalf("proposals at L1: %+v", run.Proposals)
	}
}
