package orchestrate_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/orchestrate"
	"github.com/dataworkers/dw/internal/orchestrate/orchestratetest"
	"github.com/dataworkers/dw/internal/rest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestRunTwiceTriggersOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		for _, sys := range systems {
			t.Run(string(sys.name), func(t *testing.T) {
				p := f.approved(sys)
				first, err := f.d.Run(f.ctx, f.params(sys, p.ID))
				if err != nil {
					t.Fatalf("first run: %v", err)
				}
				if first.RunID == "" || first.URL == "" || first.Existing || first.Status != orchestrate.StatusTriggered {
					t.Fatalf("first run: %+v", first)
				}
				second, err := f.d.Run(f.ctx, f.params(sys, strings.ToLower(p.ID)))
				if err != nil {
					t.Fatalf("second run: %v", err)
				}
				if second.RunID != first.RunID || second.RunKey != first.RunKey || !second.Existing {
					t.Fatalf("second run %+v, want the first run %s again", second, first.RunID)
				}
				if n := sys.trigger(f.srv); n != 1 {
					t.Errorf("%s saw %d triggers, want 1", sys.name, n)
				}
				if !strings.Contains(first.Basis, "approved by bob via terminal") || first.Actor != "dw-connectors" || first.ReceiptID != "INC-7" {
					t.Errorf("basis/actor/receipt: %+v", first)
				}
				if n := len(f.steps("INC-7", first.RunKey)); n != 1 {
					t.Errorf("receipt has %d steps for run %s, want 1", n, first.RunKey)
				}
			})
		}
	})
}

func TestLostTriggerAnswerRetryFindsTheRun(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 300*time.Millisecond)
		for _, sys := range systems {
			t.Run(string(sys.name), func(t *testing.T) {
				p := f.approved(sys)
				sys.drop(f.srv, 1, 3*time.Second)
				_, err := f.d.Run(f.ctx, f.params(sys, p.ID))
				var te *rest.TransportError
				if !errors.As(err, &te) || !te.TimedOut || !strings.Contains(err.Error(), "may or may not have started") {
					t.Fatalf("first run: %v, want a timeout that says the run may have started", err)
				}
				if n := sys.trigger(f.srv); n != 1 {
					t.Fatalf("the server started %d runs, want 1 (the request got there)", n)
				}
				got, err := f.d.Get(f.ctx, p.ID)
				if err != nil || got.Status != orchestrate.StatusNotStarted || got.LastError == "" {
					t.Fatalf("after the lost answer: %+v, %v", got, err)
				}
				again, err := f.d.Run(f.ctx, f.params(sys, p.ID))
				if err != nil {
					t.Fatalf("retry: %v", err)
				}
				if n := sys.trigger(f.srv); n != 1 {
					t.Errorf("after the retry the server started %d runs, want 1", n)
				}
				if again.RunID == "" || again.Attempts != 2 || again.Status != orchestrate.StatusTriggered {
					t.Errorf("retry: %+v", again)
				}
				if sys.name != orchestrate.StepFunctions && !again.Existing {
					// Step Functions answers a repeated StartExecution like the first.
					t.Errorf("retry should say the run existed: %+v", again)
				}
				polled, err := f.d.Poll(f.ctx, orchestrate.PollParams{RunKey: again.RunKey, WaitSeconds: 5})
				if err != nil || polled.Status != "succeeded" {
					t.Errorf("the found run is not the server's run: %+v, %v", polled, err)
				}
			})
		}
	})
}

func TestPollToSuccessAndFailure(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		for _, sys := range systems {
			t.Run(string(sys.name), func(t *testing.T) {
				sys.plan(f.srv, orchestratetest.Outcome{Polls: 2})
				p := f.approved(sys)
				res, err := f.d.Run(f.ctx, f.params(sys, p.ID))
				if err != nil {
					t.Fatal(err)
				}
				once, err := f.d.Poll(f.ctx, orchestrate.PollParams{RunKey: res.RunKey})
				if err != nil || once.Terminal || (once.Status != "queued" && once.Status != "running") || once.LastPolledAt.IsZero() {
					t.Fatalf("one read: %+v, %v", once, err)
				}
				done, err := f.d.Poll(f.ctx, orchestrate.PollParams{RunKey: res.RunKey, WaitSeconds: 10})
				if err != nil || done.Status != "succeeded" || !done.Terminal || done.FinishedAt.IsZero() {
					t.Fatalf("wait for success: %+v, %v", done, err)
				}
				steps := f.steps(p.ReceiptID, res.RunKey)
				if len(steps) != 2 || countContaining(steps, `"event":"finished"`) != 1 || countContaining(steps, `"passed":true`) != 1 {
					t.Errorf("receipt lacks the success: %v", steps)
				}
				// A final run is answered from the store.
				reads := sys.trigger(f.srv)
				if again, err := f.d.Poll(f.ctx, orchestrate.PollParams{RunKey: res.RunKey}); err != nil || again.Status != "succeeded" {
					t.Errorf("poll after the end: %+v, %v", again, err)
				}
				if len(f.steps(p.ReceiptID, res.RunKey)) != 2 || sys.trigger(f.srv) != reads {
					t.Error("polling an ended run wrote the receipt again or triggered")
				}

				sys.plan(f.srv, orchestratetest.Outcome{Polls: 1, Fail: true, Message: "model fct_billable_egress failed"})
				p2 := f.approved(sys)
				res2, err := f.d.Run(f.ctx, f.params(sys, p2.ID))
				if err != nil {
					t.Fatal(err)
				}
				failed, err := f.d.Poll(f.ctx, orchestrate.PollParams{RunKey: res2.RunKey, WaitSeconds: 10})
				if err != nil || failed.Status != "failed" || !failed.Terminal || failed.Message == "" {
					t.Fatalf("wait for failure: %+v, %v", failed, err)
				}
				if sys.name == orchestrate.DBTCloud || sys.name == orchestrate.StepFunctions {
					if !strings.Contains(failed.Message, "model fct_billable_egress failed") {
						t.Errorf("failure message %q lacks the system's message", failed.Message)
					}
				}
				if steps := f.steps(p2.ReceiptID, res2.RunKey); countContaining(steps, `"passed":false`) != 1 {
					t.Errorf("receipt lacks the failure: %v", steps)
				}
			})
		}
	})
}

func TestPollTimesOutWhileRunning(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		f.srv.airflow.SetOutcome(airflowDAG, orchestratetest.Outcome{Polls: 1 << 30})
		f.d.PollInterval = 100 * time.Millisecond
		p := f.approved(systems[1])
		res, err := f.d.Run(f.ctx, f.params(systems[1], p.ID))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got, err := f.d.Poll(f.ctx, orchestrate.PollParams{RunKey: res.RunKey, WaitSeconds: 1})
		if err != nil || got.Terminal || got.Status != "running" || !strings.Contains(got.Summary, "still not finished after waiting 1s") {
			t.Fatalf("%+v, %v", got, err)
		}
		if el := time.Since(start); el < time.Second || el > 3*time.Second {
			t.Errorf("waited %s, want about 1s", el)
		}
		if _, err := f.d.Poll(f.ctx, orchestrate.PollParams{RunKey: res.RunKey, WaitSeconds: -1}); err == nil || !strings.Contains(err.Error(), "valid: 0 to 50") {
			t.Errorf("negative wait: %v", err)
		}
		// A wait over the cap (below a client's 60 s timeout) is cut to it
		// and the answer says so; progress is reported on the way.
		f.d.MaxWait = time.Second
		var progress []float64
		f.d.Progress = func(done, total float64, _ string) {
			if total != 1 {
				t.Errorf("progress total %v, want the capped 1 s", total)
			}
			progress = append(progress, done)
		}
		start = time.Now()
		got, err = f.d.Poll(f.ctx, orchestrate.PollParams{RunKey: res.RunKey, WaitSeconds: 600})
		if err != nil || !strings.Contains(got.Summary, "capped at 1") || !strings.Contains(got.Summary, "after waiting 1s") {
			t.Fatalf("capped wait: %+v, %v", got, err)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("a capped wait took %s", el)
		}
		if len(progress) < 2 || !slices.IsSorted(progress) {
			t.Errorf("progress %v, want several rising reports", progress)
		}
		// A cancelled wait says so, not that it waited its full time.
		f.d.MaxWait, f.d.Progress = 0, nil
		ctx, cancel := context.WithTimeout(f.ctx, 300*time.Millisecond)
		defer cancel()
		got, err = f.d.Poll(ctx, orchestrate.PollParams{RunKey: res.RunKey, WaitSeconds: 30})
		if err != nil || !strings.Contains(got.Summary, "cancelled") || strings.Contains(got.Summary, "30s") {
			t.Errorf("cancelled wait: %+v, %v", got, err)
		}
		// The other keys a trigger tool returns find the same run.
		for _, pp := range []orchestrate.PollParams{{RunID: res.RunID}, {UpstreamKey: res.UpstreamKey}, {ProposalID: p.ID}, {RunKey: res.UpstreamKey}} {
			got, err := f.d.Poll(f.ctx, pp)
			if err != nil || got.RunKey != res.RunKey {
				t.Errorf("poll by %+v: %+v, %v", pp, got, err)
			}
		}
	})
}

// refused asserts a refusal that dispatched and recorded nothing.
func refused(t *testing.T, f *fixture, err error, want string) {
	t.Helper()
	if !approvals.IsRefusal(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want a refusal containing %q", err, want)
	}
	total := f.srv.dagster.Triggers() + f.srv.airflow.Triggers() + f.srv.dbt.Triggers() + f.srv.sfn.Triggers()
	if total != 0 {
		t.Errorf("a refused run reached an orchestrator (%d triggers)", total)
	}
	if runs, lerr := f.d.List(f.ctx, ""); lerr != nil || len(runs) != 0 {
		t.Errorf("a refused run was recorded: %v, %v", runs, lerr)
	}
}

func TestRefusals(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		dag := systems[1]
		open := func(target, key string) orchestrate.Params {
			return orchestrate.Params{Approval: orchestrate.Approval{RequestKey: key}, System: orchestrate.Airflow, Target: target}
		}

		// Without approval: pending proposal, and an L2 domain without one.
		pending, err := f.svc.Propose(f.ctx, approvals.NewProposal{Kind: approvals.KindRerun, What: "rerun", Why: "w",
			Targets: []string{dag.asset}, Undo: "none", Proposer: "dw-incidents"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.d.Run(f.ctx, f.params(dag, pending.ID))
		refused(t, f, err, "is pending, awaiting bob")
		_, err = f.d.Run(f.ctx, open("stream_rollup", "INC-9"))
		refused(t, f, err, "domain streaming is at L2 (propose); a rerun needs an approved proposal")

		// Too low a level.
		_, err = f.d.Run(f.ctx, open("loyalty_tiers", "INC-9"))
		refused(t, f, err, "domain loyalty is at L1 (observe)")

		// L3 opens reruns only, and only for the domain's own assets.
		_, err = f.d.Run(f.ctx, orchestrate.Params{Approval: orchestrate.Approval{RequestKey: "INC-9", Kind: approvals.KindBackfill},
			System: orchestrate.Airflow, Target: airflowDAG})
		refused(t, f, err, "not reversible, so it needs an approved proposal")
		_, err = f.d.Run(f.ctx, orchestrate.Params{Approval: orchestrate.Approval{RequestKey: "INC-9", Domain: "loyalty"},
			System: orchestrate.Airflow, Target: airflowDAG})
		refused(t, f, err, "belongs to domain billing, not loyalty")

		// A hold approves pausing the DAG, never running it.
		hold, err := f.svc.Propose(f.ctx, approvals.NewProposal{Kind: approvals.KindHold, What: "pause", Why: "w",
			Targets: []string{dag.asset}, Undo: "unpause", Proposer: "dw-incidents"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.Decide(f.ctx, hold.ID, f.bob, approvals.VerdictApprove, ""); err != nil {
			t.Fatal(err)
		}
		_, err = f.d.Run(f.ctx, f.params(dag, hold.ID))
		refused(t, f, err, "approved a hold, which no orchestrator run carries out")

		// An approval for one DAG does not run another.
		other := f.approvedAction(approvals.KindRerun, orchestrate.Airflow, "another_dag", dag.params)
		_, err = f.d.Run(f.ctx, f.params(dag, other.ID))
		refused(t, f, err, "approved dag_id another_dag, requested sync_metered_usage_to_stripe")

		// Org-wide stop refuses even an approved run and an open class.
		p := f.approved(dag)
		if _, err := f.svc.Stop(f.ctx, "ops-oncall", "bad deploy in progress"); err != nil {
			t.Fatal(err)
		}
		_, err = f.d.Run(f.ctx, f.params(dag, p.ID))
		refused(t, f, err, `org-wide stop in force since 15:05 UTC on 2026-03-10 by os:ops-oncall: "bad deploy in progress"`)
		_, err = f.d.Run(f.ctx, open(airflowDAG, "INC-9"))
		refused(t, f, err, "org-wide stop")

		// Resumed, the same approval runs.
		alice, err := approvals.OSUserDecider(f.cfg, approvals.ChannelTerminal, "bob")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.Resume(f.ctx, alice, "deploy rolled back"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.d.Run(f.ctx, f.params(dag, p.ID)); err != nil {
			t.Errorf("after resume: %v", err)
		}
	})
}

func TestStopStillAnswersARunAlreadyStarted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		p := f.approved(systems[1])
		first, err := f.d.Run(f.ctx, f.params(systems[1], p.ID))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.Stop(f.ctx, "ops-oncall", "freeze"); err != nil {
			t.Fatal(err)
		}
		// The retry dispatches nothing, so it reports the run rather than
		// refusing; a new dispatch is refused.
		again, err := f.d.Run(f.ctx, f.params(systems[1], p.ID))
		if err != nil || again.RunID != first.RunID || !again.Existing {
			t.Errorf("retry under stop: %+v, %v", again, err)
		}
		q := f.approved(systems[0])
		if _, err := f.d.Run(f.ctx, f.params(systems[0], q.ID)); !approvals.IsRefusal(err) {
			t.Errorf("new run under stop: %v", err)
		}
		if f.srv.airflow.Triggers() != 1 || f.srv.dagster.Triggers() != 0 {
			t.Errorf("triggers: airflow %d dagster %d", f.srv.airflow.Triggers(), f.srv.dagster.Triggers())
		}
	})
}

func TestOpenClassRunRecordsInIncidentReceipt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		p := orchestrate.DBTCloudJobParams{Approval: orchestrate.Approval{IncidentID: "INC-12"}, JobID: dbtJob,
			StepsOverride: []string{"dbt build -s fct_billable_egress"}, ThreadsOverride: 4}.RunParams()
		res, err := f.d.Run(f.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if res.Domain != "billing" || res.Kind != "rerun" || res.ReceiptID != "INC-12" || !strings.Contains(res.Basis, `class "rerun" opened`) {
			t.Errorf("%+v", res)
		}
		if _, err := f.d.Run(f.ctx, p); err != nil || f.srv.dbt.Triggers() != 1 {
			t.Errorf("retry: %v, triggers %d", err, f.srv.dbt.Triggers())
		}
		body := f.srv.dbt.Body(dbtJob)
		cause, _ := body["cause"].(string)
		if !strings.Contains(cause, "dw-INC-12-") || body["threads_override"] != float64(4) || len(cause) > 255 {
			t.Errorf("trigger body %v", body)
		}
		steps := f.steps("INC-12", res.RunKey)
		if len(steps) != 1 || !strings.Contains(steps[0], res.RunID) || !strings.Contains(steps[0], res.URL) {
			t.Errorf("incident receipt steps: %v", steps)
		}
		es, _ := approvals.Entries(f.ctx, f.db, "INC-12")
		if len(es) != 1 || es[0].Actor != "dw-connectors" {
			t.Errorf("receipt entries %+v", es)
		}
		doc, err := approvals.Receipt(f.ctx, f.db, "INC-12")
		if err != nil || !doc.Chain.OK {
			t.Errorf("receipt chain: %+v, %v", doc, err)
		}
	})
}

func TestConcurrentRunsTriggerOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		p := f.approved(systems[0])
		var wg sync.WaitGroup
		results := make([]*orchestrate.RunResult, 6)
		errs := make([]error, 6)
		for i := range results {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				results[i], errs[i] = f.d.Run(f.ctx, f.params(systems[0], p.ID))
			}(i)
		}
		wg.Wait()
		runID := ""
		for i := range results {
			if errs[i] != nil {
				if !strings.Contains(errs[i].Error(), "is being carried out by another call") && !strings.Contains(errs[i].Error(), "is being dispatched by another call") {
					t.Errorf("call %d: %v", i, errs[i])
				}
				continue
			}
			if runID == "" {
				runID = results[i].RunID
			}
			if results[i].RunID != runID {
				t.Errorf("call %d got run %s, another %s", i, results[i].RunID, runID)
			}
		}
		if f.srv.dagster.Triggers() != 1 || runID == "" {
			t.Errorf("dagster saw %d launches (run %q), want 1", f.srv.dagster.Triggers(), runID)
		}
		if n := len(f.steps(p.ReceiptID, p.ID+"/dagster/"+dagsterJob)); n != 1 {
			t.Errorf("%d trigger steps in the receipt, want 1", n)
		}
	})
}

func TestUnreachableEndpointNamesURLAndTimeout(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := "http://" + ln.Addr().String()
		ln.Close()
		f.cfg.Orchestrators.Airflow.URL = dead
		f.cfg.Orchestrators.Airflow.Timeout = 700 * time.Millisecond
		f.cfg.Orchestrators.StepFunctions.URL = dead
		f.cfg.Orchestrators.StepFunctions.Timeout = 700 * time.Millisecond
		runners, err := orchestrate.NewRunners(f.cfg.Orchestrators)
		if err != nil {
			t.Fatal(err)
		}
		d := orchestrate.NewDispatcher(db, f.svc, runners, "dw-connectors", f.clk, nil)
		for _, sys := range []system{systems[1], systems[3]} {
			p := f.approved(sys)
			_, err := d.Run(f.ctx, f.params(sys, p.ID))
			var te *rest.TransportError
			if !errors.As(err, &te) || !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), "timeout 700ms") {
				t.Errorf("%s: %v; want the URL %s and the timeout", sys.name, err, dead)
			}
			got, gerr := d.Get(f.ctx, p.ID)
			if gerr != nil || got.Status != orchestrate.StatusNotStarted || !strings.Contains(got.LastError, dead) {
				t.Errorf("%s recorded: %+v, %v", sys.name, got, gerr)
			}
		}
	})
}

func TestBadInputChangesNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		p := f.approved(systems[1])
		cases := []struct {
			p    orchestrate.Params
			want string
		}{
			{orchestrate.Params{Approval: orchestrate.Approval{ProposalID: p.ID}, System: "airflw", Target: airflowDAG}, `unknown system "airflw"; closest: airflow`},
			{orchestrate.Params{Approval: orchestrate.Approval{ProposalID: p.ID}, System: orchestrate.Airflow, Target: "bad dag!"}, "DAG id \"bad dag!\" is not valid"},
			{orchestrate.Params{Approval: orchestrate.Approval{ProposalID: p.ID}, System: orchestrate.Airflow, Target: airflowDAG,
				Params: map[string]any{"confg": map[string]any{}}}, "airflow does not take param confg; valid: conf"},
			{orchestrate.Params{Approval: orchestrate.Approval{ProposalID: p.ID}, System: orchestrate.Dagster, Target: "refresh_usage"}, "want location/job or location/repository/job"},
			{orchestrate.Params{Approval: orchestrate.Approval{ProposalID: p.ID}, System: orchestrate.Dagster, Target: dagsterJob,
				Params: map[string]any{"tags": map[string]any{"dataworkers/run_key": "x"}}}, "is reserved"},
			{orchestrate.Params{System: orchestrate.Airflow, Target: airflowDAG}, "without a proposal_id, name the request with request_key"},
			{orchestrate.Params{Approval: orchestrate.Approval{ProposalID: p.ID, Kind: "rerunn"}, System: orchestrate.Airflow, Target: airflowDAG}, `kind "rerunn" is not a run; closest: rerun (a run carries out one of: rerun, backfill, replay)`},
			{orchestrate.Params{Approval: orchestrate.Approval{ProposalID: "P-NOPE"}, System: orchestrate.Airflow, Target: airflowDAG}, `no proposal "P-NOPE"`},
			{orchestrate.Params{Approval: orchestrate.Approval{ProposalID: p.ID}, System: orchestrate.DBTCloud, Target: "abc"}, "dbt Cloud job id \"abc\" is not valid"},
			{orchestrate.Params{Approval: orchestrate.Approval{ProposalID: p.ID}, System: orchestrate.DBTCloud, Target: "40000",
				Params: map[string]any{"threads_override": "four"}}, "threads_override must be a integer"},
			{orchestrate.Params{Approval: orchestrate.Approval{ProposalID: p.ID}, System: orchestrate.DBTCloud, Target: "40000",
				Params: map[string]any{"threads_override": 0}}, "threads_override 0 is out of range: give 1 to 64"},
			{orchestrate.Params{Approval: orchestrate.Approval{ProposalID: p.ID}, System: orchestrate.DBTCloud, Target: "40000",
				Params: map[string]any{"timeout_seconds_override": 1e7}}, "timeout_seconds_override 10000000 is out of range: give 1 to 86400"},
			{orchestrate.Params{Approval: orchestrate.Approval{ProposalID: p.ID}, System: orchestrate.StepFunctions, Target: "usage-backfill"}, "state machine ARN \"usage-backfill\" is not valid"},
		}
		for _, c := range cases {
			_, err := f.d.Run(f.ctx, c.p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%+v: %v, want %q", c.p, err, c.want)
			}
		}
		if runs, err := f.d.List(f.ctx, ""); err != nil || len(runs) != 0 {
			t.Errorf("bad input recorded runs: %+v, %v", runs, err)
		}
		if f.srv.airflow.Triggers()+f.srv.dagster.Triggers() != 0 {
			t.Error("bad input reached an orchestrator")
		}
		// A retry with other params is not the same run.
		if _, err := f.d.Run(f.ctx, f.params(systems[1], p.ID)); err != nil {
			t.Fatal(err)
		}
		changed := f.params(systems[1], p.ID)
		changed.Params = map[string]any{"conf": map[string]any{"date": "2026-03-11"}}
		if _, err := f.d.Run(f.ctx, changed); err == nil || !strings.Contains(err.Error(), "these differ") {
			t.Errorf("changed params: %v", err)
		}
	})
}

func TestDagsterErrorsAreClear(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		missing := f.approvedAction(approvals.KindRerun, orchestrate.Dagster, "billing_location/__repository__/missing_job", nil)
		_, err := f.d.Run(f.ctx, orchestrate.DagsterJobParams{Approval: orchestrate.Approval{ProposalID: missing.ID},
			RepositoryLocationName: "billing_location", JobName: "missing_job"}.RunParams())
		if err == nil || !strings.Contains(err.Error(), "job missing_job not found in repository __repository__ of location billing_location") ||
			!strings.Contains(err.Error(), "Nothing was started") {
			t.Errorf("unknown job: %v", err)
		}
		badConfig := f.approvedAction(approvals.KindRerun, orchestrate.Dagster, dagsterJob, map[string]any{"run_config": map[string]any{"opz": map[string]any{}}})
		_, err = f.d.Run(f.ctx, orchestrate.DagsterJobParams{Approval: orchestrate.Approval{ProposalID: badConfig.ID},
			RepositoryLocationName: "billing_location", JobName: "refresh_usage", RunConfig: map[string]any{"opz": map[string]any{}}}.RunParams())
		if err == nil || !strings.Contains(err.Error(), `run config for job refresh_usage is invalid: Received unexpected config entry "opz"`) {
			t.Errorf("bad run config: %v", err)
		}
		if f.srv.dagster.Triggers() != 0 {
			t.Error("a failed launch counted as a run")
		}
		p := f.approvedAction(approvals.KindRerun, orchestrate.Dagster, dagsterJob, map[string]any{"tags": map[string]any{"team": "billing"}})
		res, err := f.d.Run(f.ctx, orchestrate.DagsterJobParams{Approval: orchestrate.Approval{ProposalID: p.ID},
			RepositoryLocationName: "billing_location", JobName: "refresh_usage", Tags: map[string]string{"team": "billing"}}.RunParams())
		if err != nil {
			t.Fatal(err)
		}
		tags := f.srv.dagster.RunTags(dagsterJob)
		if len(tags) != 1 || tags[0]["team"] != "billing" || !strings.HasPrefix(tags[0][orchestrate.DagsterKeyTag], "dw-"+p.ID+"-") ||
			!strings.Contains(res.URL, "/runs/"+res.RunID) {
			t.Errorf("tags %v, result %+v", tags, res)
		}
	})
}

func TestBackfillProposalRunsItsBoundAction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		p := f.approvedAction(approvals.KindBackfill, orchestrate.StepFunctions, stateMachine, map[string]any{"input": map[string]any{"from": "2026-03-10T00:00:00Z"}})
		res, err := f.d.Run(f.ctx, orchestrate.StepFunctionsParams{Approval: orchestrate.Approval{ProposalID: p.ID},
			StateMachineARN: stateMachine, Input: map[string]any{"from": "2026-03-10T00:00:00Z"}}.RunParams())
		if err != nil {
			t.Fatal(err)
		}
		if res.Kind != approvals.KindBackfill || f.srv.sfn.Input(stateMachine) != `{"from":"2026-03-10T00:00:00Z"}` {
			t.Errorf("%+v, input %s", res, f.srv.sfn.Input(stateMachine))
		}
	})
}

func TestStepFunctionsRetryAfterTheExecutionEnded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		sys := systems[3]
		sys.plan(f.srv, orchestratetest.Outcome{Polls: 0})
		p := f.approved(sys)
		// The answer is lost, and by the retry the execution has ended: AWS
		// then answers ExecutionAlreadyExists, and the runner accepts the
		// execution because its input is the same.
		sys.drop(f.srv, 1, 3*time.Second)
		f.cfg.Orchestrators.StepFunctions.Timeout = 300 * time.Millisecond
		runners, _ := orchestrate.NewRunners(f.cfg.Orchestrators)
		d := orchestrate.NewDispatcher(db, f.svc, runners, "dw-connectors", f.clk, nil)
		if _, err := d.Run(f.ctx, f.params(sys, p.ID)); err == nil {
			t.Fatal("the lost answer was not an error")
		}
		ended, err := runners[orchestrate.StepFunctions].Status(f.ctx, orchestrate.RunRef{RunID: "arn:aws:states:us-east-1:123456789012:execution:usage-backfill:" + mustKey(t, d, p.ID)})
		if err != nil || !ended.State.Terminal() {
			t.Fatalf("execution did not end: %+v, %v", ended, err)
		}
		res, err := d.Run(f.ctx, f.params(sys, p.ID))
		if err != nil || !res.Existing || f.srv.sfn.Triggers() != 1 {
			t.Fatalf("retry: %+v, %v (triggers %d)", res, err, f.srv.sfn.Triggers())
		}
		// Another input under the same name is someone else's execution.
		r := runners[orchestrate.StepFunctions]
		_, err = r.Trigger(f.ctx, orchestrate.RunRequest{Key: mustKey(t, d, p.ID), Target: stateMachine, Params: map[string]any{"input": map[string]any{"x": 1.0}}})
		if err == nil || !strings.Contains(err.Error(), "already exists") || !strings.Contains(err.Error(), "with another input") {
			t.Errorf("other input: %v", err)
		}
	})
}

// mustKey is the upstream name of a proposal's single run, read from the
// receipt step that records it (or, before the trigger succeeded, from the
// server's own records via the run key).
func mustKey(t *testing.T, d *orchestrate.Dispatcher, proposalID string) string {
	t.Helper()
	r, err := d.Get(t.Context(), proposalID)
	if err != nil {
		t.Fatal(err)
	}
	return r.UpstreamKey
}

func TestFindRunByKeyProposalOrRunID(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		if _, err := f.d.Poll(f.ctx, orchestrate.PollParams{RunKey: "P-NONE"}); err == nil || !strings.Contains(err.Error(), "no run has been dispatched yet") {
			t.Errorf("empty store: %v", err)
		}
		p := f.approved(systems[0])
		a, err := f.d.Run(f.ctx, f.params(systems[0], p.ID))
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{a.RunKey, a.RunID, strings.ToLower(p.ID)} {
			if got, err := f.d.Get(f.ctx, key); err != nil || got.RunKey != a.RunKey {
				t.Errorf("Get(%s): %+v, %v", key, got, err)
			}
		}
		if _, err := f.d.Get(f.ctx, a.RunKey+"x"); err == nil || !strings.Contains(err.Error(), "closest: "+a.RunKey) {
			t.Errorf("misspelt key: %v", err)
		}
		runs, err := f.d.List(f.ctx, p.ID)
		if err != nil || len(runs) != 1 {
			t.Errorf("list: %d, %v", len(runs), err)
		}
	})
}
