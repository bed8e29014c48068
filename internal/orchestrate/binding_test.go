package orchestrate_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/orchestrate"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestRunMustBeTheApprovedAction: an approval allows one run, exactly;
// any other target, location, param or domain is refused, named, and
// reaches no orchestrator.
func TestRunMustBeTheApprovedAction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		approved := map[orchestrate.System]*approvals.Proposal{}
		for _, sys := range systems {
			approved[sys.name] = f.approved(sys)
		}
		req := func(sys system, target string, params map[string]any) orchestrate.Params {
			return orchestrate.Params{Approval: orchestrate.Approval{ProposalID: approved[sys.name].ID}, System: sys.name, Target: target, Params: params}
		}
		dagster, airflow, dbt, sfn := systems[0], systems[1], systems[2], systems[3]
		cases := []struct {
			name string
			p    orchestrate.Params
			want string
		}{
			{"another DAG", req(airflow, "loyalty_tiers", airflow.params), "approved dag_id sync_metered_usage_to_stripe, requested loyalty_tiers"},
			{"a DAG of another domain", req(airflow, "stream_rollup", airflow.params), "approved domain billing, the DAG is in streaming"},
			{"Airflow conf key added", req(airflow, airflowDAG, map[string]any{"conf": map[string]any{"date": "2026-03-10", "full_refresh": true}}), "key 'conf.full_refresh' added"},
			{"Airflow conf dropped", req(airflow, airflowDAG, nil), "key 'conf' removed"},
			{"Dagster run_config changed", req(dagster, dagsterJob, map[string]any{"run_config": map[string]any{"ops": map[string]any{"load": map[string]any{"config": map[string]any{"date": "2026-01-01"}}}}}),
				`key 'run_config.ops.load.config.date' changed from "2026-03-10" to "2026-01-01"`},
			{"Dagster tags added", req(dagster, dagsterJob, map[string]any{"run_config": dagster.params["run_config"], "tags": map[string]any{"team": "x"}}), "key 'tags' added"},
			{"Dagster job in another code location", req(dagster, "scratch_location/__repository__/refresh_usage", dagster.params), "approved code_location billing_location, requested scratch_location"},
			{"Dagster job in another repository", req(dagster, "billing_location/old_repo/refresh_usage", dagster.params), "approved repository __repository__, requested old_repo"},
			{"dbt Cloud steps_override changed", req(dbt, dbt.target, map[string]any{"steps_override": []any{"dbt run-operation drop_schema"}}), "key 'steps_override' changed from"},
			{"dbt Cloud another job", req(dbt, "40001", dbt.params), "approved job_id 40000, requested 40001"},
			{"Step Functions input changed", req(sfn, stateMachine, map[string]any{"input": map[string]any{"from": "2020-01-01T00:00:00Z"}}), "key 'input.from' changed"},
			{"Step Functions another account", req(sfn, strings.Replace(stateMachine, "123456789012", "999999999999", 1), sfn.params), "approved account 123456789012, requested 999999999999"},
		}
		for _, c := range cases {
			_, err := f.d.Run(f.ctx, c.p)
			if !approvals.IsRefusal(err) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v\nwant a refusal naming %q", c.name, err, c.want)
			}
		}
		for _, sys := range systems {
			if n := sys.trigger(f.srv); n != 0 {
				t.Errorf("%s saw %d triggers from refused runs", sys.name, n)
			}
		}
		if runs, err := f.d.List(f.ctx, ""); err != nil || len(runs) != 0 {
			t.Errorf("refused runs were recorded: %+v, %v", runs, err)
		}
		// The approved runs, each exactly as approved, start.
		for _, sys := range systems {
			if _, err := f.d.Run(f.ctx, f.params(sys, approved[sys.name].ID)); err != nil {
				t.Errorf("%s approved run: %v", sys.name, err)
			}
		}
		// A dispatcher whose config points Airflow elsewhere is another
		// instance: the approval does not follow it.
		moved := *f.cfg
		o := moved.Orchestrators
		af := *o.Airflow
		af.URL = "http://airflow.elsewhere.internal:8080"
		o.Airflow = &af
		runners, err := orchestrate.NewRunners(o)
		if err != nil {
			t.Fatal(err)
		}
		elsewhere := orchestrate.NewDispatcher(db, approvals.New(db, f.cfg, f.clk, nil), runners, "dw-connectors", f.clk, nil)
		p := f.approvedAction(approvals.KindBackfill, orchestrate.Airflow, airflowDAG, airflow.params)
		if _, err := elsewhere.Run(f.ctx, f.params(airflow, p.ID)); !approvals.IsRefusal(err) || !strings.Contains(err.Error(), "requested http://airflow.elsewhere.internal:8080") {
			t.Errorf("another instance: %v", err)
		}
	})
}

// TestProcessesRacingOneApprovalDispatchOnce: dispatchers on separate
// store handles (as separate dw-connectors processes have) race to carry
// out one approval; the orchestrator sees exactly one trigger, and every
// caller that got an answer got that run.
func TestProcessesRacingOneApprovalDispatchOnce(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			var dbs []*store.DB
			open := func(db *store.DB, err error) {
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				dbs = append(dbs, db)
			}
			if engine == "sqlite" {
				path := filepath.Join(t.TempDir(), "dw.db")
				for range 3 {
					open(store.OpenSQLite(ctx, path))
				}
			} else {
				url := storetest.PostgresSchemaURL(t)
				for range 3 {
					open(store.OpenPostgres(ctx, url))
				}
			}
			f := newFixture(t, dbs[0], 5*time.Second)
			runners, err := orchestrate.NewRunners(f.cfg.Orchestrators)
			if err != nil {
				t.Fatal(err)
			}
			ds := []*orchestrate.Dispatcher{f.d}
			for _, db := range dbs[1:] {
				ds = append(ds, orchestrate.NewDispatcher(db, approvals.New(db, f.cfg, f.clk, nil), runners, "dw-connectors", f.clk, nil))
			}
			for _, sys := range systems[:2] {
				p := f.approved(sys)
				const callers = 12
				var wg sync.WaitGroup
				results := make([]*orchestrate.RunResult, callers)
				errs := make([]error, callers)
				for i := range callers {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						results[i], errs[i] = ds[i%len(ds)].Run(ctx, f.params(sys, p.ID))
					}(i)
				}
				wg.Wait()
				runID := ""
				for i := range callers {
					if errs[i] != nil {
						if !strings.Contains(errs[i].Error(), "is being carried out by another call") && !strings.Contains(errs[i].Error(), "is being dispatched by another call") {
							t.Errorf("%s caller %d: %v", sys.name, i, errs[i])
						}
						continue
					}
					if runID == "" {
						runID = results[i].RunID
					}
					if results[i].RunID != runID {
						t.Errorf("%s caller %d got run %s, another %s", sys.name, i, results[i].RunID, runID)
					}
				}
				if n := sys.trigger(f.srv); n != 1 || runID == "" {
					t.Errorf("%s saw %d triggers (run %q), want exactly 1", sys.name, n, runID)
				}
				// Every process's retry now answers with that run.
				for _, d := range ds {
					res, err := d.Run(ctx, f.params(sys, p.ID))
					if err != nil || res.RunID != runID || !res.Existing {
						t.Errorf("%s retry: %+v, %v", sys.name, res, err)
					}
				}
				if n := len(f.steps(p.ReceiptID, res0Key(p.ID, sys))); n != 1 {
					t.Errorf("%s: %d trigger steps in the receipt, want 1", sys.name, n)
				}
			}
		})
	}
}

func res0Key(proposalID string, sys system) string {
	return proposalID + "/" + string(sys.name) + "/" + sys.target
}
