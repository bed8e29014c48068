package orchestrate

import (
	"strconv"
)

// The inputs below are one per trigger tool (trigger_dagster_job,
// trigger_airflow_dag, trigger_dbt_cloud_job, start_step_functions_execution);
// each turns into Params for Dispatcher.Run. get_run_status takes PollParams.

// DagsterJobParams triggers a Dagster job.
type DagsterJobParams struct {
	Approval
	RepositoryLocationName string            `json:"repository_location_name" jsonschema:"code location that holds the job, as shown under Deployment in the Dagster UI"`
	RepositoryName         string            `json:"repository_name,omitempty" jsonschema:"repository within the location; default __repository__ (a location built with Definitions)"`
	JobName                string            `json:"job_name" jsonschema:"the job to launch"`
	RunConfig              map[string]any    `json:"run_config,omitempty" jsonschema:"the job's run config (ops, resources, …), as in the launchpad"`
	Tags                   map[string]string `json:"tags,omitempty" jsonschema:"extra run tags; tags under dataworkers/ are reserved"`
}

// RunParams is the dispatch this input asks for.
func (p DagsterJobParams) RunParams() Params {
	params := map[string]any{}
	if p.RunConfig != nil {
		params["run_config"] = p.RunConfig
	}
	if len(p.Tags) > 0 {
		tags := map[string]any{}
		for k, v := range p.Tags {
			tags[k] = v
		}
		params["tags"] = tags
	}
	return Params{Approval: p.Approval, System: Dagster, Target: DagsterTarget(p.RepositoryLocationName, p.RepositoryName, p.JobName), Params: params}
}

// AirflowDAGParams triggers an Airflow DAG run.
type AirflowDAGParams struct {
	Approval
	DagID string         `json:"dag_id" jsonschema:"the DAG to run, e.g. sync_metered_usage_to_stripe"`
	Conf  map[string]any `json:"conf,omitempty" jsonschema:"the run's conf (dag_run.conf), e.g. {\"date\": \"2026-03-10\"}"`
}

// RunParams is the dispatch this input asks for.
func (p AirflowDAGParams) RunParams() Params {
	params := map[string]any{}
	if p.Conf != nil {
		params["conf"] = p.Conf
	}
	return Params{Approval: p.Approval, System: Airflow, Target: p.DagID, Params: params}
}

// DBTCloudJobParams triggers a dbt Cloud job.
type DBTCloudJobParams struct {
	Approval
	JobID                  int64    `json:"job_id" jsonschema:"the dbt Cloud job id (the number after /jobs/ in its URL)"`
	StepsOverride          []string `json:"steps_override,omitempty" jsonschema:"dbt commands to run instead of the job's, e.g. [\"dbt build -s fct_billable_egress\"]"`
	GitBranch              string   `json:"git_branch,omitempty" jsonschema:"branch to run instead of the environment's"`
	SchemaOverride         string   `json:"schema_override,omitempty" jsonschema:"schema to build into instead of the job's"`
	TargetNameOverride     string   `json:"target_name_override,omitempty" jsonschema:"value of target.name for this run"`
	ThreadsOverride        int      `json:"threads_override,omitempty" jsonschema:"threads for this run"`
	TimeoutSecondsOverride int      `json:"timeout_seconds_override,omitempty" jsonschema:"run timeout in seconds"`
}

// RunParams is the dispatch this input asks for.
func (p DBTCloudJobParams) RunParams() Params {
	params := map[string]any{}
	if len(p.StepsOverride) > 0 {
		steps := make([]any, len(p.StepsOverride))
		for i, s := range p.StepsOverride {
			steps[i] = s
		}
		params["steps_override"] = steps
	}
	for k, v := range map[string]string{"git_branch": p.GitBranch, "schema_override": p.SchemaOverride, "target_name_override": p.TargetNameOverride} {
		if v != "" {
			params[k] = v
		}
	}
	if p.ThreadsOverride != 0 {
		params["threads_override"] = p.ThreadsOverride
	}
	if p.TimeoutSecondsOverride != 0 {
		params["timeout_seconds_override"] = p.TimeoutSecondsOverride
	}
	return Params{Approval: p.Approval, System: DBTCloud, Target: strconv.FormatInt(p.JobID, 10), Params: params}
}

// StepFunctionsParams starts a Step Functions execution.
type StepFunctionsParams struct {
	Approval
	StateMachineARN string         `json:"state_machine_arn" jsonschema:"the state machine, arn:aws:states:<region>:<account>:stateMachine:<name>"`
	Input           map[string]any `json:"input,omitempty" jsonschema:"the execution's JSON input"`
}

// RunParams is the dispatch this input asks for.
func (p StepFunctionsParams) RunParams() Params {
	params := map[string]any{}
	if p.Input != nil {
		params["input"] = p.Input
	}
	return Params{Approval: p.Approval, System: StepFunctions, Target: p.StateMachineARN, Params: params}
}
