package bigquery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/api/option"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/bigquery/bigquerytest"
)

// openFake opens the driver on the BigQuery fake.
func openFake(t *testing.T, f *bigquerytest.Fake, cfg Config) *Warehouse {
	t.Helper()
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
	wh, err := Open(context.Background(), cfg, option.WithEndpoint(f.URL()), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	return wh
}

func TestQueryDryRunsThenBillsWithLabels(t *testing.T) {
	f := bigquerytest.New(t)
	f.Estimate, f.Billed = 5<<20, 10<<20
	f.Results["SELECT 42"] = bigquerytest.Result{Fields: []map[string]any{bigquerytest.Field("n", "INTEGER")}, Rows: [][]any{{"42"}}}
	wh := openFake(t, f, Config{MaxBytesPerQuery: 1 << 30, MaxBytesPerSession: 3 << 30})

	res, err := wh.Query(context.Background(), warehouse.Query{SQL: "SELECT 42 AS n", Agent: "dw-quality", Tool: "run_quality_check"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || res.Rows[0][0] != int64(42) || res.Columns[0] != "n" {
		t.Errorf("result %+v", res)
	}
	inserts := f.Inserts()
	if len(inserts) != 2 {
		t.Fatalf("%d jobs inserted, want a dry run then the query", len(inserts))
	}
	dry := inserts[0]["configuration"].(map[string]any)
	if dry["dryRun"] != true {
		t.Errorf("first job is not a dry run: %v", dry)
	}
	real := inserts[1]["configuration"].(map[string]any)
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
	f := bigquerytest.New(t)
	f.Estimate = 20 << 30
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
	if inserts := f.Inserts(); len(inserts) != 1 || inserts[0]["configuration"].(map[string]any)["dryRun"] != true {
		t.Errorf("%d jobs inserted; only the dry run should have been", len(inserts))
	}
}

func TestSessionBudgetAccumulates(t *testing.T) {
	f := bigquerytest.New(t)
	f.Estimate, f.Billed = 400<<20, 400<<20
	f.Results["SELECT 1"] = bigquerytest.Result{Fields: []map[string]any{bigquerytest.Field("x", "INTEGER")}, Rows: [][]any{{"1"}}}
	wh := openFake(t, f, Config{MaxBytesPerQuery: 900 << 20, MaxBytesPerSession: 1 << 30})
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := wh.Query(ctx, warehouse.Query{SQL: "SELECT 1"}); err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
	}
	// The second job may bill only what is left of the session budget.
	q := f.Inserts()[3]["configuration"].(map[string]any)["query"].(map[string]any)
	if q["maximumBytesBilled"] != fmt.Sprint((1<<30)-(400<<20)) {
		t.Errorf("second job maximumBytesBilled %v, want the 624 MiB left", q["maximumBytesBilled"])
	}
	_, err := wh.Query(ctx, warehouse.Query{SQL: "SELECT 1"})
	var be *BudgetError
	if !errors.As(err, &be) || !be.Session || !strings.Contains(err.Error(), "per-session scan budget") {
		t.Fatalf("third query: %v, want the session budget refusal", err)
	}
	if n := len(f.Inserts()); n != 5 {
		t.Errorf("%d jobs, want 2×2 plus the refused dry run", n)
	}
}

func TestOnlySelectIsSent(t *testing.T) {
	f := bigquerytest.New(t)
	wh := openFake(t, f, Config{})
	for _, sql := range []string{"DELETE FROM t WHERE true", "SELECT 1; DROP TABLE t", "CREATE TABLE x AS SELECT 1"} {
		if _, err := wh.Query(context.Background(), warehouse.Query{SQL: sql}); err == nil {
			t.Errorf("%q was accepted", sql)
		}
	}
	if sent := f.Requests(); len(sent) != 0 {
		t.Errorf("requests were sent: %v", sent)
	}
}

func TestTimeoutCancelsTheJob(t *testing.T) {
	f := bigquerytest.New(t)
	f.Hang = true
	wh := openFake(t, f, Config{})
	start := time.Now()
	_, err := wh.Query(context.Background(), warehouse.Query{SQL: "SELECT 1", Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Fatalf("got %v, want a timeout", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("timeout took %v", time.Since(start))
	}
	if cancelled := f.Cancelled(); len(cancelled) != 1 {
		t.Errorf("job cancels %v, want the timed-out job cancelled", cancelled)
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
		{Name: "bq", Project: "p" + strings.Repeat("1", 128), Dataset: "d"},   // 129 characters
		{Name: "bq", Project: "p-1", Location: "e" + strings.Repeat("u", 64)}, // 65 characters
	}
	// The longest project id and location are accepted.
	for _, c := range []Config{{Name: "bq", Project: "p" + strings.Repeat("1", 127), Dataset: "d"}, {Name: "bq", Project: "p-1", Location: "e" + strings.Repeat("u", 63)}} {
		c.SetDefaults()
		if err := c.Validate(); err != nil {
			t.Errorf("%s / %s: %v", c.Project, c.Location, err)
		}
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
	f := bigquerytest.New(t)
	f.Estimate, f.Billed = 1<<20, 10<<20
	f.Results["INFORMATION_SCHEMA.TABLES"] = bigquerytest.Result{
		Fields: []map[string]any{bigquerytest.Field("table_catalog", "STRING"), bigquerytest.Field("table_schema", "STRING"), bigquerytest.Field("table_name", "STRING")},
		Rows:   [][]any{{"acme-prod", "loyalty", "member_balances"}, {"acme-prod", "loyalty", "members"}},
	}
	f.Results["INFORMATION_SCHEMA.COLUMNS"] = bigquerytest.Result{
		Fields: []map[string]any{bigquerytest.Field("column_name", "STRING"), bigquerytest.Field("data_type", "STRING"), bigquerytest.Field("n", "BOOLEAN"), bigquerytest.Field("ordinal_position", "INTEGER")},
		Rows: [][]any{
			{"member_id", "INT64", "false", "1"},
			{"balance", "INT64", "true", "2"},
			{"event_time", "TIMESTAMP", "true", "3"},
		},
	}
	hour := time.Date(2025, 3, 11, 14, 0, 0, 0, time.UTC)
	micros := func(t time.Time) string { return fmt.Sprint(t.UnixMicro()) }
	f.Results["TIMESTAMP_TRUNC"] = bigquerytest.Result{
		// COUNT(*), COUNT(member_id), COUNT(DISTINCT member_id), MAX(event_time)
		Fields: []map[string]any{bigquerytest.Field("bucket", "TIMESTAMP"), bigquerytest.Field("m0", "INTEGER"), bigquerytest.Field("m1", "INTEGER"), bigquerytest.Field("m2", "INTEGER"), bigquerytest.Field("m3", "TIMESTAMP")},
		Rows: [][]any{
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
	inserts := f.Inserts()
	last := inserts[len(inserts)-1]
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
