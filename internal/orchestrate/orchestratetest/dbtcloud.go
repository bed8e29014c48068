package orchestratetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"
)

// DBTCloudAccount is the account id the fake dbt Cloud serves.
const DBTCloudAccount = "30000"

const dbtProject = 50000

// DBTCloudServer is dbt Cloud's v2 API for one account: trigger a job run
// (POST …/jobs/{job_id}/run/), list runs (GET …/runs/?job_definition_id=…
// &order_by=-id&include_related=["trigger"]) and get a run (GET
// …/runs/{run_id}/), each wrapped in the {"status": …, "data": …}
// envelope, with the Run object's fields as dbt Cloud writes them.
type DBTCloudServer struct {
	*core
	srv    *httptest.Server
	jobs   map[string]bool
	token  string
	bodies map[*run]map[string]any
}

// NewDBTCloudServer starts the API with the given job ids.
func NewDBTCloudServer(jobIDs ...int64) *DBTCloudServer {
	s := &DBTCloudServer{core: newCore(), jobs: map[string]bool{}, bodies: map[*run]map[string]any{}}
	for _, j := range jobIDs {
		s.jobs[strconv.FormatInt(j, 10)] = true
	}
	s.seq = 7000000 // dbt Cloud run ids are large and increasing
	mux := http.NewServeMux()
	mux.Handle("POST /api/v2/accounts/{account}/jobs/{job}/run/", s.authenticate(s.trigger))
	mux.Handle("GET /api/v2/accounts/{account}/runs/", s.authenticate(s.list))
	mux.Handle("GET /api/v2/accounts/{account}/runs/{run}/", s.authenticate(s.get))
	s.srv = httptest.NewServer(mux)
	return s
}

// URL is the access URL (the API is under /api/v2).
func (s *DBTCloudServer) URL() string { return s.srv.URL }

// Close stops the server.
func (s *DBTCloudServer) Close() { s.srv.Close() }

// RequireToken makes the API demand this service token.
func (s *DBTCloudServer) RequireToken(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = tok
}

// Body returns the trigger body of the newest run of a job.
func (s *DBTCloudServer) Body(jobID int64) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.findRun(func(r *run) bool { return r.target == strconv.FormatInt(jobID, 10) }); r != nil {
		return s.bodies[r]
	}
	return nil
}

func dbtEnvelope(code int, msg string, data any) map[string]any {
	return map[string]any{"status": map[string]any{"code": code, "is_success": code < 300, "user_message": msg,
		"developer_message": ""}, "data": data}
}

func (s *DBTCloudServer) authenticate(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		tok := s.token
		s.mu.Unlock()
		h := r.Header.Get("Authorization")
		got := strings.TrimPrefix(strings.TrimPrefix(h, "Token "), "Bearer ")
		if h == "" || (tok != "" && got != tok) {
			writeJSON(w, http.StatusUnauthorized, dbtEnvelope(http.StatusUnauthorized, "Invalid token.", nil))
			return
		}
		if r.PathValue("account") != DBTCloudAccount {
			writeJSON(w, http.StatusNotFound, dbtEnvelope(http.StatusNotFound, "The requested resource was not found.", nil))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func dbtTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.Format("2006-01-02 15:04:05.000000-07:00")
}

// runJSON is a Run object; trigger is included when asked for.
func (s *DBTCloudServer) runJSON(r *run, now time.Time, withTrigger bool) map[string]any {
	ph := r.phase(now)
	code := [...]int{1, 3, 10, 20}[ph]
	human := [...]string{"Queued", "Running", "Success", "Error"}[ph]
	var msg any
	if ph == phaseFailed {
		msg = r.outcome.Message
		if r.outcome.Message == "" {
			msg = "Database Error in model fct_billable_egress"
		}
	}
	job, _ := strconv.ParseInt(r.target, 10, 64)
	acct, _ := strconv.ParseInt(DBTCloudAccount, 10, 64)
	out := map[string]any{
		"id": r.seq, "trigger_id": r.seq + 33000000, "account_id": acct, "environment_id": 47000, "project_id": dbtProject,
		"job_definition_id": job, "job_id": job, "status": code, "status_humanized": human, "status_message": msg,
		"dbt_version": "1.9.0-latest", "git_branch": "main", "git_sha": "a32e8239326887421f1314ee0890e5174c8f644a",
		"created_at": dbtTime(r.created), "updated_at": dbtTime(now), "dequeued_at": dbtTime(r.started),
		"started_at": dbtTime(r.started), "finished_at": dbtTime(r.ended), "should_start_at": dbtTime(r.created),
		"in_progress": ph == phaseQueued || ph == phaseRunning, "is_complete": ph >= phaseSucceeded,
		"is_success": ph == phaseSucceeded, "is_error": ph == phaseFailed, "is_cancelled": false,
		"href":    fmt.Sprintf("%s/deploy/%s/projects/%d/runs/%d/", s.srv.URL, DBTCloudAccount, dbtProject, r.seq),
		"trigger": nil, "job": nil, "run_steps": []any{},
	}
	if withTrigger {
		out["trigger"] = map[string]any{"id": r.seq + 33000000, "cause": r.cause, "cause_humanized": r.cause,
			"job_definition_id": job, "created_at": dbtTime(r.created)}
	}
	return out
}

func (s *DBTCloudServer) trigger(w http.ResponseWriter, r *http.Request) {
	job := r.PathValue("job")
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, dbtEnvelope(http.StatusBadRequest, "Invalid JSON: "+err.Error(), nil))
		return
	}
	cause, _ := body["cause"].(string)
	if cause == "" {
		writeJSON(w, http.StatusBadRequest, dbtEnvelope(http.StatusBadRequest, "The request was invalid. Please double check the provided data and try again.",
			map[string]any{"cause": []string{"This field is required."}}))
		return
	}
	if len(cause) > 255 {
		writeJSON(w, http.StatusBadRequest, dbtEnvelope(http.StatusBadRequest, "The request was invalid. Please double check the provided data and try again.",
			map[string]any{"cause": []string{"Ensure this field has no more than 255 characters."}}))
		return
	}
	s.mu.Lock()
	if !s.jobs[job] {
		s.mu.Unlock()
		writeJSON(w, http.StatusNotFound, dbtEnvelope(http.StatusNotFound, "The requested resource was not found.", nil))
		return
	}
	rn := s.newRun("", job, cause)
	rn.id, rn.cause = strconv.FormatInt(rn.seq, 10), cause
	s.bodies[rn] = body
	answer := dbtEnvelope(http.StatusOK, "Success!", s.runJSON(rn, time.Now().UTC(), true))
	s.mu.Unlock()
	if !s.holdAnswer(r) {
		return
	}
	writeJSON(w, http.StatusOK, answer)
}

func (s *DBTCloudServer) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	job := q.Get("job_definition_id")
	withTrigger := strings.Contains(q.Get("include_related"), "trigger")
	limit := 100
	if l, err := strconv.Atoi(q.Get("limit")); err == nil && l > 0 && l <= 100 {
		limit = l
	}
	if o := q.Get("order_by"); o != "" && o != "-id" && o != "id" {
		writeJSON(w, http.StatusBadRequest, dbtEnvelope(http.StatusBadRequest, "Invalid order_by: "+o, nil))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC()
	data := []map[string]any{}
	total := 0
	for i := len(s.runs) - 1; i >= 0; i-- {
		rn := s.runs[i]
		if job != "" && rn.target != job {
			continue
		}
		total++
		if len(data) < limit {
			data = append(data, s.runJSON(rn, now, withTrigger))
		}
	}
	if q.Get("order_by") == "id" {
		for i, j := 0, len(data)-1; i < j; i, j = i+1, j-1 {
			data[i], data[j] = data[j], data[i]
		}
	}
	env := dbtEnvelope(http.StatusOK, "Success!", data)
	env["extra"] = map[string]any{"filters": map[string]any{"account_id": DBTCloudAccount, "job_definition_id": job},
		"order_by": q.Get("order_by"), "pagination": map[string]any{"count": len(data), "total_count": total}}
	writeJSON(w, http.StatusOK, env)
}

func (s *DBTCloudServer) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("run")
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.findRun(func(x *run) bool { return x.id == id })
	if rn == nil {
		writeJSON(w, http.StatusNotFound, dbtEnvelope(http.StatusNotFound, "The requested resource was not found.", nil))
		return
	}
	now := time.Now().UTC()
	rn.read(now)
	writeJSON(w, http.StatusOK, dbtEnvelope(http.StatusOK, "Success!", s.runJSON(rn, now, strings.Contains(r.URL.Query().Get("include_related"), "trigger"))))
}
