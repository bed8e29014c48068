package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/textrule"
)

// DagsterKeyTag is the run tag carrying the idempotency key; before
// launching, the runner looks for a run with this tag.
const DagsterKeyTag = "dataworkers/run_key"

// DagsterReasonTag carries why the run was started.
const DagsterReasonTag = "dataworkers/reason"

// The GraphQL documents follow the dagster-graphql schema: launchRun
// returns the LaunchRunResult union, runOrError the RunOrError union and
// runsOrError the RunsOrError union. Every error member but
// RunConfigValidationInvalid, InvalidStepError and InvalidOutputError
// implements the Error interface, so "... on Error" reads their message.
const (
	dagsterLaunchRun = `mutation DataWorkersLaunchRun($executionParams: ExecutionParams!) {
  launchRun(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { runId status } }
    ... on RunConfigValidationInvalid { pipelineName errors { message path reason } }
    ... on InvalidStepError { invalidStepKey }
    ... on InvalidOutputError { stepKey invalidOutputName }
    ... on Error { message }
  }
}`
	dagsterRunStatus = `query DataWorkersRunStatus($runId: ID!) {
  runOrError(runId: $runId) {
    __typename
    ... on Run { runId status startTime endTime }
    ... on Error { message }
  }
}`
	dagsterRunsByTag = `query DataWorkersRunsByTag($filter: RunsFilter) {
  runsOrError(filter: $filter, limit: 1) {
    __typename
    ... on Runs { results { runId status } }
    ... on Error { message }
  }
}`
)

// DagsterRunner launches Dagster jobs over the webserver's GraphQL API.
type DagsterRunner struct {
	c *restClient
	// base is the webserver URL (run pages live under it).
	base string
}

// NewDagsterRunner builds a runner for the webserver at svc.URL (the
// /graphql suffix is optional). svc.TokenEnv, when set, names the variable
// holding a Dagster+ API token; username_env/password_env add basic auth
// for a webserver behind a proxy.
func NewDagsterRunner(svc *config.Service) (*DagsterRunner, error) {
	c, err := newRESTClient(Dagster, svc, "")
	if err != nil {
		return nil, err
	}
	c.base.Path = strings.TrimSuffix(strings.TrimRight(c.base.Path, "/"), "/graphql")
	basic := basicAuth(svc, Dagster)
	c.auth = func(r *http.Request) error {
		if svc.TokenEnv != "" {
			tok, err := config.Secret(svc.TokenEnv, "orchestrators.dagster.token_env")
			if err != nil {
				return err
			}
			r.Header.Set("Dagster-Cloud-Api-Token", tok)
		}
		return basic(r)
	}
	return &DagsterRunner{c: c, base: strings.TrimRight(c.base.String(), "/")}, nil
}

// System is Dagster.
func (r *DagsterRunner) System() System { return Dagster }

// Location is the webserver's URL and the job's code location and
// repository.
func (r *DagsterRunner) Location(target string) approvals.ActionLocation {
	t, _ := parseDagsterTarget(target)
	return approvals.ActionLocation{Instance: approvals.NormalizeURL(r.base), CodeLocation: t.location, Repository: t.repository}
}

// dagsterTarget is a parsed "location/repository/job" target.
type dagsterTarget struct{ location, repository, job string }

// DefaultDagsterRepository is the repository name Dagster gives the
// definitions of a code location built with Definitions.
const DefaultDagsterRepository = "__repository__"

// Dagster's names: jobs and repositories follow its VALID_NAME_REGEX
// (letters, digits, '_'); a code location is named after a module or file
// (my_package.defs, repo.py), so '.' and '-' are allowed there too, but
// not "." or "..". Compiled on first use.
var (
	dagsterName     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_]{1,255}$`) })
	dagsterLocation = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,255}$`) })
)

func parseDagsterTarget(t string) (dagsterTarget, error) {
	parts := strings.Split(strings.TrimSpace(t), "/")
	var dt dagsterTarget
	// The target is quoted short: it may be anything a proposal carried.
	q := textrule.Quote(t)
	switch len(parts) {
	case 2:
		dt = dagsterTarget{location: parts[0], repository: DefaultDagsterRepository, job: parts[1]}
	case 3:
		dt = dagsterTarget{location: parts[0], repository: parts[1], job: parts[2]}
	default:
		return dagsterTarget{}, invalid("dagster target %s is not valid; want location/job or location/repository/job (e.g. billing_location/__repository__/refresh_usage)", q)
	}
	switch {
	case !dagsterLocation().MatchString(dt.location) || dt.location == "." || dt.location == "..":
		return dagsterTarget{}, invalid("dagster target %s: the code location name is not valid; it is 1 to 255 of the ASCII letters, digits, '_', '.' and '-', and not \".\" or \"..\" (e.g. billing_location)", q)
	case !dagsterName().MatchString(dt.repository):
		return dagsterTarget{}, invalid("dagster target %s: the repository name is not valid; Dagster names use ASCII letters, digits and '_' (the default is %s)", q, DefaultDagsterRepository)
	case !dagsterName().MatchString(dt.job):
		return dagsterTarget{}, invalid("dagster target %s: the job name is not valid; Dagster names use ASCII letters, digits and '_' (e.g. refresh_usage)", q)
	}
	return dt, nil
}

// DagsterTarget builds the target string for a job.
func DagsterTarget(location, repository, job string) string {
	if strings.TrimSpace(repository) == "" {
		repository = DefaultDagsterRepository
	}
	return strings.TrimSpace(location) + "/" + strings.TrimSpace(repository) + "/" + strings.TrimSpace(job)
}

var dagsterParams = []string{"run_config", "tags"}

// Validate checks the target and the params (run_config: an object; tags:
// string values).
func (r *DagsterRunner) Validate(req RunRequest) error {
	if _, err := parseDagsterTarget(req.Target); err != nil {
		return err
	}
	if err := knownParams(Dagster, req.Params, dagsterParams); err != nil {
		return err
	}
	if rc, ok := req.Params["run_config"]; ok && rc != nil {
		if _, ok := rc.(map[string]any); !ok {
			return invalid("dagster run_config must be an object (the job's run config, e.g. {\"ops\": {…}}), got %T", rc)
		}
	}
	_, err := dagsterTags(req.Params["tags"])
	return err
}

func dagsterTags(v any) (map[string]string, error) {
	out := map[string]string{}
	switch m := v.(type) {
	case nil:
	case map[string]string:
		for k, s := range m {
			out[k] = s
		}
	case map[string]any:
		for k, x := range m {
			s, ok := x.(string)
			if !ok {
				return nil, invalid("dagster tag %q must be a string, got %T", k, x)
			}
			out[k] = s
		}
	default:
		return nil, invalid("dagster tags must be an object of strings, got %T", v)
	}
	for k := range out {
		if strings.HasPrefix(k, "dataworkers/") {
			return nil, invalid("dagster tag %q is reserved: tags under dataworkers/ are set by Data Workers", k)
		}
	}
	return out, nil
}

type gqlTag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Trigger launches the job unless a run tagged with the key exists already.
func (r *DagsterRunner) Trigger(ctx context.Context, req RunRequest) (RunRef, error) {
	if err := r.Validate(req); err != nil {
		return RunRef{}, err
	}
	t, _ := parseDagsterTarget(req.Target)
	ref := RunRef{System: Dagster, Target: req.Target}
	if id, err := r.findByKey(ctx, req.Key); err != nil {
		return ref, err
	} else if id != "" {
		ref.RunID, ref.URL, ref.Existing = id, r.runURL(id), true
		return ref, nil
	}
	userTags, _ := dagsterTags(req.Params["tags"])
	tags := []gqlTag{{Key: DagsterKeyTag, Value: req.Key}}
	if req.Reason != "" {
		tags = append(tags, gqlTag{Key: DagsterReasonTag, Value: req.Reason})
	}
	keys := make([]string, 0, len(userTags))
	for k := range userTags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		tags = append(tags, gqlTag{Key: k, Value: userTags[k]})
	}
	params := map[string]any{
		"selector": map[string]any{
			"repositoryLocationName": t.location,
			"repositoryName":         t.repository,
			"jobName":                t.job,
		},
		"executionMetadata": map[string]any{"tags": tags},
	}
	if rc, ok := req.Params["run_config"]; ok && rc != nil {
		params["runConfigData"] = rc
	}
	var data struct {
		LaunchRun struct {
			Typename string `json:"__typename"`
			Run      *struct {
				RunID  string `json:"runId"`
				Status string `json:"status"`
			} `json:"run"`
			Message      string `json:"message"`
			PipelineName string `json:"pipelineName"`
			Errors       []struct {
				Message string `json:"message"`
				Reason  string `json:"reason"`
				Path    []any  `json:"path"`
			} `json:"errors"`
			InvalidStepKey    string `json:"invalidStepKey"`
			StepKey           string `json:"stepKey"`
			InvalidOutputName string `json:"invalidOutputName"`
		} `json:"launchRun"`
	}
	if err := r.graphql(ctx, dagsterLaunchRun, map[string]any{"executionParams": params}, &data); err != nil {
		return ref, err
	}
	lr := data.LaunchRun
	switch lr.Typename {
	case "LaunchRunSuccess":
		if lr.Run == nil || lr.Run.RunID == "" {
			return ref, fmt.Errorf("dagster: %s answered LaunchRunSuccess without a run id", r.c.url("/graphql", nil))
		}
		ref.RunID, ref.URL = lr.Run.RunID, r.runURL(lr.Run.RunID)
		return ref, nil
	case "RunConfigValidationInvalid":
		var msgs []string
		for _, e := range lr.Errors {
			m := e.Message
			if len(e.Path) > 0 {
				m = fmt.Sprintf("%s (at %v)", m, e.Path)
			}
			msgs = append(msgs, m)
		}
		return ref, fmt.Errorf("dagster: run config for job %s is invalid: %s", t.job, strings.Join(msgs, "; "))
	case "PipelineNotFoundError":
		return ref, fmt.Errorf("dagster: job %s not found in repository %s of location %s: %s (check the names under Deployment in the Dagster UI)",
			t.job, t.repository, t.location, lr.Message)
	case "InvalidStepError":
		return ref, fmt.Errorf("dagster: job %s has no step %q", t.job, lr.InvalidStepKey)
	case "InvalidOutputError":
		return ref, fmt.Errorf("dagster: step %s of job %s has no output %q", lr.StepKey, t.job, lr.InvalidOutputName)
	case "UnauthorizedError":
		return ref, fmt.Errorf("dagster: not allowed to launch job %s: %s (check the token named by orchestrators.dagster.token_env)", t.job, lr.Message)
	case "PythonError":
		return ref, fmt.Errorf("dagster: the webserver failed launching job %s: %s", t.job, firstLine(lr.Message))
	case "":
		return ref, fmt.Errorf("dagster: %s answered launchRun without a result type", r.c.url("/graphql", nil))
	}
	// RunConflict, InvalidSubsetError, PresetNotFoundError,
	// ConflictingExecutionParamsError, NoModeProvidedError, …
	return ref, fmt.Errorf("dagster: launching job %s failed with %s: %s", t.job, lr.Typename, lr.Message)
}

// findByKey returns the id of a run tagged with key, or "".
func (r *DagsterRunner) findByKey(ctx context.Context, key string) (string, error) {
	var data struct {
		RunsOrError struct {
			Typename string `json:"__typename"`
			Results  []struct {
				RunID string `json:"runId"`
			} `json:"results"`
			Message string `json:"message"`
		} `json:"runsOrError"`
	}
	filter := map[string]any{"tags": []gqlTag{{Key: DagsterKeyTag, Value: key}}}
	if err := r.graphql(ctx, dagsterRunsByTag, map[string]any{"filter": filter}, &data); err != nil {
		return "", err
	}
	ro := data.RunsOrError
	if ro.Typename != "Runs" {
		return "", fmt.Errorf("dagster: looking up runs tagged %s=%s failed with %s: %s", DagsterKeyTag, key, ro.Typename, firstLine(ro.Message))
	}
	if len(ro.Results) > 0 {
		return ro.Results[0].RunID, nil
	}
	return "", nil
}

// Status reads the run's status.
func (r *DagsterRunner) Status(ctx context.Context, ref RunRef) (RunStatus, error) {
	var data struct {
		RunOrError struct {
			Typename  string   `json:"__typename"`
			Status    string   `json:"status"`
			StartTime *float64 `json:"startTime"`
			EndTime   *float64 `json:"endTime"`
			Message   string   `json:"message"`
		} `json:"runOrError"`
	}
	if err := r.graphql(ctx, dagsterRunStatus, map[string]any{"runId": ref.RunID}, &data); err != nil {
		return RunStatus{}, err
	}
	ro := data.RunOrError
	if ro.Typename != "Run" {
		return RunStatus{}, fmt.Errorf("dagster: run %s: %s: %s", ref.RunID, ro.Typename, firstLine(ro.Message))
	}
	st := RunStatus{State: dagsterState(ro.Status), Upstream: ro.Status, StartedAt: epochSeconds(ro.StartTime), FinishedAt: epochSeconds(ro.EndTime)}
	if st.State == StateFailed {
		st.Message = "the run failed; its event log is at " + r.runURL(ref.RunID)
	}
	return st, nil
}

func dagsterState(s string) State {
	switch s {
	case "QUEUED", "NOT_STARTED", "MANAGED":
		return StateQueued
	case "STARTING", "STARTED", "CANCELING":
		return StateRunning
	case "SUCCESS":
		return StateSucceeded
	case "FAILURE":
		return StateFailed
	case "CANCELED":
		return StateCanceled
	}
	return StateUnknown
}

// runURL is the run's page; the id is the one Dagster answered, escaped
// as one path segment.
func (r *DagsterRunner) runURL(id string) string { return r.base + "/runs/" + url.PathEscape(id) }

// graphql posts one document and decodes data into out; GraphQL-level
// errors (a schema mismatch, a bad variable) become an error.
func (r *DagsterRunner) graphql(ctx context.Context, query string, vars map[string]any, out any) error {
	target := r.c.url("/graphql", nil)
	status, body, err := r.c.do(ctx, http.MethodPost, target, map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	var env struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if status >= 300 {
		ae := r.c.apiError(http.MethodPost, target, status, body)
		if json.Unmarshal(body, &env) == nil && len(env.Errors) > 0 {
			ae.Message = env.Errors[0].Message
		}
		return ae
	}
	if err := r.c.decode(target, body, &env); err != nil {
		return err
	}
	if len(env.Errors) > 0 {
		var msgs []string
		for _, e := range env.Errors {
			msgs = append(msgs, e.Message)
		}
		return fmt.Errorf("dagster: %s rejected the query: %s", target, strings.Join(msgs, "; "))
	}
	if len(env.Data) == 0 || string(env.Data) == "null" {
		return fmt.Errorf("dagster: %s answered without data", target)
	}
	return r.c.decode(target, env.Data, out)
}

func epochSeconds(f *float64) time.Time {
	if f == nil || *f <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(*f * 1000)).UTC()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// knownParams rejects parameter names the system does not take.
func knownParams(system System, params map[string]any, valid []string) error {
	var bad []string
	for k := range params {
		found := false
		for _, v := range valid {
			if k == v {
				found = true
				break
			}
		}
		if !found {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return invalid("%s does not take param %s; valid: %s", system, strings.Join(bad, ", "), strings.Join(valid, ", "))
}
