package bigquery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/api/option"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/warehouse"
)

// fakeBigQuery is the part of the BigQuery REST API the driver uses:
// jobs.insert (dry run and real), jobs.getQueryResults, jobs.get and
// jobs.cancel. It records every request body so tests assert on the JSON
// the real client sends.
type fakeBigQuery struct {
	t        *testing.T
	estimate int64 // bytes a dry run reports
	billed   int64 // bytes a finished job reports billed
	// results maps a SQL substring to the schema and rows a query returns.
	results map[string]fakeResult
	// hang makes getQueryResults wait for the client to give up.
	hang bool
	// statementTypes maps a SQL substring to the statementType a dry run
	// reports (BigQuery's own reading of the statement); default SELECT.
	statementTypes map[string]string

	mu      sync.Mutex
	inserts []map[string]any
	jobs    map[string]map[string]any // job id -> inserted job
	cancels []string
	paths   []string
}

type fakeResult struct {
	fields []map[string]any // BigQuery TableFieldSchema JSON
	rows   [][]any          // cell values as the REST API sends them (strings or nil)
}

func newFake(t *testing.T) *fakeBigQuery {
	return &fakeBigQuery{t: t, results: map[string]fakeResult{}, jobs: map[string]map[string]any{}}
}

func (f *fakeBigQuery) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	f.mu.Unlock()
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// .../projects/{p}/jobs, .../projects/{p}/jobs/{id}, .../jobs/{id}/cancel, .../queries/{id}
	n := len(parts)
	switch {
	case r.Method == http.MethodPost && parts[n-1] == "jobs":
		f.insert(w, r)
	case r.Method == http.MethodPost && parts[n-1] == "cancel":
		f.mu.Lock()
		f.cancels = append(f.cancels, parts[n-2])
		f.mu.Unlock()
		writeJSON(w, map[string]any{"kind": "bigquery#jobCancelResponse"})
	case r.Method == http.MethodGet && parts[n-2] == "queries":
		f.serveResults(w, r, parts[n-1])
	case r.Method == http.MethodGet && parts[n-2] == "jobs":
		f.mu.Lock()
		job := f.jobs[parts[n-1]]
		f.mu.Unlock()
		if job == nil {
			http.Error(w, "no such job", http.StatusNotFound)
			return
		}
		writeJSON(w, job)
	default:
		f.t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
		http.Error(w, "unexpected", http.StatusNotImplemented)
	}
}

func (f *fakeBigQuery) insert(w http.ResponseWriter, r *http.Request) {
	var job map[string]any
	if err := json.NewDecoder(r.Body).Decode(&job); err != nil {
		f.t.Errorf("insert body: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inserts = append(f.inserts, job)
	conf, _ := job["configuration"].(map[string]any)
	ref, _ := job["jobReference"].(map[string]any)
	if ref == nil {
		ref = map[string]any{"projectId": "acme-prod"}
	}
	id := fmt.Sprintf("job_%d", len(f.inserts))
	ref["jobId"], ref["location"] = id, "US"
	job["jobReference"] = ref
	job["id"] = "acme-prod:US." + id
	job["status"] = map[string]any{"state": "DONE"}
	if dry, _ := conf["dryRun"].(bool); dry {
		typ := "SELECT"
		sql, _ := conf["query"].(map[string]any)["query"].(string)
		for k, v := range f.statementTypes {
			if strings.Contains(sql, k) {
				typ = v
			}
		}
		job["statistics"] = map[string]any{
			"totalBytesProcessed": fmt.Sprint(f.estimate),
			"query":               map[string]any{"totalBytesProcessed": fmt.Sprint(f.estimate), "statementType": typ},
		}
	} else {
		job["statistics"] = map[string]any{
			"totalBytesProcessed": fmt.Sprint(f.billed),
			"query":               map[string]any{"totalBytesProcessed": fmt.Sprint(f.billed), "totalBytesBilled": fmt.Sprint(f.billed), "statementType": "SELECT"},
		}
		f.jobs[id] = job
	}
	writeJSON(w, job)
}

func (f *fakeBigQuery) serveResults(w http.ResponseWriter, r *http.Request, id string) {
	f.mu.Lock()
	job := f.jobs[id]
	hang := f.hang
	f.mu.Unlock()
	if job == nil {
		http.Error(w, "no such job", http.StatusNotFound)
		return
	}
	if hang {
		<-r.Context().Done()
		return
	}
	sql := job["configuration"].(map[string]any)["query"].(map[string]any)["query"].(string)
	var res *fakeResult
	for k, v := range f.results {
		if strings.Contains(sql, k) {
			res = &v
			break
		}
	}
	if res == nil {
		f.t.Errorf("no canned result for %s", sql)
		http.Error(w, "no result", http.StatusInternalServerError)
		return
	}
	rows := make([]map[string]any, len(res.rows))
	for i, row := range res.rows {
		cells := make([]map[string]any, len(row))
		for j, v := range row {
			cells[j] = map[string]any{"v": v}
		}
		rows[i] = map[string]any{"f": cells}
	}
	writeJSON(w, map[string]any{
		"kind": "bigquery#getQueryResultsResponse", "jobComplete": true,
		"jobReference": job["jobReference"], "schema": map[string]any{"fields": res.fields},
		"rows": rows, "totalRows": fmt.Sprint(len(rows)),
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func openFake(t *testing.T, f *fakeBigQuery, cfg Config) *Warehouse {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	if cfg.Name == "" {
		cfg.Name = "bq"
	}
	if cfg.Project == "" {
		cfg.Project = "acme-prod"
	}
	if cfg.Dataset == "" {
		cfg.Dataset = "loyalty"
	}
	cfg.Location = "US"
	wh, err := Open(context.Background(), cfg, option.WithEndpoint(srv.URL), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	return wh
}

func field(name, typ string) map[string]any {
	return map[string]any{"name": name, "type": typ, "mode": "NULLABLE"}
}

func TestQueryDryRunsThenBillsWithLabels(t *testing.T) {
	f := newFake(t)
	f.estimate, f.billed = 5<<20, 10<<20
	f.results["SELECT 42"] = fakeResult{fields: []map[string]any{field("n", "INTEGER")}, rows: [][]any{{"42"}}}
	wh := openFake(t, f, Config{MaxBytesPerQuery: 1 << 30, MaxBytesPerSession: 3 << 30})

	res, err := wh.Query(context.Background(), warehouse.Query{SQL: "SELECT 42 AS n", Agent: "dw-quality", Tool: "run_quality_check"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || res.Rows[0][0] != int64(42) || res.Columns[0] != "n" {
		t.Errorf("result %+v", res)
	}
	if len(f.inserts) != 2 {
		t.Fatalf("%d jobs inserted, want a dry run then the query", len(f.inserts))
	}
	dry := f.inserts[0]["configuration"].(map[string]any)
	if dry["dryRun"] != true {
		t.Errorf("first job is not a dry run: %v", dry)
	}
	real := f.inserts[1]["configuration"].(map[string]any)
	if real["dryRun"] == true {
		t.Errorf("second job is a dry run")
	}
	q := real["query"].(map[string]any)
	if q["maximumBytesBilled"] != fmt.Sprint(1<<30) {
		t.Errorf("maximumBytesBilled = %v, want the per-query budget %d", q["maximumBytesBilled"], 1<<30)
	}
	if q["query"] != "SELECT 42 AS n" || q["useLegacySql"] != false {
		t.Errorf("query config %v", q)
	}
	labels := real["labels"].(map[string]any)
	if labels["dw_agent"] != "dw-quality" || labels["dw_tool"] != "run_quality_check" {
		t.Errorf("labels %v", labels)
	}
	if got := wh.Scanned(); got != 10<<20 {
		t.Errorf("session scanned %d, want the billed %d", got, 10<<20)
	}
	if res.BytesScanned != 10<<20 {
		t.Errorf("BytesScanned %d", res.BytesScanned)
	}
}

func TestOverBudgetIsRefusedBeforeRunning(t *testing.T) {
	f := newFake(t)
	f.estimate = 20 << 30
	wh := openFake(t, f, Config{MaxBytesPerQuery: 10 << 30})
	_, err := wh.Query(context.Background(), warehouse.Query{SQL: "SELECT 1"})
	var be *BudgetError
	if !errors.As(err, &be) || be.Session {
		t.Fatalf("got %v, want a per-query budget error", err)
	}
	for _, want := range []string{"20.0 GiB (dry-run estimate)", "per-query scan budget of 10.0 GiB", "nothing was run"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if len(f.inserts) != 1 || f.inserts[0]["configuration"].(map[string]any)["dryRun"] != true {
		t.Errorf("%d jobs inserted; only the dry run should have been", len(f.inserts))
	}
}

func TestSessionBudgetAccumulates(t *testing.T) {
	f := newFake(t)
	f.estimate, f.billed = 400<<20, 400<<20
	f.results["SELECT 1"] = fakeResult{fields: []map[string]any{field("x", "INTEGER")}, rows: [][]any{{"1"}}}
	wh := openFake(t, f, Config{MaxBytesPerQuery: 900 << 20, MaxBytesPerSession: 1 << 30})
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := wh.Query(ctx, warehouse.Query{SQL: "SELECT 1"}); err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
	}
	// The second job may bill only what is left of the session budget.
	q := f.inserts[3]["configuration"].(map[string]any)["query"].(map[string]any)
	if q["maximumBytesBilled"] != fmt.Sprint((1<<30)-(400<<20)) {
		t.Errorf("second job maximumBytesBilled %v, want the 624 MiB left", q["maximumBytesBilled"])
	}
	_, err := wh.Query(ctx, warehouse.Query{SQL: "SELECT 1"})
	var be *BudgetError
	if !errors.As(err, &be) || !be.Session || !strings.Contains(err.Error(), "per-session scan budget") {
		t.Fatalf("third query: %v, want the session budget refusal", err)
	}
	if len(f.inserts) != 5 {
		t.Errorf("%d jobs, want 2×2 plus the refused dry run", len(f.inserts))
	}
}

func TestOnlySelectIsSent(t *testing.T) {
	f := newFake(t)
	wh := openFake(t, f, Config{})
	for _, sql := range []string{"DELETE FROM t WHERE true", "SELECT 1; DROP TABLE t", "CREATE TABLE x AS SELECT 1"} {
		if _, err := wh.Query(context.Background(), warehouse.Query{SQL: sql}); err == nil {
			t.Errorf("%q was accepted", sql)
		}
	}
	if len(f.paths) != 0 {
		t.Errorf("requests were sent: %v", f.paths)
	}
}

func TestTimeoutCancelsTheJob(t *testing.T) {
	f := newFake(t)
	f.hang = true
	wh := openFake(t, f, Config{})
	start := time.Now()
	_, err := wh.Query(context.Background(), warehouse.Query{SQL: "SELECT 1", Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Fatalf("got %v, want a timeout", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("timeout took %v", time.Since(start))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.cancels) != 1 {
		t.Errorf("job cancels %v, want the timed-out job cancelled", f.cancels)
	}
}

func TestLabelsFollowBigQueryRules(t *testing.T) {
	got := Labels("DW Quality!", strings.Repeat("x", 80))
	if got["dw_agent"] != "dw_quality_" || len(got["dw_tool"]) != 63 {
		t.Errorf("labels %v", got)
	}
	if l := Labels("", ""); len(l) != 0 {
		t.Errorf("empty labels %v", l)
	}
}

func TestConfigRefusesBadSettings(t *testing.T) {
	bad := []Config{
		{Name: "bq", Project: "Bad Project", Dataset: "d"},
		{Name: "bq", Project: "p-1", Dataset: "d;drop"},
		{Name: "bq", Project: "p-1"},
		{Name: "bq", Project: "p-1", Dataset: "d", CredentialsEnv: `{"type":"service_account"}`},
		{Name: "bq", Project: "p-1", Dataset: "d", MaxBytesPerQuery: 10, MaxBytesPerSession: 5},
	}
	for _, c := range bad {
		c.SetDefaults()
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	t.Setenv("DW_TEST_BQ_CREDS", `{"type":"gdch_service_account"}`)
	_, err := Open(context.Background(), Config{Name: "bq", Project: "p-1", Dataset: "d", CredentialsEnv: "DW_TEST_BQ_CREDS"})
	if err == nil || !strings.Contains(err.Error(), `type "gdch_service_account"`) || strings.Contains(err.Error(), "{") {
		t.Errorf("unexpected credential type: %v (the value must never be echoed)", err)
	}
	t.Setenv("DW_TEST_BQ_CREDS", "")
	if _, err := Open(context.Background(), Config{Name: "bq", Project: "p-1", Dataset: "d", CredentialsEnv: "DW_TEST_BQ_CREDS"}); err == nil || !strings.Contains(err.Error(), "DW_TEST_BQ_CREDS is empty") {
		t.Errorf("empty credentials: %v", err)
	}
}

// A check plan runs through the driver like any statement: catalog reads
// and the scan are dry-run and labelled, and BigQuery's wire types
// (TIMESTAMP as microseconds, INT64 as strings) come back as Go values.
func TestCheckScanThroughTheDriver(t *testing.T) {
	f := newFake(t)
	f.estimate, f.billed = 1<<20, 10<<20
	f.results["INFORMATION_SCHEMA.TABLES"] = fakeResult{
		fields: []map[string]any{field("table_catalog", "STRING"), field("table_schema", "STRING"), field("table_name", "STRING")},
		rows:   [][]any{{"acme-prod", "loyalty", "member_balances"}, {"acme-prod", "loyalty", "members"}},
	}
	f.results["INFORMATION_SCHEMA.COLUMNS"] = fakeResult{
		fields: []map[string]any{field("column_name", "STRING"), field("data_type", "STRING"), field("n", "BOOLEAN"), field("ordinal_position", "INTEGER")},
		rows: [][]any{
			{"member_id", "INT64", "false", "1"},
			{"balance", "INT64", "true", "2"},
			{"event_time", "TIMESTAMP", "true", "3"},
		},
	}
	hour := time.Date(2025, 3, 11, 14, 0, 0, 0, time.UTC)
	micros := func(t time.Time) string { return fmt.Sprint(t.UnixMicro()) }
	f.results["TIMESTAMP_TRUNC"] = fakeResult{
		// COUNT(*), COUNT(member_id), COUNT(DISTINCT member_id), MAX(event_time)
		fields: []map[string]any{field("bucket", "TIMESTAMP"), field("m0", "INTEGER"), field("m1", "INTEGER"), field("m2", "INTEGER"), field("m3", "TIMESTAMP")},
		rows: [][]any{
			{micros(hour), "100", "100", "91", micros(hour.Add(59 * time.Minute))},
			{nil, "100", "100", "91", micros(hour.Add(59 * time.Minute))},
		},
	}
	wh := openFake(t, f, Config{})
	ctx := context.Background()
	tab, err := warehouse.Resolve(ctx, wh, "loyalty.member_balance")
	if err == nil || !strings.Contains(err.Error(), "closest: loyalty.member_balances") {
		t.Fatalf("misspelt table: %v", err)
	}
	if tab, err = warehouse.Resolve(ctx, wh, "loyalty.member_balances"); err != nil {
		t.Fatal(err)
	}
	plan, err := checks.Plan(tab, wh.Dialect(), []checks.Spec{
		{Kind: checks.KindRowCount}, {Kind: checks.KindNullRate, Column: "member_id"},
		{Kind: checks.KindUniqueness, Columns: []string{"member_id"}}, {Kind: checks.KindFreshness, Column: "event_time"},
	}, checks.Window{Column: "event_time", Start: hour, End: hour.Add(time.Hour), Grain: checks.Hour})
	if err != nil {
		t.Fatal(err)
	}
	scan, err := checks.Run(ctx, wh, plan, checks.RunOptions{Agent: "dw-quality", Tool: "run_quality_check", Clock: fixedClock(hour.Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	var dupTotal, stale *checks.Observation
	for i, o := range scan.Observations {
		switch {
		case o.Metric == checks.MetricDuplicateRate && o.Total:
			dupTotal = &scan.Observations[i]
		case o.Metric == checks.MetricStaleness:
			stale = &scan.Observations[i]
		}
	}
	if dupTotal == nil || dupTotal.Count != 9 || dupTotal.Of != 100 {
		t.Errorf("duplicates %+v, want 9 of 100", dupTotal)
	}
	if stale == nil || stale.Value != 60 {
		t.Errorf("staleness %+v, want 60s", stale)
	}
	last := f.inserts[len(f.inserts)-1]
	if l := last["configuration"].(map[string]any)["labels"].(map[string]any); l["dw_tool"] != "run_quality_check" {
		t.Errorf("scan labels %v", l)
	}
	if scan.BytesScanned != 10<<20 {
		t.Errorf("bytes scanned %d", scan.BytesScanned)
	}
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// Live BigQuery, when credentials are present.
func TestLiveBigQuery(t *testing.T) {
	project := os.Getenv("DW_TEST_BIGQUERY_PROJECT")
	var missing []string
	if project == "" {
		missing = append(missing, "DW_TEST_BIGQUERY_PROJECT")
	}
	if os.Getenv("GOOGLE_APPLICATION_CREDENTIALS") == "" {
		missing = append(missing, "GOOGLE_APPLICATION_CREDENTIALS")
	}
	if len(missing) > 0 {
		t.Skipf("live BigQuery test needs %s", strings.Join(missing, " and "))
	}
	ctx := context.Background()
	wh, err := Open(ctx, Config{Name: "live", Project: project, Location: "US", Dataset: "samples",
		CredentialsEnv: "GOOGLE_APPLICATION_CREDENTIALS", MaxBytesPerQuery: 1 << 30, MaxBytesPerSession: 2 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	tab, err := wh.Describe(ctx, warehouse.TableRef{Database: "bigquery-public-data", Schema: "samples", Name: "shakespeare"})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := checks.Plan(tab, wh.Dialect(), []checks.Spec{{Kind: checks.KindRowCount}, {Kind: checks.KindNullRate, Column: "word"}}, checks.Window{})
	if err != nil {
		t.Fatal(err)
	}
	scan, err := checks.Run(ctx, wh, plan, checks.RunOptions{Agent: "dw-test", Tool: "live"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range scan.Observations {
		if o.Metric == checks.MetricRowCount && o.Value != 164656 {
			t.Errorf("shakespeare has %v rows, want 164656", o.Value)
		}
	}
}
