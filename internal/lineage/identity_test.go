package lineage

import (
	"testing"
)

func TestTableIDCaseRules(t *testing.T) {
	cases := []struct {
		platform, name, id, weak string
	}{
		// Snowflake: unquoted folds to upper, so these are all one table.
		{"snowflake", "ANALYTICS.USAGE.USAGE_HOURLY", "snowflake://analytics.usage.usage_hourly", "snowflake://usage.usage_hourly"},
		{"snowflake", "analytics.usage.usage_hourly", "snowflake://analytics.usage.usage_hourly", "snowflake://usage.usage_hourly"},
		{"snowflake", `"ANALYTICS"."USAGE"."USAGE_HOURLY"`, "snowflake://analytics.usage.usage_hourly", "snowflake://usage.usage_hourly"},
		// ...but a quoted lower-case name is a different table.
		{"snowflake", `ANALYTICS."usage".USAGE_HOURLY`, `snowflake://analytics."usage".usage_hourly`, `snowflake://"usage".usage_hourly`},
		// PostgreSQL folds to lower; dbt quotes lower-case names, which changes nothing.
		{"postgres", `"shop"."public"."orders"`, "postgres://shop.public.orders", "postgres://public.orders"},
		{"postgresql", "Shop.Public.Orders", "postgres://shop.public.orders", "postgres://public.orders"},
		{"postgres", `shop.public."Orders"`, `postgres://shop.public."Orders"`, `postgres://public."Orders"`},
		// DuckDB matches case-insensitively even when quoted.
		{"duckdb", `"Main"."Orders"`, "duckdb://main.orders", ""},
		// BigQuery: project ids are lower-case, datasets and tables keep case.
		{"bigquery", "`My-Project.Sales.Orders`", "bigquery://my-project.Sales.Orders", "bigquery://Sales.Orders"},
		{"bigquery", "my-project.Sales.Orders", "bigquery://my-project.Sales.Orders", "bigquery://Sales.Orders"},
		{"bigquery", "Sales.Orders", "bigquery://Sales.Orders", ""},
	}
	for _, c := range cases {
		id, weak, err := TableID(c.platform, c.name)
		if err != nil || id != c.id || weak != c.weak {
			t.Errorf("TableID(%s, %s) = %q, %q, %v; want %q, %q", c.platform, c.name, id, weak, err, c.id, c.weak)
		}
	}
	for _, bad := range []string{"", "a..b", "a.", `"open`, "`open", "a.b.c.d.e"} {
		if _, _, err := TableID("snowflake", bad); err == nil {
			t.Errorf("TableID(%q) accepted", bad)
		}
	}
	for in, want := range map[string]string{
		"Kafka://prod/Api-Usage":             "kafka://prod/Api-Usage",
		"SNOWFLAKE://Usage.Usage_Hourly":     "snowflake://usage.usage_hourly",
		"dbt://model.billing.fct":            "dbt://model.billing.fct",
		"postgresql://db.public.T":           "postgres://db.public.t",
		"sigma://workbook/revenue-today":     "sigma://workbook/revenue-today",
		"bigquery://PROJ.ds.t":               "bigquery://proj.ds.t",
		" airflow://dag/sync_metered_usage ": "airflow://dag/sync_metered_usage",
	} {
		if got, err := CanonicalID(in); err != nil || got != want {
			t.Errorf("CanonicalID(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"usage_hourly", "://x", "kafka://", "Ka fka://x"} {
		if _, err := CanonicalID(bad); err == nil {
			t.Errorf("CanonicalID(%q) accepted", bad)
		}
	}
}
