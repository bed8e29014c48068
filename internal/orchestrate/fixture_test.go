package orchestrate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/orchestrate"
	"github.com/dataworkers/dw/internal/orchestrate/orchestratetest"
	"github.com/dataworkers/dw/internal/store"
)

// The organisation: billing (L3, reruns opened) owns every orchestrated
// job except the loyalty DAGs (L1) and the streaming ones (L2).
const testConfig = `
people:
  - {id: bob, name: Bob Billing, slack_id: U0BOB, os_users: [bob]}
  - {id: carol, name: Carol Loyalty, slack_id: U0CAROL, os_users: [carol]}
  - {id: alice, name: Alice Stream, slack_id: U0ALICE, os_users: [alice]}
domains:
  - name: loyalty
    assets: ["airflow://dag/loyalty_*"]
    autonomy: L1
    owners: [carol]
  - name: streaming
    assets: ["airflow://dag/stream_*"]
    autonomy: L2
    owners: [alice]
  - name: billing
    assets: ["airflow://dag/*", "dagster://job/*", "dbt-cloud://job/*", "stepfunctions://**"]
    autonomy: L3
    owners: [bob]
    open_classes: [rerun]
`

var t0 = time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)

const (
	dagsterJob   = "billing_location/__repository__/refresh_usage"
	airflowDAG   = "sync_metered_usage_to_stripe"
	dbtJob       = int64(40000)
	stateMachine = "arn:aws:states:us-east-1:123456789012:stateMachine:usage-backfill"
	dbtToken     = "dbtc_test_token"
	sfnSecret    = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

// servers are the four fake orchestrators.
type servers struct {
	dagster *orchestratetest.DagsterServer
	airflow *orchestratetest.AirflowServer
	dbt     *orchestratetest.DBTCloudServer
	sfn     *orchestratetest.StepFunctionsServer
}

func startServers(t testing.TB) *servers {
	t.Helper()
	s := &servers{
		dagster: orchestratetest.NewDagsterServer(dagsterJob),
		airflow: orchestratetest.NewAirflowServer(airflowDAG, "loyalty_tiers", "stream_rollup"),
		dbt:     orchestratetest.NewDBTCloudServer(dbtJob),
		sfn:     orchestratetest.NewStepFunctionsServer(stateMachine),
	}
	s.airflow.RequireBasicAuth("dw", "airflow-pass")
	s.dbt.RequireToken(dbtToken)
	s.sfn.RequireAccessKey(orchestratetest.StepFunctionsAccessKey)
	t.Cleanup(func() { s.dagster.Close(); s.airflow.Close(); s.dbt.Close(); s.sfn.Close() })
	return s
}

// fixture is a dispatcher over one store, wired to the fake servers.
type fixture struct {
	db   *store.DB
	svc  *approvals.Service
	d    *orchestrate.Dispatcher
	clk  *clock.Fake
	srv  *servers
	cfg  *config.Config
	ctx  context.Context
	bob  approvals.Decider
	test testing.TB
}

func newFixture(t testing.TB, db *store.DB, timeout time.Duration) *fixture {
	t.Helper()
	return newFixtureWith(t, db, timeout, testConfig)
}

// newFixtureWith is newFixture with another organisation (people and
// domains); bob must be among its people.
func newFixtureWith(t testing.TB, db *store.DB, timeout time.Duration, yaml string) *fixture {
	t.Helper()
	srv := startServers(t)
	t.Setenv("DW_HOME", t.TempDir())
	t.Setenv("TEST_AIRFLOW_USER", "dw")
	t.Setenv("TEST_AIRFLOW_PASS", "airflow-pass")
	t.Setenv("TEST_DBT_TOKEN", dbtToken)
	t.Setenv("TEST_AWS_KEY", orchestratetest.StepFunctionsAccessKey)
	t.Setenv("TEST_AWS_SECRET", sfnSecret)
	cfg, err := config.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Orchestrators = config.Orchestrators{
		Dagster:       &config.Service{URL: srv.dagster.URL(), Timeout: timeout},
		Airflow:       &config.Service{URL: srv.airflow.URL(), UsernameEnv: "TEST_AIRFLOW_USER", PasswordEnv: "TEST_AIRFLOW_PASS", Timeout: timeout},
		DBTCloud:      &config.Service{URL: srv.dbt.URL(), TokenEnv: "TEST_DBT_TOKEN", AccountID: orchestratetest.DBTCloudAccount, Timeout: timeout},
		StepFunctions: &config.Service{URL: srv.sfn.URL(), Region: "us-east-1", UsernameEnv: "TEST_AWS_KEY", PasswordEnv: "TEST_AWS_SECRET", Timeout: timeout},
	}
	clk := clock.NewFake(t0)
	svc := approvals.New(db, cfg, clk, nil)
	runners, err := orchestrate.NewRunners(cfg.Orchestrators)
	if err != nil {
		t.Fatal(err)
	}
	d := orchestrate.NewDispatcher(db, svc, runners, "dw-connectors", clk, nil)
	d.PollInterval = time.Millisecond
	bob, err := approvals.OSUserDecider(cfg, approvals.ChannelTerminal, "bob")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{db: db, svc: svc, d: d, clk: clk, srv: srv, cfg: cfg, ctx: context.Background(), bob: bob, test: t}
}

// system is one orchestrator under test: how to ask for a run of it, and
// its server.
type system struct {
	name    orchestrate.System
	target  string // as Params.Target
	asset   string
	params  map[string]any
	trigger func(*servers) int
	plan    func(*servers, orchestratetest.Outcome)
	drop    func(*servers, int, time.Duration)
}

var systems = []system{
	{name: orchestrate.Dagster, target: dagsterJob, asset: "dagster://job/refresh_usage",
		params:  map[string]any{"run_config": map[string]any{"ops": map[string]any{"load": map[string]any{"config": map[string]any{"date": "2026-03-10"}}}}},
		trigger: func(s *servers) int { return s.dagster.Triggers() },
		plan:    func(s *servers, o orchestratetest.Outcome) { s.dagster.SetOutcome(dagsterJob, o) },
		drop:    func(s *servers, n int, d time.Duration) { s.dagster.DropNextAnswers(n, d) }},
	{name: orchestrate.Airflow, target: airflowDAG, asset: "airflow://dag/" + airflowDAG,
		params:  map[string]any{"conf": map[string]any{"date": "2026-03-10"}},
		trigger: func(s *servers) int { return s.airflow.Triggers() },
		plan:    func(s *servers, o orchestratetest.Outcome) { s.airflow.SetOutcome(airflowDAG, o) },
		drop:    func(s *servers, n int, d time.Duration) { s.airflow.DropNextAnswers(n, d) }},
	{name: orchestrate.DBTCloud, target: fmt.Sprint(dbtJob), asset: fmt.Sprintf("dbt-cloud://job/%d", dbtJob),
		params:  map[string]any{"steps_override": []any{"dbt build -s fct_billable_egress"}},
		trigger: func(s *servers) int { return s.dbt.Triggers() },
		plan:    func(s *servers, o orchestratetest.Outcome) { s.dbt.SetOutcome(fmt.Sprint(dbtJob), o) },
		drop:    func(s *servers, n int, d time.Duration) { s.dbt.DropNextAnswers(n, d) }},
	{name: orchestrate.StepFunctions, target: stateMachine, asset: "stepfunctions://" + stateMachine,
		params:  map[string]any{"input": map[string]any{"from": "2026-03-10T00:00:00Z"}},
		trigger: func(s *servers) int { return s.sfn.Triggers() },
		plan:    func(s *servers, o orchestratetest.Outcome) { s.sfn.SetOutcome(stateMachine, o) },
		drop:    func(s *servers, n int, d time.Duration) { s.sfn.DropNextAnswers(n, d) }},
}

// approved proposes a rerun of exactly sys's target with its params and
// has bob approve it.
func (f *fixture) approved(sys system) *approvals.Proposal {
	f.test.Helper()
	return f.approvedAction(approvals.KindRerun, sys.name, sys.target, sys.params)
}

// approvedAction proposes kind for one run, its action bound, and has bob
// approve it.
func (f *fixture) approvedAction(kind string, name orchestrate.System, target string, params map[string]any) *approvals.Proposal {
	f.test.Helper()
	spec := f.spec(name, target, params)
	p, err := f.svc.Propose(f.ctx, approvals.NewProposal{IncidentID: "INC-7", Kind: kind,
		What: "Rerun after the egress fix", Why: "egress_bytes was null for today's hours", Targets: []string{spec.Asset},
		Undo: "nothing to undo: a rerun recomputes the same outputs", Action: spec, Proposer: "dw-incidents"})
	if err != nil {
		f.test.Fatalf("propose: %v", err)
	}
	if _, err := f.svc.Decide(f.ctx, p.ID, f.bob, approvals.VerdictApprove, ""); err != nil {
		f.test.Fatalf("approve: %v", err)
	}
	return p
}

// spec is the action an approval binds for a run, as the proposer builds it.
func (f *fixture) spec(name orchestrate.System, target string, params map[string]any) *approvals.ActionSpec {
	f.test.Helper()
	runners, err := orchestrate.NewRunners(f.cfg.Orchestrators)
	if err != nil {
		f.test.Fatal(err)
	}
	spec, err := orchestrate.ActionFor(runners, string(name), target, params)
	if err != nil {
		f.test.Fatalf("action for %s %s: %v", name, target, err)
	}
	return spec
}

func (f *fixture) params(sys system, proposalID string) orchestrate.Params {
	return orchestrate.Params{Approval: orchestrate.Approval{ProposalID: proposalID}, System: sys.name, Target: sys.target, Params: sys.params}
}

// steps returns the payloads of a run's step entries in a receipt.
func (f *fixture) steps(receiptID, runKey string) []string {
	f.test.Helper()
	es, err := approvals.Entries(f.ctx, f.db, receiptID)
	if err != nil {
		f.test.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if e.Kind == approvals.EntryStep && strings.Contains(string(e.Payload), `"run_key":"`+runKey+`"`) {
			out = append(out, string(e.Payload))
		}
	}
	return out
}

func countContaining(list []string, sub string) int {
	n := 0
	for _, s := range list {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}
