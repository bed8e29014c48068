package incidents

import (
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/config"
)

// TestProposeBindsTheAction: a rerun names its run and a schema version
// its schema; each proposal records exactly that action, built as the
// executing tool builds it, with its domain. A run the proposal cannot
// show or carry out is refused before anything is sent.
func TestProposeBindsTheAction(t *testing.T) {
	s := newStory(t, "billing")
	s.osUserFor("sam")
	s.cfg.Orchestrators.Airflow = &config.Service{URL: "http://airflow.internal:8080/"}
	id := openBilling(s)
	if _, _, err := s.h.diagnose(s.ctx, DiagnoseIn{Incident: id}); err != nil {
		t.Fatal(err)
	}
	const dag = "airflow://dag/sync_metered_usage_to_stripe"
	rerun := ProposalSpec{Kind: "rerun", What: "Rerun the Stripe sync for today", Targets: []string{dag}, Undo: "void the draft invoices",
		Run:     &RunAction{System: "airflow", Target: "sync_metered_usage_to_stripe", Params: map[string]any{"conf": map[string]any{"date": "2026-03-10"}}},
		Details: map[string]any{"system": "airflow", "target": "evil_dag"}}
	schema := billingProposals(t, s)[1]

	hostile := []struct {
		name string
		spec func() ProposalSpec
		want string
	}{
		{"a hold with a run", func() ProposalSpec { p := rerun; p.Kind = "hold"; return p }, "run applies to kinds rerun and replay"},
		{"a run on a DAG the proposal does not target", func() ProposalSpec {
			p := rerun
			p.Run = &RunAction{System: "airflow", Target: "evil_dag"}
			return p
		}, "airflow://dag/evil_dag is not among the proposal's targets"},
		{"an unknown system", func() ProposalSpec { p := rerun; p.Run = &RunAction{System: "cron", Target: "x"}; return p }, `unknown system "cron"`},
		{"an orchestrator not configured", func() ProposalSpec { p := rerun; p.Run = &RunAction{System: "dagster", Target: "loc/job"}; return p }, "no dagster orchestrator is configured"},
		{"a conf that is not an object", func() ProposalSpec {
			p := rerun
			p.Run = &RunAction{System: "airflow", Target: "sync_metered_usage_to_stripe", Params: map[string]any{"conf": "drop"}}
			return p
		}, "airflow conf must be an object"},
		{"a param airflow does not take", func() ProposalSpec {
			p := rerun
			p.Run = &RunAction{System: "airflow", Target: "sync_metered_usage_to_stripe", Params: map[string]any{"note": "x"}}
			return p
		}, "airflow does not take param note"},
	}
	for _, c := range hostile {
		_, _, err := s.h.propose(s.ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{schema, c.spec()}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	ps, err := s.env().apv.List(s.ctx, approvals.Filter{})
	if err != nil || len(ps) != 0 {
		t.Fatalf("refused input sent %d proposals (%v)", len(ps), err)
	}

	out, _, err := s.h.propose(s.ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{rerun, schema}})
	if err != nil {
		t.Fatal(err)
	}
	run, reg := out.Proposals[0].Action, out.Proposals[1].Action
	if run == nil || run.System != "airflow" || run.Target != "sync_metered_usage_to_stripe" || run.Asset != dag ||
		run.Location.Instance != "http://airflow.internal:8080" || run.Domain != out.Proposals[0].Domain ||
		run.Params["conf"].(map[string]any)["date"] != "2026-03-10" {
		t.Errorf("rerun action: %+v", run)
	}
	c, err := compat.Canonicalize(compat.Avro, compat.Schema{Text: schema.Schema})
	if err != nil {
		t.Fatal(err)
	}
	if reg == nil || reg.System != "schema_registry" || reg.Target != "api-usage-value" || reg.Location.Instance != storyRegistry ||
		reg.Params["schema_sha256"] != c.SHA256 || reg.Params["schema_type"] != "AVRO" || reg.Domain != out.Proposals[1].Domain {
		t.Errorf("schema action: %+v", reg)
	}
	// What is stored is what was shown.
	got, err := s.env().apv.Get(s.ctx, out.Proposals[0].ID)
	if err != nil || got.Action.Hash() != run.Hash() {
		t.Errorf("stored action %+v, %v", got.Action, err)
	}
}
