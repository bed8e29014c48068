package orchestrate_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/orchestrate"
	"github.com/dataworkers/dw/internal/rest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// crashingRunner starts the run, then dies before the dispatcher can
// record it, like a process killed mid-dispatch.
type crashingRunner struct{ orchestrate.Runner }

type crash struct{}

func (c crashingRunner) Trigger(ctx context.Context, req orchestrate.RunRequest) (orchestrate.RunRef, error) {
	if _, err := c.Runner.Trigger(ctx, req); err != nil {
		return orchestrate.RunRef{}, err
	}
	panic(crash{})
}

func TestClaimOfACrashedDispatchLapses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		runners, err := orchestrate.NewRunners(f.cfg.Orchestrators)
		if err != nil {
			t.Fatal(err)
		}
		runners[orchestrate.Airflow] = crashingRunner{runners[orchestrate.Airflow]}
		dying := orchestrate.NewDispatcher(db, f.svc, runners, "dw-connectors", f.clk, nil)
		p := f.approved(systems[1])
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Fatal("the runner did not crash")
				} else if _, ok := r.(crash); !ok {
					panic(r)
				}
			}()
			_, _ = dying.Run(f.ctx, f.params(systems[1], p.ID))
		}()
		if f.srv.airflow.Triggers() != 1 {
			t.Fatalf("the crashed dispatch started %d runs", f.srv.airflow.Triggers())
		}
		// Within the lease the claim stands: nobody else triggers.
		_, err = f.d.Run(f.ctx, f.params(systems[1], p.ID))
		if err == nil || !strings.Contains(err.Error(), "is being carried out by another call (dw-connectors, since 15:05:00 UTC)") {
			t.Fatalf("within the lease: %v", err)
		}
		got, err := f.d.Get(f.ctx, p.ID)
		if err != nil || got.Status != orchestrate.StatusDispatching {
			t.Fatalf("%+v, %v", got, err)
		}
		// After it, the next call takes over and finds the run the crashed
		// process started.
		f.clk.Advance(orchestrate.DefaultClaimLease + time.Second)
		res, err := f.d.Run(f.ctx, f.params(systems[1], p.ID))
		if err != nil || !res.Existing || res.Attempts != 2 || f.srv.airflow.Triggers() != 1 {
			t.Fatalf("after the lease: %+v, %v (triggers %d)", res, err, f.srv.airflow.Triggers())
		}
		if n := len(f.steps(p.ReceiptID, res.RunKey)); n != 1 {
			t.Errorf("%d receipt steps, want 1", n)
		}
	})
}

func TestUnknownOutcomeKeepsParams(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 300*time.Millisecond)
		sys := systems[1]
		p := f.approved(sys)
		sys.drop(f.srv, 1, 3*time.Second)
		if _, err := f.d.Run(f.ctx, f.params(sys, p.ID)); err == nil {
			t.Fatal("the lost answer was not an error")
		}
		// The first run may have started with the first params, so a retry
		// with others would not be that run.
		other := f.params(sys, p.ID)
		other.Params = map[string]any{"conf": map[string]any{"date": "2026-03-11"}}
		if _, err := f.d.Run(f.ctx, other); err == nil || !strings.Contains(err.Error(), "these differ") {
			t.Errorf("changed params after an unknown outcome: %v", err)
		}
		if res, err := f.d.Run(f.ctx, f.params(sys, p.ID)); err != nil || !res.Existing {
			t.Errorf("retry: %+v, %v", res, err)
		}
		if got := f.srv.airflow.Conf(airflowDAG); got["date"] != "2026-03-10" || f.srv.airflow.Triggers() != 1 {
			t.Errorf("conf %v, triggers %d", got, f.srv.airflow.Triggers())
		}
	})
}

func TestEveryRunnerNamesAnUnreachableURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		o := &f.cfg.Orchestrators
		o.Dagster.URL, o.Airflow.URL, o.DBTCloud.URL, o.StepFunctions.URL = dead, dead, dead, dead
		o.Dagster.Timeout, o.Airflow.Timeout, o.DBTCloud.Timeout, o.StepFunctions.Timeout = 1500*time.Millisecond, 1500*time.Millisecond, 1500*time.Millisecond, 1500*time.Millisecond
		runners, err := orchestrate.NewRunners(*o)
		if err != nil {
			t.Fatal(err)
		}
		for _, sys := range systems {
			_, err := runners[sys.name].Trigger(f.ctx, orchestrate.RunRequest{Key: "dw-test-1", Target: sys.target, Params: sys.params})
			var te *rest.TransportError
			if !errors.As(err, &te) || te.TimedOut || !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), "timeout 1.5s") {
				t.Errorf("%s trigger: %v", sys.name, err)
			}
			_, err = runners[sys.name].Status(f.ctx, orchestrate.RunRef{System: sys.name, Target: sys.target, RunID: "1"})
			if !errors.As(err, &te) || !strings.Contains(err.Error(), dead) {
				t.Errorf("%s status: %v", sys.name, err)
			}
		}
	})
}

func TestCredentialErrorsAreClear(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		runners, err := orchestrate.NewRunners(f.cfg.Orchestrators)
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("TEST_DBT_TOKEN", "wrong")
		t.Setenv("TEST_AWS_KEY", "AKIAOTHER")
		t.Setenv("TEST_AIRFLOW_PASS", "")
		want := map[orchestrate.System]string{
			orchestrate.DBTCloud:      "answered 401: Invalid token. (the token named by orchestrators.dbt_cloud.token_env needs the Job Runner permission)",
			orchestrate.StepFunctions: "answered UnrecognizedClientException: The security token included in the request is invalid. (check the credentials named by orchestrators.step_functions",
			orchestrate.Airflow:       "environment variable TEST_AIRFLOW_PASS (named by orchestrators.airflow.password_env) is not set",
		}
		for _, sys := range systems[1:] {
			_, err := runners[sys.name].Trigger(f.ctx, orchestrate.RunRequest{Key: "dw-cred-1", Target: sys.target, Params: sys.params})
			if err == nil || !strings.Contains(err.Error(), want[sys.name]) {
				t.Errorf("%s: %v\nwant %q", sys.name, err, want[sys.name])
			}
		}
		if f.srv.dbt.Triggers()+f.srv.sfn.Triggers()+f.srv.airflow.Triggers() != 0 {
			t.Error("a run started without valid credentials")
		}
		if _, err := orchestrate.NewRunners(config.Orchestrators{DBTCloud: &config.Service{AccountID: "acme", TokenEnv: "X"}}); err == nil ||
			!strings.Contains(err.Error(), `account_id "acme" is not valid`) {
			t.Errorf("bad account id: %v", err)
		}
		if _, err := orchestrate.NewRunners(config.Orchestrators{StepFunctions: &config.Service{}}); err == nil ||
			!strings.Contains(err.Error(), "region is not set") {
			t.Errorf("no region: %v", err)
		}
	})
}
