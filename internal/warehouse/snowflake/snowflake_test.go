package snowflake

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/snowflake/snowflaketest"
)

// Catalog reads and check scans as SQL, through go-sqlmock: what is sent,
// with which arguments, and how Snowflake's answers (numbers as strings,
// upper-case names) come back.
func TestCatalogAndScanSQL(t *testing.T) {
	db, mock, err := sqlmock.New()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wh := newWarehouse(Config{Name: "sf", Database: "ANALYTICS", Timeout: time.Minute}, db)
	ctx := context.Background()

	mock.ExpectQuery(regexp.QuoteMeta(`SELECT table_catalog, table_schema, table_name FROM "ANALYTICS".INFORMATION_SCHEMA.TABLES WHERE table_schema <> 'INFORMATION_SCHEMA' ORDER BY table_schema, table_name`)).
		WillReturnRows(sqlmock.NewRows([]string{"TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME"}).
			AddRow("ANALYTICS", "USAGE", "USAGE_HOURLY").AddRow("ANALYTICS", "USAGE", "USAGE_DAILY"))
	mock.ExpectQuery(regexp.QuoteMeta(`SELECT column_name, data_type, is_nullable = 'YES', ordinal_position FROM "ANALYTICS".INFORMATION_SCHEMA.COLUMNS WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position`)).
		WithArgs("USAGE", "USAGE_HOURLY").
		WillReturnRows(sqlmock.NewRows([]string{"COLUMN_NAME", "DATA_TYPE", "N", "ORDINAL_POSITION"}).
			AddRow("USAGE_ID", "NUMBER", false, "1").
			AddRow("EGRESS_BYTES", "NUMBER", true, "2").
			AddRow("HOUR", "TIMESTAMP_NTZ", false, "3"))
	tab, err := warehouse.Resolve(ctx, wh, "usage.usage_hourly") // lower case, as people type it
	if err != nil {
		t.Fatal(err)
	}
	if tab.Ref.Name != "USAGE_HOURLY" || tab.Columns[1].Name != "EGRESS_BYTES" || !tab.Columns[1].Nullable || tab.Columns[2].Position != 3 {
		t.Fatalf("described %+v", tab)
	}

	hour := time.Date(2025, 3, 11, 14, 0, 0, 0, time.UTC)
	plan, err := checks.Plan(tab, wh.Dialect(), []checks.Spec{
		{Kind: checks.KindRowCount}, {Kind: checks.KindNullRate, Column: "egress_bytes"},
	}, checks.Window{Column: "hour", Start: hour, End: hour.Add(time.Hour), Grain: checks.Hour})
	if err != nil {
		t.Fatal(err)
	}
	want := `SELECT
  DATE_TRUNC('HOUR', "HOUR") AS bucket,
  COUNT(*) AS m0,
  COUNT("EGRESS_BYTES") AS m1
FROM "ANALYTICS"."USAGE"."USAGE_HOURLY"
WHERE "HOUR" >= '2025-03-11 14:00:00'::TIMESTAMP_NTZ AND "HOUR" < '2025-03-11 15:00:00'::TIMESTAMP_NTZ
GROUP BY DATE_TRUNC('HOUR', "HOUR")`
	mock.ExpectQuery(regexp.QuoteMeta(want)).
		WillReturnRows(sqlmock.NewRows([]string{"BUCKET", "M0", "M1"}).AddRow(hour, "1000", "820"))
	scan, err := checks.Run(ctx, wh, plan, checks.RunOptions{Agent: "dw-quality", Tool: "run_quality_check"})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, o := range scan.Observations {
		if o.Metric == checks.MetricNullRate && (o.Total || o.Bucket.Equal(hour)) {
			found++
			if o.Count != 180 || o.Of != 1000 {
				t.Errorf("null rate %d of %d, want 180 of 1000 (total %v)", o.Count, o.Of, o.Total)
			}
		}
	}
	if found != 2 {
		t.Errorf("want the null rate for 14:00 and, combined from it, the window's: %+v", scan.Observations)
	}
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Error(err)
	}

	for _, sql := range []string{"DELETE FROM t", "SELECT 1; DROP TABLE t", "ALTER SESSION SET QUERY_TAG = 'x'"} {
		if _, err := wh.Query(ctx, warehouse.Query{SQL: sql}); err == nil {
			t.Errorf("%q was sent", sql)
		}
	}
}

// openFake opens the driver against f.
func openFake(t *testing.T, f *snowflaketest.Fake) *Warehouse {
	t.Helper()
	host, port := f.Addr()
	t.Setenv("DW_TEST_SF_PASSWORD", "not-a-real-password")
	wh, err := Open(context.Background(), Config{
		Name: "sf", Account: "acme", User: "dw_reader", Database: "ANALYTICS", Warehouse: "CHECKS_WH", Role: "DW_READONLY",
		PasswordEnv: "DW_TEST_SF_PASSWORD", Timeout: 90 * time.Second, Host: host, Port: port, Protocol: "http",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	return wh
}

// fortyTwo is the fake's answer to SELECT 42 AS n.
var fortyTwo = snowflaketest.Result{
	Columns: []map[string]any{{"name": "N", "type": "fixed", "scale": 0, "precision": 18, "nullable": false}},
	Rows:    [][]*string{{snowflaketest.Text("42")}},
}

// The real driver, against a fake Snowflake: the session asks for
// STATEMENT_TIMEOUT_IN_SECONDS and each statement carries its QUERY_TAG.
func TestSessionTimeoutAndQueryTagOnTheWire(t *testing.T) {
	f := snowflaketest.New(t)
	f.Results["SELECT 42"] = fortyTwo
	wh := openFake(t, f)
	res, err := wh.Query(context.Background(), warehouse.Query{SQL: "SELECT 42 AS n", Agent: "dw-quality", Tool: "run_quality_check"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || res.Rows[0][0] != "42" {
		t.Errorf("rows %v", res.Rows)
	}
	data, _ := f.Login()["data"].(map[string]any)
	params, _ := data["SESSION_PARAMETERS"].(map[string]any)
	if params["STATEMENT_TIMEOUT_IN_SECONDS"] != "90" {
		t.Errorf("login session parameters %v, want STATEMENT_TIMEOUT_IN_SECONDS 90", params)
	}
	queries := f.Queries()
	if len(queries) != 1 {
		t.Fatalf("%d query requests", len(queries))
	}
	q := queries[0]
	if q["sqlText"] != "SELECT 42 AS n" {
		t.Errorf("sqlText %v", q["sqlText"])
	}
	qp, _ := q["parameters"].(map[string]any)
	if qp["QUERY_TAG"] != `{"agent":"dw-quality","tool":"run_quality_check"}` {
		t.Errorf("query parameters %v, want the QUERY_TAG naming agent and tool", qp)
	}
}

func TestTimeoutAbortsTheStatement(t *testing.T) {
	f := snowflaketest.New(t)
	f.Hang = true
	wh := openFake(t, f)
	_, err := wh.Query(context.Background(), warehouse.Query{SQL: "SELECT 1", Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Fatalf("got %v, want a timeout", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if f.Aborts() > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("the timed-out statement was not aborted in Snowflake")
}

func TestConfigRefusesSecretsInPlaceOfNames(t *testing.T) {
	bad := []Config{
		{Name: "sf", Account: "acme", User: "u", Database: "D", PasswordEnv: "hunter2!"},
		{Name: "sf", Account: "acme", User: "u", Database: "D"},
		{Name: "sf", Account: "acme", User: "u", PasswordEnv: "P"},
		{Name: "sf", Account: "acme", User: "u", Database: "D; DROP", PasswordEnv: "P"},
		{Account: "acme", User: "u", Database: "D", PasswordEnv: "P"},
		{Name: "sf", Account: "a" + strings.Repeat("b", 255), User: "u", Database: "D", PasswordEnv: "P"}, // 256 characters
		{Name: "sf", Account: "-acme", User: "u", Database: "D", PasswordEnv: "P"},
	}
	// The longest account identifier is accepted.
	longest := Config{Name: "sf", Account: "a" + strings.Repeat("b", 254), User: "u", Database: "D", PasswordEnv: "P"}
	longest.SetDefaults()
	if err := longest.Validate(); err != nil {
		t.Errorf("a 255-character account: %v", err)
	}
	for _, c := range bad {
		c.SetDefaults()
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	t.Setenv("DW_TEST_SF_KEY", "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n")
	_, err := Open(context.Background(), Config{Name: "sf", Account: "acme", User: "u", Database: "D", PrivateKeyEnv: "DW_TEST_SF_KEY"})
	if err == nil || !strings.Contains(err.Error(), "DW_TEST_SF_KEY") || strings.Contains(err.Error(), "bm90") {
		t.Errorf("bad key: %v (must name the variable, never echo it)", err)
	}
	t.Setenv("DW_TEST_SF_DSN", "::not a dsn::")
	if _, err := Open(context.Background(), Config{Name: "sf", DSNEnv: "DW_TEST_SF_DSN"}); err == nil || strings.Contains(err.Error(), "not a dsn") {
		t.Errorf("bad DSN: %v (must not echo the value)", err)
	}
}

// A discoverable easy-logging config (which could send the driver's log
// to stdout) is overridden by a private one that keeps logging off.
func TestEasyLoggingIsPinnedOff(t *testing.T) {
	dir := t.TempDir()
	stray := dir + "/sf_client_config.json"
	if err := os.WriteFile(stray, []byte(`{"common":{"log_level":"TRACE","log_path":"STDOUT"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SF_CLIENT_CONFIG_FILE", stray)
	t.Setenv("TMPDIR", t.TempDir()) // where the private config is written
	t.Setenv("DW_TEST_SF_PASSWORD", "x")
	sf, err := driverConfig(Config{Name: "sf", Account: "acme", User: "u", Database: "D", PasswordEnv: "DW_TEST_SF_PASSWORD", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if sf.ClientConfigFile == "" || sf.ClientConfigFile == stray {
		t.Fatalf("ClientConfigFile %q: the stray config would be used", sf.ClientConfigFile)
	}
	b, err := os.ReadFile(sf.ClientConfigFile)
	if err != nil || !strings.Contains(string(b), `"log_level":"OFF"`) || strings.Contains(string(b), "STDOUT") {
		t.Errorf("pinned config %s: %v", b, err)
	}
	if !sf.DisableTelemetry || *sf.Params["STATEMENT_TIMEOUT_IN_SECONDS"] != "60" {
		t.Errorf("driver config %+v", sf)
	}
}

// Live Snowflake, when a DSN is present.
func TestLiveSnowflake(t *testing.T) {
	if os.Getenv("DW_TEST_SNOWFLAKE_DSN") == "" {
		t.Skip("live Snowflake test needs DW_TEST_SNOWFLAKE_DSN (a gosnowflake DSN with database and warehouse)")
	}
	ctx := context.Background()
	wh, err := Open(ctx, Config{Name: "live", DSNEnv: "DW_TEST_SNOWFLAKE_DSN"})
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	res, err := wh.Query(ctx, warehouse.Query{SQL: "SELECT CURRENT_STATEMENT(), 1 AS n", Agent: "dw-test", Tool: "live"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 {
		t.Errorf("rows %v", res.Rows)
	}
	if _, err := wh.ListTables(ctx); err != nil {
		t.Errorf("list tables: %v", err)
	}
}
