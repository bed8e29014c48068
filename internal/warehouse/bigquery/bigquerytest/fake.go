// Package bigquerytest is the part of the BigQuery REST API the driver
// uses (jobs.insert dry run and real, jobs.getQueryResults, jobs.get,
// jobs.cancel) served on loopback, for tests that run the driver in their
// own process or in a warehouse child process. It answers with the
// response shapes the real API sends. Tests only.
package bigquerytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

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

// Fake is the API. Set its fields before the first request, or under Mu.
type Fake struct {
	Mu sync.Mutex
	// Estimate is the bytes a dry run reports; Billed the bytes a finished
	// job reports billed.
	Estimate, Billed int64
	// Results maps a SQL substring to what a query containing it returns.
	Results map[string]Result
	// Hang makes getQueryResults wait until the client gives up.
	Hang bool

	t       testing.TB
	srv     *httptest.Server
	dryRuns int
	runs    int
	cancels int
	jobs    map[string]map[string]any
}

// New starts the API on loopback; it stops when the test ends.
func New(t testing.TB) *Fake {
	f := &Fake{t: t, Results: map[string]Result{}, jobs: map[string]map[string]any{}}
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
	return f.dryRuns, f.runs, f.cancels
}

// ServeHTTP routes the API's paths.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	n := len(parts)
	switch {
	case r.Method == http.MethodPost && parts[n-1] == "jobs":
		f.insert(w, r)
	case r.Method == http.MethodPost && parts[n-1] == "cancel":
		f.Mu.Lock()
		f.cancels++
		f.Mu.Unlock()
		writeJSON(w, map[string]any{"kind": "bigquery#jobCancelResponse"})
	case r.Method == http.MethodGet && n >= 2 && parts[n-2] == "queries":
		f.results(w, r, parts[n-1])
	case r.Method == http.MethodGet && n >= 2 && parts[n-2] == "jobs":
		f.Mu.Lock()
		job := f.jobs[parts[n-1]]
		f.Mu.Unlock()
		if job == nil {
			http.Error(w, "no such job", http.StatusNotFound)
			return
		}
		writeJSON(w, job)
	default:
		f.t.Errorf("bigquerytest: unexpected request %s %s", r.Method, r.URL.Path)
		http.Error(w, "unexpected", http.StatusNotImplemented)
	}
}

func (f *Fake) insert(w http.ResponseWriter, r *http.Request) {
	var job map[string]any
	if err := json.NewDecoder(r.Body).Decode(&job); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	conf, _ := job["configuration"].(map[string]any)
	ref, _ := job["jobReference"].(map[string]any)
	if ref == nil {
		ref = map[string]any{"projectId": "acme-prod"}
	}
	id := fmt.Sprintf("job_%d", f.dryRuns+f.runs+1)
	ref["jobId"], ref["location"] = id, "US"
	job["jobReference"], job["id"] = ref, "acme-prod:US."+id
	job["status"] = map[string]any{"state": "DONE"}
	if dry, _ := conf["dryRun"].(bool); dry {
		f.dryRuns++
		job["statistics"] = map[string]any{"totalBytesProcessed": fmt.Sprint(f.Estimate),
			"query": map[string]any{"totalBytesProcessed": fmt.Sprint(f.Estimate), "statementType": "SELECT"}}
	} else {
		f.runs++
		job["statistics"] = map[string]any{"totalBytesProcessed": fmt.Sprint(f.Billed),
			"query": map[string]any{"totalBytesProcessed": fmt.Sprint(f.Billed), "totalBytesBilled": fmt.Sprint(f.Billed), "statementType": "SELECT"}}
		f.jobs[id] = job
	}
	writeJSON(w, job)
}

func (f *Fake) results(w http.ResponseWriter, r *http.Request, id string) {
	f.Mu.Lock()
	job, hang := f.jobs[id], f.Hang
	f.Mu.Unlock()
	if job == nil {
		http.Error(w, "no such job", http.StatusNotFound)
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
	rows := make([]map[string]any, len(res.Rows))
	for i, row := range res.Rows {
		cells := make([]map[string]any, len(row))
		for j, v := range row {
			cells[j] = map[string]any{"v": v}
		}
		rows[i] = map[string]any{"f": cells}
	}
	writeJSON(w, map[string]any{"kind": "bigquery#getQueryResultsResponse", "jobComplete": true,
		"jobReference": job["jobReference"], "schema": map[string]any{"fields": res.Fields},
		"rows": rows, "totalRows": fmt.Sprint(len(rows))})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
