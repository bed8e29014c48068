// Package orchestrate starts approved downstream runs — a Dagster job, an
// Airflow DAG run, a dbt Cloud job, an AWS Step Functions execution — and
// follows them to the end. These are the only runs Data Workers dispatches.
//
// Every dispatch goes through Dispatcher.Run, which asks the approvals
// package first (org-wide stop, autonomy level, approval or open class) and
// dispatches nothing when refused. Under a proposal the run must be exactly
// the proposal's bound action (ActionFor builds both sides), and the
// approval is claimed in the store (approvals.BeginExecution), so across
// processes it starts one run. A run happens at most once per
// idempotency key (the proposal, or an open-class request, plus system and
// target): the key is claimed in the store before the trigger, and each
// system's own idempotency (an Airflow dag_run_id, a Step Functions
// execution name, a Dagster run tag, a marker in a dbt Cloud run's cause)
// lets a retry find a run whose trigger response was lost.
package orchestrate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
)

// System names an orchestrator.
type System string

// The orchestrators a run can be dispatched to.
const (
	Dagster       System = "dagster"
	Airflow       System = "airflow"
	DBTCloud      System = "dbt_cloud"
	StepFunctions System = "step_functions"
)

// Systems lists every system, for validation messages.
var Systems = []System{Dagster, Airflow, DBTCloud, StepFunctions}

func systemNames() []string {
	out := make([]string, len(Systems))
	for i, s := range Systems {
		out[i] = string(s)
	}
	return out
}

// parseSystem accepts the names people type for each system.
func parseSystem(s string) (System, bool) {
	v := strings.ToLower(strings.TrimSpace(s))
	v = strings.NewReplacer("-", "_", " ", "_").Replace(v)
	switch v {
	case "dbt", "dbtcloud":
		v = string(DBTCloud)
	case "stepfunctions", "sfn", "states":
		v = string(StepFunctions)
	}
	return System(v), slices.Contains(Systems, System(v))
}

// RunRequest is one run to start.
type RunRequest struct {
	// Key is the upstream idempotency name: at most one run is started per
	// Key (it becomes the Airflow dag_run_id, the Step Functions execution
	// name, a Dagster run tag and a marker in the dbt Cloud cause).
	Key string
	// Target names what to run: a Dagster "location/repository/job", an
	// Airflow DAG id, a dbt Cloud job id, a state machine ARN.
	Target string
	// Params are the system's run parameters (run config, conf, overrides,
	// execution input).
	Params map[string]any
	// Reason says why the run was started, for the system's own records
	// (the dbt Cloud cause, the Airflow note, a Dagster tag).
	Reason string
}

// RunRef identifies a started run.
type RunRef struct {
	System System `json:"system"`
	Target string `json:"target"`
	RunID  string `json:"run_id"`
	URL    string `json:"url,omitempty"`
	// Existing is true when the system already had a run for the key, so
	// this trigger started nothing new.
	Existing bool `json:"existing"`
}

// State is a run's state, normalised across systems.
type State string

// Run states. Succeeded, failed and canceled are final.
const (
	StateQueued    State = "queued"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
	StateCanceled  State = "canceled"
	// StateUnknown is an upstream status this package does not know; it is
	// kept as not final so polling goes on.
	StateUnknown State = "unknown"
)

// Terminal reports whether the run has ended.
func (s State) Terminal() bool {
	return s == StateSucceeded || s == StateFailed || s == StateCanceled
}

// RunStatus is what a system says about a run.
type RunStatus struct {
	State State `json:"state"`
	// Upstream is the system's own status word (FAILURE, failed, 20, TIMED_OUT).
	Upstream   string    `json:"upstream"`
	Message    string    `json:"message,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// Runner starts and reads runs on one system. Trigger starts at most one
// run per RunRequest.Key, also when called again after a lost response.
type Runner interface {
	System() System
	// Validate checks a request without calling the system.
	Validate(req RunRequest) error
	Trigger(ctx context.Context, req RunRequest) (RunRef, error)
	Status(ctx context.Context, ref RunRef) (RunStatus, error)
	// Location is where target lives on this system as configured: the
	// address from dw.yaml and the target's code location, account or
	// region. An approval binds it, so the same name elsewhere never runs.
	Location(target string) approvals.ActionLocation
}

// InputError is bad input: its message says what was wrong and what is
// valid. Nothing was changed.
type InputError struct{ Msg string }

// Error is the message for the person or model that sent the input.
func (e *InputError) Error() string { return e.Msg }

func invalid(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// AssetID is the context-graph asset a run of target on system acts on,
// in the ids the lineage uses (airflow://dag/<dag_id>, …). A proposal
// approves a run when this id is among its targets.
func AssetID(system System, target string) string {
	switch system {
	case Airflow:
		return "airflow://dag/" + target
	case Dagster:
		// The job name is what people and lineage call a Dagster job.
		return "dagster://job/" + target[strings.LastIndex(target, "/")+1:]
	case DBTCloud:
		// The graph's platform is dbt-cloud (docs/ASSET_IDS.md); dbt_cloud
		// is only the system's name in dw.yaml and run specs, and ids
		// spelled with it fold to this one.
		return "dbt-cloud://job/" + target
	case StepFunctions:
		return "stepfunctions://" + target
	}
	return string(system) + "://" + target
}
