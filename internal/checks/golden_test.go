package checks

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/warehouse"
)

var update = flag.Bool("update", false, "rewrite the golden SQL files under testdata/golden")

// Catalog entries as each engine's information schema spells them.
var (
	bigQueryTable = &warehouse.Table{
		Ref: warehouse.TableRef{Database: "acme-prod", Schema: "loyalty", Name: "member_balances"},
		Columns: []warehouse.Column{
			{Name: "member_id", Type: "INT64", Position: 1},
			{Name: "balance", Type: "NUMERIC(18, 2)", Position: 2},
			{Name: "tier", Type: "STRING", Position: 3},
			{Name: "last_store_id", Type: "STRING", Position: 4},
			{Name: "event_time", Type: "TIMESTAMP", Position: 5},
			{Name: "_ingested_at", Type: "TIMESTAMP", Position: 6},
			{Name: "local_time", Type: "DATETIME", Position: 7},
			{Name: "day", Type: "DATE", Position: 8},
			{Name: "attrs", Type: "STRUCT<a INT64>", Position: 9},
		},
	}
	snowflakeTable = &warehouse.Table{
		Ref: warehouse.TableRef{Database: "ANALYTICS", Schema: "USAGE", Name: "USAGE_HOURLY"},
		Columns: []warehouse.Column{
			{Name: "USAGE_ID", Type: "NUMBER", Position: 1},
			{Name: "ACCOUNT_ID", Type: "TEXT", Position: 2},
			{Name: "EGRESS_BYTES", Type: "NUMBER", Position: 3},
			{Name: "REGION", Type: "TEXT", Position: 4},
			{Name: "HOUR", Type: "TIMESTAMP_NTZ", Position: 5},
			{Name: "LOADED_AT", Type: "TIMESTAMP_LTZ", Position: 6},
			{Name: "DAY", Type: "DATE", Position: 7},
		},
	}
	duckdbTable = &warehouse.Table{
		Ref: warehouse.TableRef{Schema: "usage", Name: "usage_hourly"},
		Columns: []warehouse.Column{
			{Name: "usage_id", Type: "BIGINT", Position: 1},
			{Name: "account_id", Type: "VARCHAR", Position: 2},
			{Name: "egress_bytes", Type: "BIGINT", Position: 3},
			{Name: "region", Type: "VARCHAR", Position: 4},
			{Name: "hour", Type: "TIMESTAMP WITH TIME ZONE", Position: 5},
			{Name: "loaded_at", Type: "TIMESTAMP", Position: 6},
		},
	}
)

type goldenCase struct {
	name    string
	dialect warehouse.Dialect
	table   *warehouse.Table
	specs   func(*warehouse.Table, warehouse.Dialect) []Spec
	window  Window
}

var today = time.Date(2025, 3, 11, 0, 0, 0, 0, time.UTC)

func profiled(t *warehouse.Table, d warehouse.Dialect) []Spec {
	specs, _ := Profile(t, d)
	return specs
}

func fixed(specs ...Spec) func(*warehouse.Table, warehouse.Dialect) []Spec {
	return func(*warehouse.Table, warehouse.Dialect) []Spec { return specs }
}

func goldenCases() []goldenCase {
	hours := func(col string) Window {
		return Window{Column: col, Start: today, End: today.Add(24 * time.Hour), Grain: Hour}
	}
	return []goldenCase{
		{"bigquery_profile", warehouse.BigQuery{}, bigQueryTable, profiled, Window{}},
		{"bigquery_today_by_hour", warehouse.BigQuery{}, bigQueryTable, fixed(
			Spec{Kind: KindRowCount},
			Spec{Kind: KindNullRate, Column: "balance"},
			Spec{Kind: KindUniqueness, Columns: []string{"member_id"}},
			Spec{Kind: KindUniqueness, Columns: []string{"member_id", "last_store_id"}},
			Spec{Kind: KindFreshness, Column: "event_time"},
			Spec{Kind: KindLoadLag, EventTime: "event_time", IngestTime: "_ingested_at"},
			Spec{Kind: KindLoadLag, EventTime: "local_time", IngestTime: "_ingested_at"},
			Spec{Kind: KindAcceptedValues, Column: "tier", Values: []string{"gold", "silver", `O'Brien\n`}},
			Spec{Kind: KindRange, Column: "balance", Min: f64(0), Max: f64(1e7)},
			Spec{Kind: KindPredicate, Name: "tier_set", SQL: "tier IS NOT NULL AND (LOWER(tier) LIKE 'g%' OR balance BETWEEN 0 AND 100.5) AND tier <> 'it''s'"},
		), hours("event_time")},
		{"bigquery_datetime_by_day", warehouse.BigQuery{}, bigQueryTable, fixed(
			Spec{Kind: KindRowCount}, Spec{Kind: KindNullRate, Column: "tier"},
		), Window{Column: "local_time", Start: today.AddDate(0, 0, -7), End: today, Grain: Day}},
		{"bigquery_date_by_day", warehouse.BigQuery{}, bigQueryTable, fixed(
			Spec{Kind: KindRowCount},
		), Window{Column: "day", Start: today.AddDate(0, 0, -7), End: today, Grain: Day}},
		{"snowflake_profile", warehouse.Snowflake{}, snowflakeTable, profiled, Window{}},
		{"snowflake_today_by_hour", warehouse.Snowflake{}, snowflakeTable, fixed(
			Spec{Kind: KindRowCount, Min: f64(1)},
			Spec{Kind: KindNullRate, Column: "egress_bytes", MaxRate: f64(0)}, // lower case resolves to the catalog's upper case
			Spec{Kind: KindUniqueness, Columns: []string{"usage_id"}},
			Spec{Kind: KindUniqueness, Columns: []string{"account_id", "hour"}},
			Spec{Kind: KindFreshness, Column: "hour", MaxAge: "2h"},
			Spec{Kind: KindLoadLag, EventTime: "hour", IngestTime: "loaded_at"},
			Spec{Kind: KindAcceptedValues, Column: "region", Values: []string{"eu", "us", `O'Brien\n`}},
			Spec{Kind: KindAcceptedValues, Column: "egress_bytes", Values: []string{"0", "1024"}},
			Spec{Kind: KindRange, Column: "egress_bytes", Min: f64(0)},
			Spec{Kind: KindPredicate, Name: "bytes_known", SQL: "COALESCE(egress_bytes, -1) >= 0 OR region IN ('test', 'dev')"},
		), hours("hour")},
		{"snowflake_ltz_by_hour", warehouse.Snowflake{}, snowflakeTable, fixed(
			Spec{Kind: KindRowCount},
		), hours("loaded_at")},
		{"duckdb_profile_by_hour", warehouse.DuckDB{}, duckdbTable, profiled, hours("hour")},
		// One day's statement of a backfill (names ending _backfill_chunk
		// are planned per bucket): no ROLLUP, no anti-join.
		{"duckdb_profile_backfill_chunk", warehouse.DuckDB{}, duckdbTable, profiled, hours("hour")},
		// Relationships: the table's one scan plus one bounded anti-join
		// against the referenced table, names quoted in catalog spelling.
		{"bigquery_relationships", warehouse.BigQuery{}, bigQueryTable, fixed(
			Spec{Kind: KindRelationship, Column: "member_id", To: "members", Field: "id", parent: bigQueryMembers},
		), Window{}},
		{"snowflake_relationships_by_hour", warehouse.Snowflake{}, snowflakeTable, fixed(
			Spec{Kind: KindRelationship, Column: "account_id", To: "accounts", Field: "account_id", parent: snowflakeAccounts},
		), hours("hour")},
		{"duckdb_relationships_by_hour", warehouse.DuckDB{}, duckdbTable, fixed(
			Spec{Kind: KindNullRate, Column: "account_id"},
			Spec{Kind: KindRelationship, Column: "account_id", To: "usage.usage_hourly", Field: "account_id", parent: duckdbTable},
		), hours("hour")},
	}
}

var (
	bigQueryMembers = &warehouse.Table{
		Ref:     warehouse.TableRef{Database: "acme-prod", Schema: "loyalty", Name: "members"},
		Columns: []warehouse.Column{{Name: "id", Type: "INT64", Position: 1}},
	}
	snowflakeAccounts = &warehouse.Table{
		Ref:     warehouse.TableRef{Database: "ANALYTICS", Schema: "CRM", Name: "ACCOUNTS"},
		Columns: []warehouse.Column{{Name: "ACCOUNT_ID", Type: "TEXT", Position: 1}},
	}
)

// A relationships check compares columns of one kind, and names only
// columns the referenced table has.
func TestRelationshipsRefuseMismatchedColumns(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Kind: KindRelationship, Column: "tier", To: "members", Field: "id", parent: bigQueryMembers}, "must be of one kind"},
		{Spec{Kind: KindRelationship, Column: "member_id", To: "members", Field: "idd", parent: bigQueryMembers}, `no column "idd"`},
		{Spec{Kind: KindRelationship, Column: "member_id", To: "members", Field: "id"}, "was not resolved"},
	} {
		if _, err := Plan(bigQueryTable, warehouse.BigQuery{}, []Spec{c.spec}, Window{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", c.spec, err, c.want)
		}
	}
}

// The SQL each dialect gets is reviewed as files: a change in planning
// shows up as a diff. Regenerate with go test ./internal/checks -run Golden -update.
func TestGoldenSQL(t *testing.T) {
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			plan, err := plan(c.table, c.dialect, c.specs(c.table, c.dialect), c.window, strings.HasSuffix(c.name, "_backfill_chunk"))
			if err != nil {
				t.Fatal(err)
			}
			got := plan.SQL() + ";\n"
			path := filepath.Join("testdata", "golden", c.name+".sql")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("SQL for %s changed; if intended, run with -update.\ngot:\n%s\nwant:\n%s", c.name, got, want)
			}
			for _, st := range plan.Statements {
				if err := warehouse.ReadOnlyStatement(st.SQL); err != nil {
					t.Errorf("plan is not a read-only statement: %v", err)
				}
			}
		})
	}
}

func TestSnowflakeQuotesCatalogSpelling(t *testing.T) {
	plan, err := Plan(snowflakeTable, warehouse.Snowflake{}, []Spec{{Kind: KindNullRate, Column: "egress_bytes"}}, Window{})
	if err != nil {
		t.Fatal(err)
	}
	sql := plan.SQL()
	if !strings.Contains(sql, `COUNT("EGRESS_BYTES")`) || !strings.Contains(sql, `FROM "ANALYTICS"."USAGE"."USAGE_HOURLY"`) {
		t.Errorf("Snowflake names must be quoted in catalog spelling:\n%s", sql)
	}
	if plan.Asset != "snowflake://usage.usage_hourly" {
		t.Errorf("asset %s", plan.Asset)
	}
}

func TestBigQueryQuotesTheWholePath(t *testing.T) {
	plan, err := Plan(bigQueryTable, warehouse.BigQuery{}, []Spec{{Kind: KindRowCount}}, Window{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan.SQL(), "FROM `acme-prod.loyalty.member_balances`") {
		t.Errorf("BigQuery table path:\n%s", plan.SQL())
	}
}
