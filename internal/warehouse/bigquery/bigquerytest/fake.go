// Package bigquerytest is the part of the BigQuery REST API the driver
// uses (jobs.insert dry run and real, jobs.getQueryResults, jobs.get,
// jobs.cancel) served on loopback: the one BigQuery fake, for the driver's
// own tests and for tests that run it in a warehouse child process. Every
// answer starts from a whole response object in responses/ (the REST
// reference's Job, GetQueryResultsResponse, JobCancelResponse and error
// body, every field the API documents sending) with only the request's
// own values filled in, so the client decodes what it would decode from
// BigQuery. Tests only.
package bigquerytest

import (
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

//go:embed responses/*.json
var responses embed.FS

// response is a fresh copy of the response object in responses/name.json.
func response(name string) map[string]any {
	b, err := responses.ReadFile("responses/" + name + ".json")
	if err != nil {
		panic(err) // embedded at build time: only a renamed file gets here
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		panic(fmt.Sprintf("responses/%s.json: %v", name, err))
	}
	return v
}

// Result is the schema and rows a query returns: fields as BigQuery
// TableFieldSchema JSON, cells as the REST API sends them (strings or nil).
type Result struct {
	Fields []map[string]any
	Rows   [][]any
}

// Field is a nullable column of the given BigQuery type.
func Field(name, typ string) map[string]any {
	return map[string]any{"name": name, "type": typ, "mode": "NULLABLE"}
}

// APIError is an error answer: the HTTP status, BigQuery's reason
// (invalidQuery, accessDenied, ...) and message.
type APIError struct {
	Code            int
	Reason, Message string
}

// Fake is the API. Set its fields before the first request, or under Mu.
type Fake struct {
	Mu sync.Mutex
	// Estimate is the bytes a dry run reports; Billed the bytes a finished
	// job reports billed.
	Estimate, Billed int64
	// Results maps a SQL substring to what a query containing it returns.
	Results map[string]Result
	// StatementTypes maps a SQL substring to the statementType a dry run
	// reports (BigQuery's own reading of the statement); default SELECT.
	StatementTypes map[string]string
	// Errors maps a SQL substring to the error jobs.insert answers a
	// statement containing it with.
	Errors map[string]APIError
	// Hang makes getQueryResults wait until the client gives up.
	Hang bool

	t        testing.TB
	srv      *httptest.Server
	inserts  []map[string]any // request bodies of jobs.insert, as sent
	requests []string         // "METHOD path" of every request
	runs     int
	cancels  []string // job ids
	jobs     map[string]map[string]any
}

// New starts the API on loopback; it stops when the test ends.
func New(t testing.TB) *Fake {
	f := &Fake{t: t, Results: map[string]Result{}, StatementTypes: map[string]string{}, Errors: map[string]APIError{},
		jobs: map[string]map[string]any{}}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the endpoint to give the client (option.WithEndpoint).
func (f *Fake) URL() string { return f.srv.URL }

// Counts are the dry runs, real jobs and job cancellations received.
func (f *Fake) Counts() (dryRuns, runs, cancels int) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return len(f.inserts) - f.runs, f.runs, len(f.cancels)
}

// Inserts are the jobs.insert request bodies received, in order, so tests
// assert on the JSON the real client sends.
func (f *Fake) Inserts() []map[string]any {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return append([]map[string]any(nil), f.inserts...)
}

// Requests are every request received, as "METHOD path".
func (f *Fake) Requests() []string {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return append([]string(nil), f.requests...)
}

// Cancelled are the ids of the jobs cancelled.
func (f *Fake) Cancelled() []string {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return append([]string(nil), f.cancels...)
}

// ServeHTTP routes the API's paths: .../projects/{p}/jobs,
// .../jobs/{id}, .../jobs/{id}/cancel and .../queries/{id}.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.Mu.Lock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	f.Mu.Unlock()
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	n := len(parts)
	switch {
	case r.Method == http.MethodPost && parts[n-1] == "jobs":
		f.insert(w, r)
	case r.Method == http.MethodPost && n >= 2 && parts[n-1] == "cancel":
		f.Mu.Lock()
		f.cancels = append(f.cancels, parts[n-2])
		job := f.jobs[parts[n-2]]
		f.Mu.Unlock()
		resp := response("cancel")
		if job != nil {
			resp["job"] = job
		}
		writeJSON(w, http.StatusOK, resp)
	case r.Method == http.MethodGet && n >= 2 && parts[n-2] == "queries":
		f.results(w, r, parts[n-1])
	case r.Method == http.MethodGet && n >= 2 && parts[n-2] == "jobs":
		f.Mu.Lock()
		job := f.jobs[parts[n-1]]
		f.Mu.Unlock()
		if job == nil {
			f.apiError(w, APIError{http.StatusNotFound, "notFound", "Not found: Job acme-prod:US." + parts[n-1]})
			return
		}
		writeJSON(w, http.StatusOK, job)
	default:
		f.t.Errorf("bigquerytest: unexpected request %s %s", r.Method, r.URL.Path)
		http.Error(w, "unexpected", http.StatusNotImplemented)
	}
}

func (f *Fake) insert(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		f.t.Errorf("bigquerytest: jobs.insert body: %v", err)
		f.apiError(w, APIError{http.StatusBadRequest, "parseError", err.Error()})
		return
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.inserts = append(f.inserts, req)
	conf, _ := req["configuration"].(map[string]any)
	query, _ := conf["query"].(map[string]any)
	sql, _ := query["query"].(string)
	for k, e := range f.Errors {
		if strings.Contains(sql, k) {
			f.apiError(w, e)
			return
		}
	}
	// The API keeps the job id the client chose (the Go client always
	// chooses one) and adds the location.
	ref := map[string]any{"projectId": "acme-prod"}
	if given, ok := req["jobReference"].(map[string]any); ok {
		for k, v := range given {
			ref[k] = v
		}
	}
	if ref["jobId"] == nil || ref["jobId"] == "" {
		ref["jobId"] = fmt.Sprintf("job_%d", len(f.inserts))
	}
	ref["location"] = "US"
	id := ref["jobId"].(string)
	self := fmt.Sprintf("%s/bigquery/v2/projects/%s/jobs/%s?location=US", f.srv.URL, ref["projectId"], id)

	if dry, _ := conf["dryRun"].(bool); dry {
		job := response("dryrun")
		typ := "SELECT"
		for k, v := range f.StatementTypes {
			if strings.Contains(sql, k) {
				typ = v
			}
		}
		job["configuration"], job["jobReference"], job["selfLink"] = conf, ref, self
		stats := job["statistics"].(map[string]any)
		stats["totalBytesProcessed"] = fmt.Sprint(f.Estimate)
		qs := stats["query"].(map[string]any)
		qs["totalBytesProcessed"], qs["statementType"] = fmt.Sprint(f.Estimate), typ
		writeJSON(w, http.StatusOK, job)
		return
	}
	f.runs++
	job := response("job")
	job["configuration"], job["jobReference"], job["selfLink"] = conf, ref, self
	job["id"] = fmt.Sprintf("%s:US.%s", ref["projectId"], id)
	stats := job["statistics"].(map[string]any)
	stats["totalBytesProcessed"] = fmt.Sprint(f.Billed)
	qs := stats["query"].(map[string]any)
	for _, k := range []string{"totalBytesProcessed", "totalBytesBilled", "estimatedBytesProcessed"} {
		qs[k] = fmt.Sprint(f.Billed)
	}
	f.jobs[id] = job
	writeJSON(w, http.StatusOK, job)
}

func (f *Fake) results(w http.ResponseWriter, r *http.Request, id string) {
	f.Mu.Lock()
	job, hang := f.jobs[id], f.Hang
	f.Mu.Unlock()
	if job == nil {
		f.apiError(w, APIError{http.StatusNotFound, "notFound", "Not found: Job acme-prod:US." + id})
		return
	}
	if hang {
		<-r.Context().Done()
		return
	}
	sql := job["configuration"].(map[string]any)["query"].(map[string]any)["query"].(string)
	f.Mu.Lock()
	var res *Result
	for k, v := range f.Results {
		if strings.Contains(sql, k) {
			res = &v
			break
		}
	}
	f.Mu.Unlock()
	if res == nil {
		f.t.Errorf("bigquerytest: no canned result for %s", sql)
		http.Error(w, "no result", http.StatusInternalServerError)
		return
	}
	rows := make([]any, len(res.Rows))
	for i, row := range res.Rows {
		cells := make([]map[string]any, len(row))
		for j, v := range row {
			cells[j] = map[string]any{"v": v}
		}
		rows[i] = map[string]any{"f": cells}
	}
	resp := response("results")
	resp["jobReference"], resp["rows"], resp["totalRows"] = job["jobReference"], rows, fmt.Sprint(len(rows))
	resp["schema"] = map[string]any{"fields": res.Fields}
	resp["totalBytesProcessed"] = job["statistics"].(map[string]any)["totalBytesProcessed"]
	writeJSON(w, http.StatusOK, resp)
}

// apiError answers with BigQuery's error body.
func (f *Fake) apiError(w http.ResponseWriter, e APIError) {
	body := response("error")
	inner := body["error"].(map[string]any)
	inner["code"], inner["message"], inner["status"] = e.Code, e.Message, statusName(e.Code)
	inner["errors"] = []any{map[string]any{"message": e.Message, "domain": "global", "reason": e.Reason}}
	writeJSON(w, e.Code, body)
}

// statusName is the google.rpc status the API names an HTTP status by.
func statusName(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	default:
		return "INTERNAL"
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
