package bigquerytest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	bq "google.golang.org/api/bigquery/v2"
)

// strictDecode decodes body into v refusing any field the generated API
// types (from BigQuery's discovery document) do not have.
func strictDecode(t *testing.T, what string, body []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s is not a BigQuery response: %v\n%s", what, err, body)
	}
}

func call(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// Every answer the fake gives is a whole response object of the real API:
// each field it sends exists in the API's own types, and the ones the
// driver reads carry the request's values.
func TestAnswersAreBigQueryResponses(t *testing.T) {
	f := New(t)
	f.Estimate, f.Billed = 1<<20, 2<<20
	f.Results["SELECT 1"] = Result{Fields: []map[string]any{Field("n", "INTEGER")}, Rows: [][]any{{"1"}, {nil}}}
	f.StatementTypes["MERGE"] = "MERGE"
	f.Errors["nope"] = APIError{Code: http.StatusBadRequest, Reason: "invalidQuery", Message: "Unrecognized name: nope at [1:8]"}
	base := f.URL() + "/bigquery/v2/projects/acme-prod"
	insert := func(sql string, dry bool, id string) (int, []byte) {
		body, _ := json.Marshal(map[string]any{"jobReference": map[string]any{"projectId": "acme-prod", "jobId": id},
			"configuration": map[string]any{"dryRun": dry, "query": map[string]any{"query": sql, "useLegacySql": false}}})
		return call(t, http.MethodPost, base+"/jobs", string(body))
	}

	_, body := insert("MERGE t USING s ON true WHEN MATCHED THEN DELETE", true, "dry-1")
	var dry bq.Job
	strictDecode(t, "dry run", body, &dry)
	if dry.Statistics.Query.StatementType != "MERGE" || dry.Statistics.TotalBytesProcessed != 1<<20 || dry.Status.State != "DONE" {
		t.Errorf("dry run %+v %+v", dry.Statistics.Query, dry.Status)
	}

	_, body = insert("SELECT 1 AS n", false, "run-1")
	var job bq.Job
	strictDecode(t, "job", body, &job)
	if job.JobReference.JobId != "run-1" || job.JobReference.Location != "US" || job.Id != "acme-prod:US.run-1" ||
		job.Statistics.Query.TotalBytesBilled != 2<<20 || job.Configuration.Query.Query != "SELECT 1 AS n" {
		t.Errorf("job %+v %+v %+v", job.JobReference, job.Statistics.Query, job.Configuration.Query)
	}
	_, body = call(t, http.MethodGet, base+"/jobs/run-1", "")
	strictDecode(t, "jobs.get", body, &bq.Job{})

	_, body = call(t, http.MethodGet, base+"/queries/run-1", "")
	var res bq.GetQueryResultsResponse
	strictDecode(t, "query results", body, &res)
	if !res.JobComplete || res.TotalRows != 2 || len(res.Rows) != 2 || res.Schema.Fields[0].Name != "n" || res.Rows[0].F[0].V != "1" || res.Rows[1].F[0].V != nil {
		t.Errorf("results %+v", res)
	}

	_, body = call(t, http.MethodPost, base+"/jobs/run-1/cancel", "")
	var cancel bq.JobCancelResponse
	strictDecode(t, "cancel", body, &cancel)
	if cancel.Job == nil || cancel.Job.JobReference.JobId != "run-1" {
		t.Errorf("cancel %+v", cancel)
	}

	status, body := insert("SELECT nope", true, "dry-2")
	var e struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
			Errors  []struct {
				Message string `json:"message"`
				Domain  string `json:"domain"`
				Reason  string `json:"reason"`
			} `json:"errors"`
		} `json:"error"`
	}
	strictDecode(t, "error", body, &e)
	if status != http.StatusBadRequest || e.Error.Code != 400 || e.Error.Status != "INVALID_ARGUMENT" || len(e.Error.Errors) != 1 || e.Error.Errors[0].Reason != "invalidQuery" {
		t.Errorf("error %d %+v", status, e)
	}

	if d, r, c := f.Counts(); d != 2 || r != 1 || c != 1 {
		t.Errorf("counts %d %d %d, want 2 dry runs, 1 run, 1 cancel", d, r, c)
	}
}
