package orchestrate_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dataworkers/dw/internal/orchestrate"
)

// schemaOf builds the tool schema the MCP SDK would and returns its
// required fields and property names.
func schemaOf[T any](t *testing.T) (required, props []string) {
	t.Helper()
	s, err := jsonschema.For[T](nil)
	if err != nil {
		t.Fatal(err)
	}
	for k := range s.Properties {
		props = append(props, k)
	}
	slices.Sort(props)
	return s.Required, props
}

func TestToolInputSchemas(t *testing.T) {
	approval := []string{"domain", "incident_id", "kind", "proposal_id", "request_key"}
	cases := []struct {
		name     string
		required []string
		props    []string
		build    func(*testing.T) ([]string, []string)
	}{
		{"dagster", []string{"job_name", "repository_location_name"}, []string{"job_name", "repository_location_name", "repository_name", "run_config", "tags"}, schemaOf[orchestrate.DagsterJobParams]},
		{"airflow", []string{"dag_id"}, []string{"conf", "dag_id"}, schemaOf[orchestrate.AirflowDAGParams]},
		{"dbt_cloud", []string{"job_id"}, []string{"git_branch", "job_id", "schema_override", "steps_override", "target_name_override", "threads_override", "timeout_seconds_override"}, schemaOf[orchestrate.DBTCloudJobParams]},
		{"step_functions", []string{"state_machine_arn"}, []string{"input", "state_machine_arn"}, schemaOf[orchestrate.StepFunctionsParams]},
		{"poll", nil, []string{"proposal_id", "run_id", "run_key", "upstream_key", "wait_seconds"}, func(t *testing.T) ([]string, []string) {
			r, p := schemaOf[orchestrate.PollParams](t)
			return r, p
		}},
	}
	for _, c := range cases {
		req, props := c.build(t)
		slices.Sort(req)
		want := append([]string{}, c.props...)
		if c.name != "poll" {
			want = append(want, approval...)
		}
		slices.Sort(want)
		if !slices.Equal(req, c.required) || !slices.Equal(props, want) {
			t.Errorf("%s: required %v props %v; want required %v props %v", c.name, req, props, c.required, want)
		}
	}
	if _, err := jsonschema.For[orchestrate.RunResult](nil); err != nil {
		t.Errorf("result schema: %v", err)
	}
}

func TestToolInputsBecomeParams(t *testing.T) {
	var in orchestrate.DBTCloudJobParams
	if err := json.Unmarshal([]byte(`{"proposal_id":"P-1","job_id":40000,"steps_override":["dbt build -s x"],"threads_override":8}`), &in); err != nil {
		t.Fatal(err)
	}
	p := in.RunParams()
	if p.System != orchestrate.DBTCloud || p.Target != "40000" || p.ProposalID != "P-1" || p.Params["threads_override"] != 8 ||
		len(p.Params["steps_override"].([]any)) != 1 {
		t.Errorf("%+v", p)
	}
	d := orchestrate.DagsterJobParams{RepositoryLocationName: "loc", JobName: "job"}.RunParams()
	if d.Target != "loc/__repository__/job" || orchestrate.AssetID(d.System, d.Target) != "dagster://job/job" {
		t.Errorf("%+v", d)
	}
}
