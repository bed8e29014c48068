package connectors

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/orchestrate"
)

// registerRuns adds the approved-run tools: the only run dispatches Data
// Workers makes, each gated by the approvals core (org-wide stop, autonomy
// level, class, an approved proposal for exactly that run).
func registerRuns(s *mcpserver.Server, h *handlers) {
	mcpserver.Add(s, triggerDagsterTool, h.triggerDagster)
	mcpserver.Add(s, triggerAirflowTool, h.triggerAirflow)
	mcpserver.Add(s, triggerDBTCloudTool, h.triggerDBTCloud)
	mcpserver.Add(s, startStepFunctionsTool, h.startStepFunctions)
	mcpserver.Add(s, getRunStatusTool, h.getRunStatus)
}

const runGate = " Dispatches only for an approved proposal naming this run (or a reversible class the domain opened at L3), never under the org-wide stop; " +
	"idempotent on retry (the same approval never starts a second run); the run and its outcome are recorded in the receipt."

var triggerDagsterTool = mcpserver.Tool{
	Name: "trigger_dagster_job", Title: "Launch an approved Dagster job run",
	Description: "Launches a Dagster job through the GraphQL API (launchRun)." + runGate,
	Destructive: false, Idempotent: true, OpenWorld: true,
}

var triggerAirflowTool = mcpserver.Tool{
	Name: "trigger_airflow_dag", Title: "Trigger an approved Airflow DAG run",
	Description: "Triggers an Airflow DAG run through the stable REST API (POST /api/v1/dags/{dag_id}/dagRuns)." + runGate,
	Destructive: false, Idempotent: true, OpenWorld: true,
}

var triggerDBTCloudTool = mcpserver.Tool{
	Name: "trigger_dbt_cloud_job", Title: "Run an approved dbt Cloud job",
	Description: "Runs a dbt Cloud job through the v2 API (POST /api/v2/accounts/{account}/jobs/{job}/run/)." + runGate,
	Destructive: false, Idempotent: true, OpenWorld: true,
}

var startStepFunctionsTool = mcpserver.Tool{
	Name: "start_step_functions_execution", Title: "Start an approved Step Functions execution",
	Description: "Starts an AWS Step Functions execution (StartExecution, named by the approval so a retry never starts a second one)." + runGate,
	Destructive: false, Idempotent: true, OpenWorld: true,
}

var getRunStatusTool = mcpserver.Tool{
	Name: "get_run_status", Title: "Status of an approved run",
	Description: "Reads the status of a run started by a trigger tool from its system (optionally waiting up to 10 minutes for it to end) and records it; a finished run's outcome is written to the receipt once.",
	ReadOnly:    false, Destructive: false, Idempotent: true, OpenWorld: true,
}

// dispatcher builds the dispatcher over the configured orchestrators.
func (h *handlers) dispatcher(ctx context.Context) (*orchestrate.Dispatcher, error) {
	db, err := h.d.Store(ctx)
	if err != nil {
		return nil, err
	}
	runners, err := orchestrate.NewRunners(h.d.Config.Orchestrators)
	if err != nil {
		return nil, fmt.Errorf("orchestrators in dw.yaml: %w", err)
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
	res, err := d.Poll(ctx, in)
	if err != nil {
		return nil, "", err
	}
	return res, res.Summary, nil
}
