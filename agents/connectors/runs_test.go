package connectors

import (
	"context"
	"testing"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/orchestrate"
	"github.com/dataworkers/dw/internal/orchestrate/orchestratetest"
)

// TestAirflowRunOnlyWhenApprovedAndOnce: the tool refuses without an
// approval and dispatches nothing; after the named owner approves, it
// starts one run, and a retry starts none.
func TestAirflowRunOnlyWhenApprovedAndOnce(t *testing.T) {
	af := orchestratetest.NewAirflowServer("backfill_usage")
	defer af.Close()
	e := newEnv(t, "orchestrators:\n  airflow:\n    url: "+af.URL()+"\n")
	e.cfg.Domains[0].Assets = append(e.cfg.Domains[0].Assets, "airflow://**")
	ctx := context.Background()
	in := orchestrate.AirflowDAGParams{DagID: "backfill_usage"}

	if _, _, err := e.h.triggerAirflow(ctx, in); err == nil {
		t.Fatal("a run without an approval was dispatched")
	}
	if n := af.Triggers(); n != 0 {
		t.Fatalf("%d runs triggered without approval", n)
	}

	svc := e.approvals()
	p, err := svc.Propose(ctx, approvals.NewProposal{Kind: "rerun", What: "rerun backfill_usage for today", Why: "today's rows were rebuilt",
		Targets: []string{orchestrate.AssetID(orchestrate.Airflow, "backfill_usage")}, Undo: "clear the run's output partition", Proposer: "dw-incidents"})
	if err != nil {
		t.Fatal(err)
	}
	in.ProposalID = p.ID
	if _, _, err := e.h.triggerAirflow(ctx, in); err == nil || !approvals.IsRefusal(err) {
		t.Fatalf("pending proposal: err = %v, want a refusal", err)
	}
	by, err := approvals.OSUserDecider(e.cfg, approvals.ChannelTerminal, config.CurrentOSUser())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Decide(ctx, p.ID, by, approvals.VerdictApprove, "ok"); err != nil {
		t.Fatal(err)
	}
	first, _, err := e.h.triggerAirflow(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := e.h.triggerAirflow(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if af.Triggers() != 1 || first.RunID == "" || again.RunID != first.RunID || !again.Existing {
		t.Errorf("triggers=%d first=%q again=%q existing=%v", af.Triggers(), first.RunID, again.RunID, again.Existing)
	}
	st, _, err := e.h.getRunStatus(ctx, orchestrate.PollParams{RunKey: first.RunKey})
	if err != nil || st.RunID != first.RunID {
		t.Fatalf("status: %+v %v", st, err)
	}
}
