package orchestratetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// DagsterServer is a Dagster webserver answering the GraphQL operations
// package orchestrate sends: launchRun (LaunchRunResult union),
// runOrError (RunOrError) and runsOrError (RunsOrError, filtered by tags).
type DagsterServer struct {
	*core
	srv   *httptest.Server
	jobs  map[string]bool // "location.repository.job"
	token string
	tags  map[*run]map[string]string
}

// NewDagsterServer starts a webserver with the given jobs, each
// "location/repository/job".
func NewDagsterServer(jobs ...string) *DagsterServer {
	s := &DagsterServer{core: newCore(), jobs: map[string]bool{}, tags: map[*run]map[string]string{}}
	for _, j := range jobs {
		s.jobs[strings.ReplaceAll(j, "/", ".")] = true
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the webserver's base URL (GraphQL is at URL()+"/graphql").
func (s *DagsterServer) URL() string { return s.srv.URL }

// Close stops the server.
func (s *DagsterServer) Close() { s.srv.Close() }

// RequireToken makes the server demand a Dagster+ API token.
func (s *DagsterServer) RequireToken(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = tok
}

// RunTags returns the tags of the runs of target (a "location/repository/job").
func (s *DagsterServer) RunTags(target string) []map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]string
	for _, r := range s.runs {
		if r.target == target {
			out = append(out, s.tags[r])
		}
	}
	return out
}

var gqlRoot = regexp.MustCompile(`\{\s*(\w+)\s*\(`)

func (s *DagsterServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/graphql" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusMethodNotAllowed, gqlErrors("send GraphQL as POST"))
		return
	}
	s.mu.Lock()
	tok := s.token
	s.mu.Unlock()
	if tok != "" && r.Header.Get("Dagster-Cloud-Api-Token") != tok {
		writeJSON(w, http.StatusUnauthorized, gqlErrors("Invalid or missing Dagster-Cloud-Api-Token"))
		return
	}
	var req struct {
		Query     string                     `json:"query"`
		Variables map[string]json.RawMessage `json:"variables"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, gqlErrors("POST body is not a GraphQL request: "+err.Error()))
		return
	}
	m := gqlRoot.FindStringSubmatch(req.Query)
	if m == nil {
		writeJSON(w, http.StatusOK, gqlErrors("Syntax Error: expected an operation with a root field"))
		return
	}
	switch m[1] {
	case "launchRun":
		s.launchRun(w, r, req.Variables["executionParams"])
	case "runOrError":
		s.runOrError(w, req.Variables["runId"])
	case "runsOrError":
		s.runsOrError(w, req.Variables["filter"])
	default:
		writeJSON(w, http.StatusOK, gqlErrors(fmt.Sprintf("Cannot query field %q on type \"Query\".", m[1])))
	}
}

func gqlErrors(msg string) map[string]any {
	return map[string]any{"errors": []map[string]any{{"message": msg}}}
}

func gqlData(field string, v any) map[string]any {
	return map[string]any{"data": map[string]any{field: v}}
}

type dagsterTag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// runConfigRoots are the top-level keys a job's run config accepts.
var runConfigRoots = []string{"execution", "loggers", "ops", "resources"}

func (s *DagsterServer) launchRun(w http.ResponseWriter, r *http.Request, raw json.RawMessage) {
	var p struct {
		Selector *struct {
			RepositoryLocationName string `json:"repositoryLocationName"`
			RepositoryName         string `json:"repositoryName"`
			JobName                string `json:"jobName"`
			PipelineName           string `json:"pipelineName"`
		} `json:"selector"`
		RunConfigData     map[string]any `json:"runConfigData"`
		ExecutionMetadata *struct {
			Tags []dagsterTag `json:"tags"`
		} `json:"executionMetadata"`
	}
	if err := json.Unmarshal(raw, &p); err != nil || p.Selector == nil || p.Selector.RepositoryLocationName == "" || p.Selector.RepositoryName == "" {
		writeJSON(w, http.StatusOK, gqlErrors(`Variable "$executionParams" got invalid value; Field "selector" of required type "JobOrPipelineSelector!" was not provided.`))
		return
	}
	job := p.Selector.JobName
	if job == "" {
		job = p.Selector.PipelineName
	}
	sel := p.Selector.RepositoryLocationName + "." + p.Selector.RepositoryName + "." + job
	s.mu.Lock()
	if !s.jobs[sel] {
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, gqlData("launchRun", map[string]any{"__typename": "PipelineNotFoundError",
			"message": "Could not find Pipeline " + sel}))
		return
	}
	var bad []string
	for k := range p.RunConfigData {
		if !slices.Contains(runConfigRoots, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		s.mu.Unlock()
		sort.Strings(bad)
		var errs []map[string]any
		for _, k := range bad {
			errs = append(errs, map[string]any{"message": fmt.Sprintf(`Received unexpected config entry "%s" at the root. Expected: "{ execution?: { config?: { … } } loggers?: { … } ops?: { … } resources?: { … } }".`, k),
				"path": []string{}, "reason": "FIELD_NOT_DEFINED"})
		}
		writeJSON(w, http.StatusOK, gqlData("launchRun", map[string]any{"__typename": "RunConfigValidationInvalid",
			"pipelineName": job, "errors": errs}))
		return
	}
	tags := map[string]string{}
	if p.ExecutionMetadata != nil {
		for _, t := range p.ExecutionMetadata.Tags {
			tags[t.Key] = t.Value
		}
	}
	rn := s.newRun(newUUID(), strings.ReplaceAll(sel, ".", "/"), tags["dataworkers/run_key"])
	s.tags[rn] = tags
	id := rn.id
	s.mu.Unlock()
	if !s.holdAnswer(r) {
		return
	}
	writeJSON(w, http.StatusOK, gqlData("launchRun", map[string]any{"__typename": "LaunchRunSuccess",
		"run": map[string]any{"runId": id, "status": "QUEUED"}}))
}

func dagsterStatus(p phase) string {
	return [...]string{"QUEUED", "STARTED", "SUCCESS", "FAILURE"}[p]
}

func epoch(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return float64(t.UnixMicro()) / 1e6
}

func (s *DagsterServer) runOrError(w http.ResponseWriter, raw json.RawMessage) {
	var id string
	if json.Unmarshal(raw, &id) != nil || id == "" {
		writeJSON(w, http.StatusOK, gqlErrors(`Variable "$runId" of required type "ID!" was not provided.`))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.findRun(func(r *run) bool { return r.id == id })
	if rn == nil {
		writeJSON(w, http.StatusOK, gqlData("runOrError", map[string]any{"__typename": "RunNotFoundError",
			"message": fmt.Sprintf("Run %s could not be found.", id)}))
		return
	}
	ph := rn.read(time.Now().UTC())
	writeJSON(w, http.StatusOK, gqlData("runOrError", map[string]any{"__typename": "Run", "runId": rn.id,
		"status": dagsterStatus(ph), "startTime": epoch(rn.started), "endTime": epoch(rn.ended)}))
}

func (s *DagsterServer) runsOrError(w http.ResponseWriter, raw json.RawMessage) {
	var f struct {
		Tags []dagsterTag `json:"tags"`
	}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &f); err != nil {
			writeJSON(w, http.StatusOK, gqlErrors(`Variable "$filter" got invalid value: `+err.Error()))
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	results := []map[string]any{}
	now := time.Now().UTC()
	for i := len(s.runs) - 1; i >= 0; i-- {
		rn := s.runs[i]
		match := true
		for _, t := range f.Tags {
			if s.tags[rn][t.Key] != t.Value {
				match = false
				break
			}
		}
		if match {
			results = append(results, map[string]any{"runId": rn.id, "status": dagsterStatus(rn.phase(now))})
		}
	}
	writeJSON(w, http.StatusOK, gqlData("runsOrError", map[string]any{"__typename": "Runs", "results": results}))
}
