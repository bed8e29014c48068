package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
)

// AirflowRunner triggers DAG runs over Airflow's stable REST API (v1,
// Airflow 2). The idempotency key is the dag_run_id, which Airflow keeps
// unique per DAG: a second POST with it answers 409 Conflict, and the
// runner then reads the run that exists.
type AirflowRunner struct {
	c *restClient
}

// NewAirflowRunner builds a runner for the webserver at svc.URL. Basic
// auth comes from username_env/password_env; token_env, when set, names a
// bearer token instead.
func NewAirflowRunner(svc *config.Service) (*AirflowRunner, error) {
	c, err := newRESTClient(Airflow, svc, "")
	if err != nil {
		return nil, err
	}
	basic := basicAuth(svc, Airflow)
	c.auth = func(r *http.Request) error {
		if svc.TokenEnv != "" {
			tok, err := config.Secret(svc.TokenEnv, "orchestrators.airflow.token_env")
			if err != nil {
				return err
			}
			r.Header.Set("Authorization", "Bearer "+tok)
			return nil
		}
		return basic(r)
	}
	c.message = airflowMessage
	return &AirflowRunner{c: c}, nil
}

// airflowMessage reads Airflow's problem-details error body.
func airflowMessage(body []byte) string {
	var p struct {
		Title  string `json:"title"`
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &p) != nil || (p.Title == "" && p.Detail == "") {
		return ""
	}
	if p.Detail == "" {
		return p.Title
	}
	if p.Title == "" {
		return p.Detail
	}
	return p.Title + ": " + p.Detail
}

// System is Airflow.
func (r *AirflowRunner) System() System { return Airflow }

// Location is the Airflow webserver's URL.
func (r *AirflowRunner) Location(string) approvals.ActionLocation {
	return approvals.ActionLocation{Instance: approvals.NormalizeURL(r.c.base.String())}
}

// dagIDPattern is Airflow's rule for DAG ids (airflow.utils.helpers.KEY_REGEX).
// Compiled on first use: a counted repetition like {0,254} compiles to
// one instruction per count, hundreds of KB built at every agent start.
var dagIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,250}$`) })

var airflowParams = []string{"conf"}

// validDAGID is Airflow's rule for a DAG id, without "." and "..": those
// fit KEY_REGEX but name no DAG, and in a URL path they are the directory
// itself and its parent (POST /api/v1/dags/../dagRuns).
func validDAGID(id string) error {
	if !dagIDPattern().MatchString(id) || id == "." || id == ".." {
		return invalid("airflow DAG id %q is not valid; DAG ids are 1 to 250 of the ASCII letters, digits, '_', '.' and '-', and not \".\" or \"..\" (e.g. sync_metered_usage_to_stripe)", id)
	}
	return nil
}

// Validate checks the DAG id and the params (conf: an object).
func (r *AirflowRunner) Validate(req RunRequest) error {
	if err := validDAGID(req.Target); err != nil {
		return err
	}
	if err := knownParams(Airflow, req.Params, airflowParams); err != nil {
		return err
	}
	if c, ok := req.Params["conf"]; ok && c != nil {
		if _, ok := c.(map[string]any); !ok {
			return invalid("airflow conf must be an object (passed to the DAG run as dag_run.conf), got %T", c)
		}
	}
	return nil
}

// airflowDAGRun is the DAGRun schema of the REST API (the fields read here).
type airflowDAGRun struct {
	DagRunID  string     `json:"dag_run_id"`
	DagID     string     `json:"dag_id"`
	State     string     `json:"state"`
	StartDate *time.Time `json:"start_date"`
	EndDate   *time.Time `json:"end_date"`
	Note      *string    `json:"note"`
}

// Trigger creates the DAG run, or finds the one created earlier with the key.
func (r *AirflowRunner) Trigger(ctx context.Context, req RunRequest) (RunRef, error) {
	if err := r.Validate(req); err != nil {
		return RunRef{}, err
	}
	ref := RunRef{System: Airflow, Target: req.Target}
	body := map[string]any{"dag_run_id": req.Key}
	if c, ok := req.Params["conf"]; ok && c != nil {
		body["conf"] = c
	}
	target := r.c.urlOf(nil, "api", "v1", "dags", req.Target, "dagRuns")
	status, data, err := r.c.do(ctx, http.MethodPost, target, body)
	if err != nil {
		return ref, err
	}
	switch {
	case status == http.StatusOK:
		var run airflowDAGRun
		if err := r.c.decode(target, data, &run); err != nil {
			return ref, err
		}
		if run.DagRunID == "" {
			run.DagRunID = req.Key
		}
		ref.RunID, ref.URL = run.DagRunID, r.runURL(req.Target, run.DagRunID)
		return ref, nil
	case status == http.StatusConflict:
		// The id exists: this is a retry whose first answer was lost (or a
		// concurrent trigger). Read the run to make sure the conflict was
		// on the id and not on the logical date.
		if _, err := r.get(ctx, req.Target, req.Key); err != nil {
			return ref, fmt.Errorf("%w (after %s)", err, r.c.apiError(http.MethodPost, target, status, data))
		}
		ref.RunID, ref.URL, ref.Existing = req.Key, r.runURL(req.Target, req.Key), true
		return ref, nil
	case status == http.StatusNotFound:
		return ref, fmt.Errorf("%w (is the DAG id right, and has the scheduler parsed the DAG file?)", r.c.apiError(http.MethodPost, target, status, data))
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ref, fmt.Errorf("%w (check the credentials named by orchestrators.airflow and that the user may trigger DAG runs)", r.c.apiError(http.MethodPost, target, status, data))
	}
	return ref, r.c.apiError(http.MethodPost, target, status, data)
}

func (r *AirflowRunner) get(ctx context.Context, dagID, runID string) (airflowDAGRun, error) {
	var run airflowDAGRun
	// A run recorded before the rule was this strict is read only if its
	// DAG id still passes it.
	if err := validDAGID(dagID); err != nil {
		return run, err
	}
	target := r.c.urlOf(nil, "api", "v1", "dags", dagID, "dagRuns", runID)
	status, data, err := r.c.do(ctx, http.MethodGet, target, nil)
	if err != nil {
		return run, err
	}
	if status != http.StatusOK {
		return run, r.c.apiError(http.MethodGet, target, status, data)
	}
	err = r.c.decode(target, data, &run)
	return run, err
}

// Status reads the DAG run's state.
func (r *AirflowRunner) Status(ctx context.Context, ref RunRef) (RunStatus, error) {
	run, err := r.get(ctx, ref.Target, ref.RunID)
	if err != nil {
		return RunStatus{}, err
	}
	st := RunStatus{State: airflowState(run.State), Upstream: run.State}
	if run.StartDate != nil {
		st.StartedAt = run.StartDate.UTC()
	}
	if run.EndDate != nil {
		st.FinishedAt = run.EndDate.UTC()
	}
	if st.State == StateFailed {
		st.Message = "the DAG run failed; its task logs are at " + r.runURL(ref.Target, ref.RunID)
	}
	return st, nil
}

func airflowState(s string) State {
	switch strings.ToLower(s) {
	case "queued":
		return StateQueued
	case "running":
		return StateRunning
	case "success":
		return StateSucceeded
	case "failed":
		return StateFailed
	}
	return StateUnknown
}

func (r *AirflowRunner) runURL(dagID, runID string) string {
	return r.c.urlOf(url.Values{"dag_run_id": {runID}}, "dags", dagID, "grid")
}
