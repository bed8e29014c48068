package orchestratetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"
)

// AirflowServer is an Airflow 2 webserver answering the stable REST API's
// DAG run endpoints: POST /api/v1/dags/{dag_id}/dagRuns (409 Conflict on a
// dag_run_id that exists) and GET /api/v1/dags/{dag_id}/dagRuns/{dag_run_id}.
// Errors are problem-details JSON as Airflow writes them.
type AirflowServer struct {
	*core
	srv        *httptest.Server
	dags       map[string]bool
	user, pass string
	confs      map[*run]map[string]any
}

// NewAirflowServer starts a webserver with the given DAG ids.
func NewAirflowServer(dags ...string) *AirflowServer {
	s := &AirflowServer{core: newCore(), dags: map[string]bool{}, confs: map[*run]map[string]any{}}
	for _, d := range dags {
		s.dags[d] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/dags/{dag_id}/dagRuns", s.trigger)
	mux.HandleFunc("GET /api/v1/dags/{dag_id}/dagRuns/{dag_run_id}", s.get)
	s.srv = httptest.NewServer(s.authenticate(mux))
	return s
}

// URL is the webserver's base URL.
func (s *AirflowServer) URL() string { return s.srv.URL }

// Close stops the server.
func (s *AirflowServer) Close() { s.srv.Close() }

// RequireBasicAuth makes the API demand these credentials.
func (s *AirflowServer) RequireBasicAuth(user, pass string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.user, s.pass = user, pass
}

// Conf returns the conf of the newest run of a DAG.
func (s *AirflowServer) Conf(dagID string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.findRun(func(r *run) bool { return r.target == dagID }); r != nil {
		return s.confs[r]
	}
	return nil
}

const airflowDocs = "https://airflow.apache.org/docs/apache-airflow/2.10.5/stable-rest-api-ref.html#section/Errors/"

func problem(w http.ResponseWriter, status int, title, detail, kind string) {
	var d any
	if detail != "" {
		d = detail
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"detail": d, "status": status, "title": title, "type": airflowDocs + kind})
}

func (s *AirflowServer) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		user, pass := s.user, s.pass
		s.mu.Unlock()
		if user != "" {
			u, p, ok := r.BasicAuth()
			if !ok || u != user || p != pass {
				problem(w, http.StatusUnauthorized, "Unauthorized", "", "Unauthenticated")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *AirflowServer) dagRun(r *run, dagID string, now time.Time) map[string]any {
	state := [...]string{"queued", "running", "success", "failed"}[r.phase(now)]
	var start, end any
	if !r.started.IsZero() {
		start = r.started.Format(time.RFC3339Nano)
	}
	if !r.ended.IsZero() {
		end = r.ended.Format(time.RFC3339Nano)
	}
	logical := r.created.Format(time.RFC3339Nano)
	conf := s.confs[r]
	if conf == nil {
		conf = map[string]any{}
	}
	return map[string]any{
		"conf": conf, "dag_id": dagID, "dag_run_id": r.id, "data_interval_end": logical, "data_interval_start": logical,
		"end_date": end, "execution_date": logical, "external_trigger": true, "last_scheduling_decision": nil,
		"logical_date": logical, "note": nil, "run_type": "manual", "start_date": start, "state": state,
	}
}

func (s *AirflowServer) trigger(w http.ResponseWriter, r *http.Request) {
	dagID := r.PathValue("dag_id")
	var body struct {
		DagRunID    string         `json:"dag_run_id"`
		Conf        map[string]any `json:"conf"`
		LogicalDate string         `json:"logical_date"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		problem(w, http.StatusBadRequest, "Bad Request", err.Error(), "BadRequest")
		return
	}
	s.mu.Lock()
	if !s.dags[dagID] {
		s.mu.Unlock()
		problem(w, http.StatusNotFound, "DAG not found", fmt.Sprintf("DAG with dag_id: '%s' not found", dagID), "NotFound")
		return
	}
	now := time.Now().UTC()
	id := body.DagRunID
	if id == "" {
		id = "manual__" + now.Format(time.RFC3339Nano)
	}
	if s.findRun(func(x *run) bool { return x.target == dagID && x.id == id }) != nil {
		s.mu.Unlock()
		problem(w, http.StatusConflict, "Conflict", fmt.Sprintf("DAGRun with DAG ID: '%s' and DAGRun ID: '%s' already exists", dagID, id), "AlreadyExists")
		return
	}
	rn := s.newRun(id, dagID, id)
	s.confs[rn] = body.Conf
	answer := s.dagRun(rn, dagID, now)
	s.mu.Unlock()
	if !s.holdAnswer(r) {
		return
	}
	writeJSON(w, http.StatusOK, answer)
}

func (s *AirflowServer) get(w http.ResponseWriter, r *http.Request) {
	dagID, id := r.PathValue("dag_id"), r.PathValue("dag_run_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.findRun(func(x *run) bool { return x.target == dagID && x.id == id })
	if rn == nil {
		problem(w, http.StatusNotFound, "DAGRun not found", fmt.Sprintf("DAGRun with DAG ID: '%s' and DagRun ID: '%s' not found", dagID, id), "NotFound")
		return
	}
	now := time.Now().UTC()
	rn.read(now)
	writeJSON(w, http.StatusOK, s.dagRun(rn, dagID, now))
}
