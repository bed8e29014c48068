package lineage

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func namesOf(ws ...config.Warehouse) *Names { return NamesFromConfig(&config.Config{Warehouses: ws}) }

var (
	duckWH    = config.Warehouse{Name: "wh", Kind: "duckdb", Path: "/data/warehouse.duckdb"}
	duckDev   = config.Warehouse{Name: "dev", Kind: "duckdb", Path: "/data/dev.duckdb"}
	snowProd  = config.Warehouse{Name: "prod", Kind: "snowflake", Database: "analytics", Schema: "PUBLIC"}
	bqProject = config.Warehouse{Name: "bq", Kind: "bigquery", Project: "my-proj", Dataset: "Sales"}
)

// Every spelling of one table is one id; spellings of other tables are not.
func TestCanonicalSpellings(t *testing.T) {
	cases := []struct {
		names *Names
		want  string
		refs  []string
	}{
		{namesOf(duckWH), "duckdb://warehouse.sales.orders", []string{
			"duckdb://warehouse.sales.orders", "duckdb://sales.orders", "sales.orders", "warehouse.sales.orders",
			`"Sales"."Orders"`, `duckdb://"warehouse"."sales"."orders"`, "DUCKDB://Warehouse.Sales.ORDERS", " duckdb://sales.orders ",
		}},
		{namesOf(duckWH), "duckdb://warehouse.main.orders", []string{"orders", "duckdb://orders", "main.orders", "duckdb://warehouse.main.orders"}},
		{namesOf(duckWH), "duckdb://other.sales.orders", []string{"duckdb://other.sales.orders", "other.sales.orders"}},
		// Snowflake: unquoted names are upper-case, the configured database too.
		{namesOf(snowProd), "snowflake://analytics.usage.usage_hourly", []string{
			"snowflake://usage.usage_hourly", "USAGE.USAGE_HOURLY", `"ANALYTICS"."USAGE"."USAGE_HOURLY"`, "snowflake://Analytics.Usage.Usage_Hourly",
		}},
		// ...and a quoted lower-case name is another table.
		{namesOf(snowProd), `snowflake://analytics."usage"."usage_hourly"`, []string{`"usage"."usage_hourly"`, `snowflake://ANALYTICS."usage"."usage_hourly"`}},
		{namesOf(snowProd), "snowflake://analytics.public.orders", []string{"orders", "snowflake://ORDERS"}},
		// BigQuery: the project folds to lower case; dataset and table keep theirs.
		{namesOf(bqProject), "bigquery://my-proj.Sales.Orders", []string{
			"bigquery://Sales.Orders", "bigquery://MY-PROJ.Sales.Orders", "`my-proj.Sales.Orders`", "Sales.Orders", "Orders",
		}},
		{namesOf(bqProject), "bigquery://my-proj.sales.orders", []string{"bigquery://sales.orders", "sales.orders"}},
		// Ids that name no table keep their case; only the platform folds.
		{namesOf(duckWH), "kafka://prod/Api-Usage", []string{"Kafka://prod/Api-Usage"}},
		{namesOf(duckWH), "dagster://shop/reorder_job", []string{"dagster://shop/reorder_job"}},
		// A platform with no configured warehouse: nothing to fill in.
		{namesOf(duckWH), "snowflake://usage.usage_hourly", []string{"snowflake://USAGE.USAGE_HOURLY"}},
		{nil, "duckdb://sales.orders", []string{"duckdb://Sales.Orders"}},
	}
	for _, c := range cases {
		for _, ref := range c.refs {
			if got, err := c.names.Canonical(ref); err != nil || got != c.want {
				t.Errorf("Canonical(%q) = %q, %v; want %q", ref, got, err, c.want)
			}
		}
	}
	// The canonical id is a fixed point: canonicalizing it changes nothing.
	for _, c := range cases {
		if got, err := c.names.Canonical(c.want); err != nil || got != c.want {
			t.Errorf("Canonical(%q) = %q, %v; the canonical id must map to itself", c.want, got, err)
		}
	}
	for _, bad := range []string{"", "a..b", `"open`, "a.b.c.d", "duckdb://", "sales orders.x.y.z.w", "api-usage", "prod/api-usage", "sales.*"} {
		if got, err := namesOf(duckWH).Canonical(bad); err == nil {
			t.Errorf("Canonical(%q) = %q; want an error", bad, got)
		}
	}
	if _, err := (*Names)(nil).Canonical("sales.orders"); err == nil || !strings.Contains(err.Error(), "no warehouse is configured") {
		t.Errorf("bare name without warehouses: %v", err)
	}
	// A bare name two platforms could hold is ambiguous, with both listed.
	_, err := namesOf(duckWH, snowProd).Canonical("sales.orders")
	var amb *AmbiguousError
	if !errors.As(err, &amb) || !slices.Equal(amb.Candidates, []string{"duckdb://warehouse.sales.orders", "snowflake://analytics.sales.orders"}) {
		t.Errorf("ambiguous bare name: %v", err)
	}
	// With its platform it is not: the platform's first warehouse holds it.
	if got, err := namesOf(duckWH, duckDev).Canonical("duckdb://sales.orders"); err != nil || got != "duckdb://warehouse.sales.orders" {
		t.Errorf("platform given, two warehouses: %q %v", got, err)
	}
	if got, _ := namesOf(duckWH, duckDev).Candidates("duckdb://sales.orders"); !slices.Equal(got, []string{"duckdb://warehouse.sales.orders", "duckdb://dev.sales.orders"}) {
		t.Errorf("candidates %v", got)
	}
}

func TestDomainGlobsMatchEverySpelling(t *testing.T) {
	type tc struct {
		names *Names
		glob  string
		ids   []string
		match bool
	}
	orders := []string{"duckdb://warehouse.sales.orders", "duckdb://sales.orders", "sales.orders", `"Sales"."Orders"`, "DUCKDB://WAREHOUSE.SALES.ORDERS"}
	duck := namesOf(duckWH)
	cases := []tc{
		{duck, "duckdb://sales.*", orders, true},
		{duck, "sales.*", orders, true},
		{duck, "duckdb://warehouse.sales.*", orders, true},
		{duck, "duckdb://warehouse.sales.orders", orders, true},
		{duck, "Sales.Orders", orders, true},
		{duck, `"sales".*`, orders, true},
		{duck, "*.orders", orders, true},
		{duck, "duckdb://*", orders, true},
		{duck, "duckdb://**", orders, true},
		{duck, "*://sales.*", orders, true},
		{duck, "duckdb://other.sales.*", orders, false},
		{duck, "duckdb://sales_eu.*", orders, false},
		{duck, "duckdb://warehouse.crm.*", orders, false},
		{duck, "snowflake://sales.*", orders, false},
		{duck, "sales.orders_v2", orders, false},
		{duck, "kafka://**", orders, false},
		{duck, "duckdb://sales.*", []string{"duckdb://other.sales.orders"}, false},
		{namesOf(snowProd), "snowflake://usage.*", []string{"snowflake://ANALYTICS.USAGE.USAGE_HOURLY", "snowflake://usage.usage_hourly", `"USAGE"."USAGE_HOURLY"`}, true},
		{namesOf(snowProd), `snowflake://"usage".*`, []string{"snowflake://ANALYTICS.USAGE.USAGE_HOURLY"}, false},
		{namesOf(snowProd), `snowflake://"usage".*`, []string{`snowflake://analytics."usage".t`}, true},
		{namesOf(bqProject), "bigquery://Sales.*", []string{"bigquery://MY-PROJ.Sales.Orders", "bigquery://Sales.Orders", "Orders"}, true},
		{namesOf(bqProject), "bigquery://sales.*", []string{"bigquery://my-proj.Sales.Orders"}, false},
		{namesOf(bqProject), "bigquery://MY-PROJ.Sales.*", []string{"bigquery://Sales.Orders"}, true},
		// Nothing configured for the platform: a glob without a database
		// matches any database.
		{duck, "snowflake://usage.*", []string{"snowflake://analytics.usage.t", "snowflake://usage.t"}, true},
		{duck, "sigma://**", []string{"sigma://workbook/revenue"}, true},
		{duck, "airflow://dag/*", []string{"airflow://dag/sync"}, true},
		{duck, "airflow://dag/*", []string{"airflow://dag/a/b", "dagster://dag/sync"}, false},
		{duck, "", []string{"duckdb://sales.orders"}, false},
		// A bare glob means a table in a configured warehouse.
		{duck, "sales.*", []string{"snowflake://sales.orders", "bigquery://p.sales.orders"}, false},
		{duck, "duckdb://[", []string{"duckdb://sales.orders"}, false},
	}
	for _, c := range cases {
		for _, id := range c.ids {
			if got := c.names.MatchGlob(c.glob, id); got != c.match {
				t.Errorf("MatchGlob(%q, %q) = %v; want %v", c.glob, id, got, c.match)
			}
		}
	}
}

// With the graph, a spelling answers with the asset the graph knows; two
// known tables a spelling fits are an error naming both.
func TestCanonicalAssetUsesTheGraph(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		names := namesOf(duckWH, duckDev)
		if err := ImportDBTForTest(ctx, g, strings.NewReader(exposureManifest(t))); err != nil {
			t.Fatal(err)
		}
		// The model's table, under every spelling, is the model.
		for _, ref := range []string{"duckdb://warehouse.sales.orders", "duckdb://sales.orders", "sales.orders", `"Sales"."Orders"`, "dbt://model.shop.orders", "model.shop.orders"} {
			id, all, err := g.Spellings(ctx, names, ref)
			if err != nil || id != "dbt://model.shop.orders" || !slices.Contains(all, "duckdb://warehouse.sales.orders") {
				t.Errorf("Spellings(%q) = %q %v %v", ref, id, all, err)
			}
		}
		// Unknown tables get their full id.
		if id, err := g.CanonicalAsset(ctx, names, "crm.accounts"); err == nil {
			t.Errorf("bare unknown name in two warehouses: %q", id)
		}
		if id, err := g.CanonicalAsset(ctx, names, "duckdb://crm.accounts"); err != nil || id != "duckdb://warehouse.crm.accounts" {
			t.Errorf("unknown table: %q %v", id, err)
		}
		// The dev copy of the table: now sales.orders fits two.
		if _, err := g.RecordLineage(ctx, Note{Path: []string{"duckdb://dev.sales.orders", "dagster://shop/dev_job"}}); err != nil {
			t.Fatal(err)
		}
		for _, ref := range []string{"sales.orders", "duckdb://sales.orders"} {
			_, err := g.CanonicalAsset(ctx, names, ref)
			var amb *AmbiguousError
			if !errors.As(err, &amb) || !slices.Equal(amb.Candidates, []string{"dbt://model.shop.orders", "duckdb://dev.sales.orders"}) {
				t.Errorf("CanonicalAsset(%q): %v", ref, err)
			}
		}
		if id, err := g.CanonicalAsset(ctx, names, "DUCKDB://Dev.Sales.Orders"); err != nil || id != "duckdb://dev.sales.orders" {
			t.Errorf("dev table: %q %v", id, err)
		}
		// A bare asset name still finds its asset.
		if id, err := g.CanonicalAsset(ctx, names, "dev_job"); err != nil || id != "dagster://shop/dev_job" {
			t.Errorf("bare job name: %q %v", id, err)
		}
		if _, err := g.CanonicalAsset(ctx, names, "no_such_thing_anywhere"); err == nil {
			t.Error("unknown bare name accepted")
		}
	})
}

// A full name the graph never saw finds the table a note named without its
// database, unless that table already has another database's full name.
func TestResolveFullNameOfAPartialNote(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		if _, err := g.RecordLineage(ctx, Note{Path: []string{"duckdb://crm.accounts", "hightouch://sync/accounts"}}); err != nil {
			t.Fatal(err)
		}
		if id, err := g.Resolve(ctx, "duckdb://warehouse.crm.accounts"); err != nil || id != "duckdb://crm.accounts" {
			t.Errorf("full name of the noted table: %q %v", id, err)
		}
		if _, err := g.RecordLineage(ctx, Note{Path: []string{"duckdb://dev.crm.accounts", "hightouch://sync/accounts"}}); err != nil {
			t.Fatal(err)
		}
		// Ingestion linked dev's full name to the noted table; now the
		// partial name is dev's, and warehouse's full name is unknown.
		if id, err := g.Resolve(ctx, "duckdb://dev.crm.accounts"); err != nil || id != "duckdb://crm.accounts" {
			t.Errorf("dev's full name: %q %v", id, err)
		}
		if id, err := g.Resolve(ctx, "duckdb://warehouse.crm.accounts"); !errors.Is(err, ErrUnknownAsset) {
			t.Errorf("another database's table resolved to %q (%v)", id, err)
		}
	})
}

// Whatever a person types, a canonical id maps to itself and its own glob
// matches it.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{"sales.orders", `"Sales"."Orders"`, "duckdb://warehouse.sales.orders", "orders", "`my-proj.Sales.Orders`",
		`snowflake://analytics."usage".t`, "kafka://prod/Api-Usage", "bigquery://P.d.t", `"a""b".c`, "a.b.c", "x://y"} {
		f.Add(s)
	}
	names := namesOf(duckWH, snowProd, bqProject)
	f.Fuzz(func(t *testing.T, ref string) {
		for _, n := range []*Names{names, namesOf(duckWH), nil} {
			id, err := n.Canonical(ref)
			if err != nil {
				continue
			}
			again, err := n.Canonical(id)
			if err != nil || again != id {
				t.Fatalf("Canonical(%q) = %q, but Canonical(%q) = %q, %v", ref, id, id, again, err)
			}
			if !n.MatchGlob(id, ref) || !n.MatchGlob(id, id) {
				t.Fatalf("glob %q does not match %q", id, ref)
			}
		}
	})
}
