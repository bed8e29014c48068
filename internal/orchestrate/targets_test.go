package orchestrate

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/dataworkers/dw/internal/config"
)

// recorder is an orchestrator that answers every request and keeps the
// request line exactly as it arrived.
type recorder struct {
	mu    sync.Mutex
	lines []string
	body  string
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	rc.lines = append(rc.lines, r.Method+" "+r.RequestURI)
	body := rc.body
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(body))
}

func (rc *recorder) got() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.lines...)
}

// hostileRunners are the HTTP runners, each against its own recorder.
func hostileRunners(t *testing.T) (Runners, map[System]*recorder) {
	t.Helper()
	recs := map[System]*recorder{
		Airflow:  {body: `{"dag_run_id":"dw-k","dag_id":"x","state":"queued"}`},
		Dagster:  {body: `{"data":{}}`},
		DBTCloud: {body: `{"data":[]}`},
	}
	urls := map[System]string{}
	for sys, rc := range recs {
		srv := httptest.NewServer(rc)
		t.Cleanup(srv.Close)
		urls[sys] = srv.URL
	}
	t.Setenv("DW_TEST_DBT_TOKEN", "dbtc_x")
	rs, err := NewRunners(config.Orchestrators{
		Airflow:       &config.Service{URL: urls[Airflow]},
		Dagster:       &config.Service{URL: urls[Dagster]},
		DBTCloud:      &config.Service{URL: urls[DBTCloud], AccountID: "7", TokenEnv: "DW_TEST_DBT_TOKEN"},
		StepFunctions: &config.Service{Region: "us-east-1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return rs, recs
}

// A target that could change the request's path (a parent directory, an
// escaped one, a slash, a query, a fragment, a space, a control or
// invisible character) is refused by its system's rule when proposed
// (ActionFor), when dispatched (Validate, as Dispatcher.prepare calls it)
// and by Trigger itself, before any request is sent.
func TestHostileTargetsAreRefusedBeforeAnyRequest(t *testing.T) {
	rs, recs := hostileRunners(t)
	hostile := []string{"..", ".", "%2e%2e", "%2E%2E", "../x", "x/..", "a/b", "x?y=1", "x#y", "x y", "x%2Fy", "x\ny", "x\u200b", "dag\\..", ""}
	dagsterHostile := []string{"../__repository__/job", "loc/../job", "loc/__repository__/..", "./job", "loc/repo/job?x", "loc/repo/jo b",
		"loc/repo/job#x", "loc/%2e%2e/job", "loc/repo/job/extra", "loc//job", "loc/repo/job-x", "loc\u200b/job"}
	cases := map[System][]string{
		Airflow:  hostile,
		DBTCloud: append([]string{"40000/..", "-1", "1e3", "4 0", "+1", "4000000000000000000000"}, hostile...),
		// a/b is location/job to Dagster: a valid target.
		Dagster:       append(dagsterHostile, slices.DeleteFunc(slices.Clone(hostile), func(s string) bool { return s == "a/b" })...),
		StepFunctions: append([]string{"arn:aws:states:us-east-1:123456789012:stateMachine:a/..", "arn:aws:states:us-east-1:123456789012:stateMachine:..", "arn:aws:states:us-east-1:12345678901:stateMachine:a"}, hostile...),
	}
	ctx := context.Background()
	for sys, targets := range cases {
		runner := rs[sys]
		for _, target := range targets {
			var ie *InputError
			if _, err := ActionFor(rs, string(sys), target, nil); !errors.As(err, &ie) {
				t.Errorf("%s: proposing %q: want an input error, got %v", sys, target, err)
			}
			if target == "" {
				continue // ActionFor and prepare refuse an empty target before the runner sees it
			}
			if err := runner.Validate(RunRequest{Key: "dw-k", Target: target}); !errors.As(err, &ie) {
				t.Errorf("%s: validating %q: want an input error, got %v", sys, target, err)
			}
			if sys == StepFunctions {
				continue // no request is sent: Trigger would reach AWS
			}
			if _, err := runner.Trigger(ctx, RunRequest{Key: "dw-k", Target: target}); !errors.As(err, &ie) {
				t.Errorf("%s: triggering %q: want an input error, got %v", sys, target, err)
			}
		}
		if rec := recs[sys]; rec != nil {
			if got := rec.got(); len(got) != 0 {
				t.Errorf("%s: hostile targets reached the server: %q", sys, got)
			}
		}
	}
}

// Valid targets pass each system's rule, and every value in a path is one
// escaped segment: the request lines are exactly these.
func TestRequestPathsAreBuiltPerSegment(t *testing.T) {
	rs, recs := hostileRunners(t)
	ctx := context.Background()

	for _, c := range []struct {
		sys    System
		target string
	}{
		{Airflow, "sync_metered_usage_to_stripe"}, {Airflow, "a.b-c_1"}, {Airflow, "..."},
		{Dagster, "billing_location/__repository__/refresh_usage"}, {Dagster, "my_pkg.defs/refresh_usage"}, {Dagster, "repo-1.py/r/j"},
		{DBTCloud, "40000"},
		{StepFunctions, "arn:aws:states:us-east-1:123456789012:stateMachine:usage-backfill"},
		{StepFunctions, "arn:aws-us-gov:states:us-gov-west-1:123456789012:stateMachine:a_b:prod"},
	} {
		if _, err := ActionFor(rs, string(c.sys), c.target, nil); err != nil {
			t.Errorf("%s %q refused: %v", c.sys, c.target, err)
		}
	}

	air := rs[Airflow].(*AirflowRunner)
	if _, err := air.Trigger(ctx, RunRequest{Key: "dw-k", Target: "sync.v2-x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := air.Status(ctx, RunRef{System: Airflow, Target: "sync.v2-x", RunID: "manual/../x?y#z"}); err != nil {
		t.Fatal(err)
	}
	// A run recorded before the rule was strict is not read through a
	// path it could change.
	if _, err := air.Status(ctx, RunRef{System: Airflow, Target: "..", RunID: "dw-k"}); err == nil {
		t.Error("status of a run of DAG .. was read")
	}
	want := []string{"POST /api/v1/dags/sync.v2-x/dagRuns", "GET /api/v1/dags/sync.v2-x/dagRuns/manual%2F..%2Fx%3Fy%23z"}
	if got := recs[Airflow].got(); !slices.Equal(got, want) {
		t.Errorf("airflow requests:\n got %q\nwant %q", got, want)
	}
	if u := air.runURL("sync", "a/../b"); u != air.c.base.String()+"/dags/sync/grid?dag_run_id=a%2F..%2Fb" {
		t.Errorf("airflow run URL %s", u)
	}

	// The recorder's answers are not what dbt Cloud says (the calls fail
	// on decoding); the request lines are the point.
	dbt := rs[DBTCloud].(*DBTCloudRunner)
	_, _ = dbt.Status(ctx, RunRef{System: DBTCloud, Target: "40000", RunID: "1/../../jobs/2/run"})
	_, _ = dbt.Trigger(ctx, RunRequest{Key: "dw-k", Target: "40000"})
	wantDBT := []string{
		"GET /api/v2/accounts/7/runs/1%2F..%2F..%2Fjobs%2F2%2Frun/",
		"GET /api/v2/accounts/7/runs/?include_related=%5B%22trigger%22%5D&job_definition_id=40000&limit=" + strconv.Itoa(dbtLookback) + "&order_by=-id",
		"POST /api/v2/accounts/7/jobs/40000/run/",
	}
	if got := recs[DBTCloud].got(); !slices.Equal(got, wantDBT) {
		t.Errorf("dbt Cloud requests:\n got %q\nwant %q", got, wantDBT)
	}

	dag := rs[Dagster].(*DagsterRunner)
	if u := dag.runURL("abc/../../x?y"); u != dag.base+"/runs/abc%2F..%2F..%2Fx%3Fy" {
		t.Errorf("dagster run URL %s", u)
	}
}
