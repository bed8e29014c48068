package connectors

import (
	"context"
	"strings"
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
		Targets: []string{orchestrate.AssetID(orchestrate.Airflow, "backfill_usage")}, Undo: "clear the run's output partition", Proposer: "dw-incidents",
		Action: runAction(t, e, orchestrate.Airflow, "backfill_usage", nil)})
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

// runAction is the action dw-incidents binds for a run.
func runAction(t *testing.T, e *env, sys orchestrate.System, target string, params map[string]any) *approvals.ActionSpec {
	t.Helper()
	runners, err := orchestrate.NewRunners(e.cfg.Orchestrators)
	if err != nil {
		t.Fatal(err)
	}
	a, err := orchestrate.ActionFor(runners, string(sys), target, params)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestHiddenDetailsDoNotWidenAnApproval: a rerun of benign_dag whose
// details name evil_dag, once approved, runs benign_dag and nothing else;
// a proposal whose only mention of a run is in its details runs nothing.
func TestHiddenDetailsDoNotWidenAnApproval(t *testing.T) {
	af := orchestratetest.NewAirflowServer("benign_dag", "evil_dag")
	defer af.Close()
	e := newEnv(t, "orchestrators:\n  airflow:\n    url: "+af.URL()+"\n")
	e.cfg.Domains[0].Assets = append(e.cfg.Domains[0].Assets, "airflow://**")
	ctx := context.Background()
	svc := e.approvals()
	by, err := approvals.OSUserDecider(e.cfg, approvals.ChannelTerminal, config.CurrentOSUser())
	if err != nil {
		t.Fatal(err)
	}
	smuggle := map[string]any{"system": "airflow", "target": "evil_dag", "conf": map[string]any{"drop": true}}
	propose := func(action *approvals.ActionSpec) *approvals.Proposal {
		p, err := svc.Propose(ctx, approvals.NewProposal{Kind: "rerun", What: "rerun benign_dag", Why: "w",
			Targets: []string{"airflow://dag/benign_dag"}, Undo: "clear the partition", Proposer: "dw-incidents",
			Details: smuggle, Action: action})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Decide(ctx, p.ID, by, approvals.VerdictApprove, "ok"); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bound := propose(runAction(t, e, orchestrate.Airflow, "benign_dag", nil))
	notes := propose(nil)
	cases := []struct {
		name string
		in   orchestrate.AirflowDAGParams
		want string
	}{
		{"details name another DAG", orchestrate.AirflowDAGParams{Approval: orchestrate.Approval{ProposalID: bound.ID}, DagID: "evil_dag"},
			"approved dag_id benign_dag, requested evil_dag"},
		{"details add a conf", orchestrate.AirflowDAGParams{Approval: orchestrate.Approval{ProposalID: bound.ID}, DagID: "benign_dag", Conf: map[string]any{"drop": true}},
			"key 'conf' added"},
		{"only details name the run", orchestrate.AirflowDAGParams{Approval: orchestrate.Approval{ProposalID: notes.ID}, DagID: "evil_dag"},
			"binds no action"},
		{"only details name the run, its own target", orchestrate.AirflowDAGParams{Approval: orchestrate.Approval{ProposalID: notes.ID}, DagID: "benign_dag"},
			"binds no action"},
	}
	for _, c := range cases {
		_, _, err := e.h.triggerAirflow(ctx, c.in)
		if !approvals.IsRefusal(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a refusal naming %q", c.name, err, c.want)
		}
	}
	if n := af.Triggers(); n != 0 {
		t.Fatalf("%d runs triggered by smuggled details", n)
	}
	res, _, err := e.h.triggerAirflow(ctx, orchestrate.AirflowDAGParams{Approval: orchestrate.Approval{ProposalID: bound.ID}, DagID: "benign_dag"})
	if err != nil || res.Target != "benign_dag" || af.Triggers() != 1 {
		t.Fatalf("the approved run: %+v, %v (triggers %d)", res, err, af.Triggers())
	}
}
