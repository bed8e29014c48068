package connectors

import (
	"context"
	"github.com/google/jsonschema-go/jsonschema"
	"log/slog"

	"github.com/dataworkers/dw/internal/deps/clients"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/orchestrate"
)

// registerRuns adds the approved-run tools: the only run dispatches Data
// Workers makes, each gated by the approvals core (org-wide stop, autonomy
// level, class, an approved proposal whose bound action is exactly that
// run, claimed once in the store).
func registerRuns(s *mcpserver.Server, h *handlers) {
	mcpserver.Add(s, triggerDagsterTool, h.triggerDagster)
	mcpserver.Add(s, triggerAirflowTool, h.triggerAirflow)
	mcpserver.Add(s, triggerDBTCloudTool, h.triggerDBTCloud)
	mcpserver.Add(s, startStepFunctionsTool, h.startStepFunctions)
	mcpserver.Add(s, getRunStatusTool, h.getRunStatus)
}

// maxJSONInteger is the largest whole number a JSON number carries
// exactly (2^53 - 1): a job id past it would reach the API changed.
const maxJSONInteger = 1<<53 - 1

const runGate = " Dispatches only for an approved proposal whose bound action is exactly this run: system, target, location (instance, Dagster code location and repository, dbt Cloud account, AWS region and account), every param and the target's domain; any difference is refused and named, and notes in the proposal's details count for nothing. " +
	"Without a proposal, only a reversible class the domain opened at L3 runs. Never under the org-wide stop; the approval is claimed in the store, so across processes it starts one run, and a retry returns that run; the run and its outcome are recorded in the receipt."

var triggerDagsterTool = mcpserver.Tool{
	Name: "trigger_dagster_job", Title: "Launch an approved Dagster job run",
	Description: "Launches a Dagster job through the GraphQL API (launchRun)." + runGate,
	Destructive: true, Idempotent: true, OpenWorld: true, // starts a job outside Data Workers
}

var triggerAirflowTool = mcpserver.Tool{
	Name: "trigger_airflow_dag", Title: "Trigger an approved Airflow DAG run",
	Description: "Triggers an Airflow DAG run through the stable REST API (POST /api/v1/dags/{dag_id}/dagRuns)." + runGate,
	Destructive: true, Idempotent: true, OpenWorld: true, // starts a job outside Data Workers
}

var triggerDBTCloudTool = mcpserver.Tool{
	Name: "trigger_dbt_cloud_job", Title: "Run an approved dbt Cloud job",
	InputSchema: mcpserver.InputSchema[orchestrate.DBTCloudJobParams](func(s *jsonschema.Schema) {
		mcpserver.Range(s, "job_id", 1, maxJSONInteger)
		mcpserver.Range(s, "threads_override", 1, orchestrate.MaxDBTThreads)
		mcpserver.Range(s, "timeout_seconds_override", 1, orchestrate.MaxDBTTimeoutSeconds)
	}),
	Description: "Runs a dbt Cloud job through the v2 API (POST /api/v2/accounts/{account}/jobs/{job}/run/)." + runGate,
	Destructive: true, Idempotent: true, OpenWorld: true, // starts a job outside Data Workers
}

var startStepFunctionsTool = mcpserver.Tool{
	Name: "start_step_functions_execution", Title: "Start an approved Step Functions execution",
	Description: "Starts an AWS Step Functions execution (StartExecution, named by the approval so a retry never starts a second one)." + runGate,
	Destructive: true, Idempotent: true, OpenWorld: true, // starts a job outside Data Workers
}

var getRunStatusTool = mcpserver.Tool{
	Name: "get_run_status", Title: "Status of an approved run",
	InputSchema: mcpserver.InputSchema[orchestrate.PollParams](func(s *jsonschema.Schema) {
		mcpserver.Range(s, "wait_seconds", 0, orchestrate.MaxWait.Seconds())
	}),
	Description: "Reads the status of a run started by a trigger tool from its system and records it; a finished run's outcome is written to the receipt once. " +
		"Name the run by any key a trigger tool returned: run_key, run_id, upstream_key or proposal_id. wait_seconds waits for the run to end, at most 50 s per call (longer waits are capped so the answer beats a client's 60 s timeout; call again to keep waiting), with progress notifications while it waits.",
	ReadOnly: false, Destructive: false, Idempotent: true, OpenWorld: true,
}

// dispatcher builds the dispatcher over the configured orchestrators.
func (h *handlers) dispatcher(ctx context.Context) (*orchestrate.Dispatcher, error) {
	db, err := h.d.Store(ctx)
	if err != nil {
		return nil, err
	}
	runners, err := clients.Runners(h.d)
	if err != nil {
		return nil, err
	}
	svc, err := h.approvalService(ctx)
	if err != nil {
		return nil, err
	}
	return orchestrate.NewDispatcher(db, svc, runners, Name, h.d.Clock, slog.Default()), nil
}

func (h *handlers) run(ctx context.Context, p orchestrate.Params) (*orchestrate.RunResult, string, error) {
	d, err := h.dispatcher(ctx)
	if err != nil {
		return nil, "", err
	}
	res, err := d.Run(ctx, p)
	if err != nil {
		return nil, "", err
	}
	return res, res.Summary, nil
}

func (h *handlers) triggerDagster(ctx context.Context, in orchestrate.DagsterJobParams) (*orchestrate.RunResult, string, error) {
	return h.run(ctx, in.RunParams())
}

func (h *handlers) triggerAirflow(ctx context.Context, in orchestrate.AirflowDAGParams) (*orchestrate.RunResult, string, error) {
	return h.run(ctx, in.RunParams())
}

func (h *handlers) triggerDBTCloud(ctx context.Context, in orchestrate.DBTCloudJobParams) (*orchestrate.RunResult, string, error) {
	return h.run(ctx, in.RunParams())
}

func (h *handlers) startStepFunctions(ctx context.Context, in orchestrate.StepFunctionsParams) (*orchestrate.RunResult, string, error) {
	return h.run(ctx, in.RunParams())
}

func (h *handlers) getRunStatus(ctx context.Context, in orchestrate.PollParams) (*orchestrate.RunResult, string, error) {
	d, err := h.dispatcher(ctx)
	if err != nil {
		return nil, "", err
	}
	d.Progress = func(done, total float64, msg string) { mcpserver.Progress(ctx, done, total, msg) }
	res, err := d.Poll(ctx, in)
	if err != nil {
		return nil, "", err
	}
	return res, res.Summary, nil
}
