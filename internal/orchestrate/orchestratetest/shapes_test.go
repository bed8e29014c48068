package orchestratetest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// The field lists below are the documented response objects: Airflow's
// DAGRun schema (stable REST API v1), dbt Cloud's v2 Run object and AWS's
// DescribeExecution output. The fakes must answer with all of them.

func keys(t *testing.T, body []byte, path ...string) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	for _, p := range path {
		v = v.(map[string]any)[p]
	}
	var out []string
	for k := range v.(map[string]any) {
		out = append(out, k)
	}
	return out
}

func missing(have, want []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}

func do(t *testing.T, method, url, body string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func TestAirflowShapes(t *testing.T) {
	s := NewAirflowServer("d")
	defer s.Close()
	dagRun := []string{"conf", "dag_id", "dag_run_id", "data_interval_end", "data_interval_start", "end_date", "execution_date",
		"external_trigger", "last_scheduling_decision", "logical_date", "note", "run_type", "start_date", "state"}
	code, _, b := do(t, "POST", s.URL()+"/api/v1/dags/d/dagRuns", `{"dag_run_id":"r1","conf":{"a":1}}`, nil)
	if code != 200 || len(missing(keys(t, b), dagRun)) > 0 {
		t.Errorf("trigger %d, missing %v", code, missing(keys(t, b), dagRun))
	}
	code, hdr, b := do(t, "POST", s.URL()+"/api/v1/dags/d/dagRuns", `{"dag_run_id":"r1"}`, nil)
	if code != 409 || hdr.Get("Content-Type") != "application/problem+json" || len(missing(keys(t, b), []string{"detail", "status", "title", "type"})) > 0 {
		t.Errorf("conflict %d %s", code, b)
	}
	if code, _, b := do(t, "GET", s.URL()+"/api/v1/dags/d/dagRuns/r1", "", nil); code != 200 || !bytes.Contains(b, []byte(`"state":"queued"`)) {
		t.Errorf("get %d %s", code, b)
	}
	if code, _, _ := do(t, "POST", s.URL()+"/api/v1/dags/nope/dagRuns", `{}`, nil); code != 404 {
		t.Errorf("unknown DAG: %d", code)
	}
}

func TestDBTCloudShapes(t *testing.T) {
	s := NewDBTCloudServer(7)
	defer s.Close()
	auth := map[string]string{"Authorization": "Token t", "Content-Type": "application/json"}
	run := []string{"id", "trigger_id", "account_id", "environment_id", "project_id", "job_definition_id", "status", "dbt_version",
		"git_branch", "git_sha", "status_message", "created_at", "updated_at", "dequeued_at", "started_at", "finished_at",
		"trigger", "job", "run_steps", "status_humanized", "in_progress", "is_complete", "is_success", "is_error", "is_cancelled", "href", "job_id"}
	base := s.URL() + "/api/v2/accounts/" + DBTCloudAccount
	code, _, b := do(t, "POST", base+"/jobs/7/run/", `{"cause":"test"}`, auth)
	if code != 200 || len(missing(keys(t, b, "data"), run)) > 0 || len(missing(keys(t, b, "status"), []string{"code", "is_success", "user_message", "developer_message"})) > 0 {
		t.Errorf("trigger %d missing %v", code, missing(keys(t, b, "data"), run))
	}
	if code, _, b := do(t, "GET", base+`/runs/?job_definition_id=7&order_by=-id&include_related=["trigger"]`, "", auth); code != 200 || !bytes.Contains(b, []byte(`"cause":"test"`)) {
		t.Errorf("list %d %s", code, b)
	}
	if code, _, _ := do(t, "POST", base+"/jobs/7/run/", `{}`, auth); code != 400 {
		t.Errorf("no cause: %d", code)
	}
	if code, _, _ := do(t, "POST", base+"/jobs/7/run/", `{"cause":"x"}`, nil); code != 401 {
		t.Errorf("no token: %d", code)
	}
	if code, _, _ := do(t, "GET", s.URL()+"/api/v2/accounts/1/runs/", "", auth); code != 404 {
		t.Errorf("other account: %d", code)
	}
}

func TestDagsterShapes(t *testing.T) {
	s := NewDagsterServer("loc/__repository__/job")
	defer s.Close()
	launch := `{"query":"mutation M($executionParams: ExecutionParams!) { launchRun(executionParams: $executionParams) { __typename } }",
		"variables":{"executionParams":{"selector":{"repositoryLocationName":"loc","repositoryName":"__repository__","jobName":"job"}}}}`
	code, _, b := do(t, "POST", s.URL()+"/graphql", launch, nil)
	if code != 200 || !bytes.Contains(b, []byte(`"__typename":"LaunchRunSuccess"`)) {
		t.Errorf("launch %d %s", code, b)
	}
	code, _, b = do(t, "POST", s.URL()+"/graphql", `{"query":"query { pipelinesOrError(x: 1) { __typename } }"}`, nil)
	if code != 200 || !bytes.Contains(b, []byte(`"errors"`)) {
		t.Errorf("unknown field %d %s", code, b)
	}
}

func TestStepFunctionsShapes(t *testing.T) {
	arn := "arn:aws:states:us-east-1:123456789012:stateMachine:m"
	s := NewStepFunctionsServer(arn)
	defer s.Close()
	code, hdr, b := do(t, "POST", s.URL()+"/", `{"stateMachineArn":"x"}`, map[string]string{"Content-Type": "application/x-amz-json-1.0",
		"X-Amz-Target": "AWSStepFunctions.StartExecution"})
	if code != 400 || hdr.Get("X-Amzn-ErrorType") != "MissingAuthenticationTokenException" || !bytes.Contains(b, []byte(`"__type"`)) {
		t.Errorf("unsigned: %d %v %s", code, hdr, b)
	}
}
