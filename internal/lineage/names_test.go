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

// With the graph, every spelling of a dbt-built table is one identity: the
// record id is the warehouse table (the model is an alias of it), its names
// include the dbt id, and two known tables a spelling fits are an error
// naming both.
func TestIdentityUsesTheGraph(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		ids := Identities{Graph: g, Names: namesOf(duckWH, duckDev)}
		if err := ImportDBTForTest(ctx, g, strings.NewReader(exposureManifest(t))); err != nil {
			t.Fatal(err)
		}
		for _, ref := range []string{"duckdb://warehouse.sales.orders", "duckdb://sales.orders", "sales.orders", `"Sales"."Orders"`,
			`DUCKDB://"Warehouse".Sales.ORDERS`, "warehouse.sales.orders", "dbt://model.shop.orders", "model.shop.orders", "DBT://model.shop.orders"} {
			it, err := ids.Of(ctx, ref)
			if err != nil || it.ID != "duckdb://warehouse.sales.orders" || it.Node != "dbt://model.shop.orders" || it.Table != "duckdb://warehouse.sales.orders" ||
				!slices.Contains(it.Names, "dbt://model.shop.orders") || !slices.Contains(it.Names, "duckdb://sales.orders") {
				t.Errorf("Of(%q) = %+v %v", ref, it, err)
			}
		}
		// Unknown tables get their full id.
		if it, err := ids.Of(ctx, "crm.accounts"); err == nil {
			t.Errorf("bare unknown name in two warehouses: %+v", it)
		}
		if it, err := ids.Of(ctx, "duckdb://crm.accounts"); err != nil || it.ID != "duckdb://warehouse.crm.accounts" || it.Node != "" {
			t.Errorf("unknown table: %+v %v", it, err)
		}
		// The dev copy of the table: now sales.orders fits two.
		if _, err := g.RecordLineage(ctx, Note{Path: []string{"duckdb://dev.sales.orders", "dagster://shop/dev_job"}}); err != nil {
			t.Fatal(err)
		}
		for _, ref := range []string{"sales.orders", "duckdb://sales.orders"} {
			_, err := ids.Of(ctx, ref)
			var amb *AmbiguousError
			if !errors.As(err, &amb) || !slices.Equal(amb.Candidates, []string{"dbt://model.shop.orders", "duckdb://dev.sales.orders"}) {
				t.Errorf("Of(%q): %v", ref, err)
			}
		}
		dev, err := ids.Of(ctx, "DUCKDB://Dev.Sales.Orders")
		if err != nil || dev.ID != "duckdb://dev.sales.orders" {
			t.Errorf("dev table: %+v %v", dev, err)
		}
		prod, _ := ids.Of(ctx, "dbt://model.shop.orders")
		if dev.Same(prod) || slices.Contains(dev.Names, "duckdb://warehouse.sales.orders") {
			t.Errorf("dev %+v and prod %+v are one table", dev, prod)
		}
		// A bare asset name still finds its asset; a job keeps its id.
		if it, err := ids.Of(ctx, "dev_job"); err != nil || it.ID != "dagster://shop/dev_job" || it.Table != "" {
			t.Errorf("bare job name: %+v %v", it, err)
		}
		if _, err := ids.Of(ctx, "no_such_thing_anywhere"); err == nil {
			t.Error("unknown bare name accepted")
		}
		// A dashboard known by its tool's id and a dbt exposure alias is
		// no table: its id stays the tool's.
		if _, err := g.RecordLineage(ctx, Note{Assets: []NoteAsset{{ID: "looker://dashboards/42", Aliases: []string{"dbt://exposure.shop.revenue"}}}}); err != nil {
			t.Fatal(err)
		}
		if it, err := ids.Of(ctx, "dbt://exposure.shop.revenue"); err != nil || it.ID != "looker://dashboards/42" || it.Table != "" {
			t.Errorf("exposure: %+v %v", it, err)
		}
	})
}

// The database is part of a table's identity, also where the graph noted
// the table without one: a full name placing it in another database than
// the configured warehouse's is another table; without a configured
// warehouse of its platform the database cannot be told and the note's
// table is meant.
func TestIdentityRespectsTheDatabase(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		if _, err := g.RecordLineage(ctx, Note{Path: []string{"duckdb://crm.accounts", "hightouch://sync/accounts"}}); err != nil {
			t.Fatal(err)
		}
		ids := Identities{Graph: g, Names: namesOf(duckWH)}
		home, err := ids.Of(ctx, "duckdb://warehouse.crm.accounts")
		if err != nil || home.ID != "duckdb://crm.accounts" || home.Table != "duckdb://warehouse.crm.accounts" {
			t.Fatalf("home database: %+v %v", home, err)
		}
		for _, ref := range []string{"crm.accounts", "duckdb://crm.accounts", `"CRM"."Accounts"`} {
			if it, err := ids.Of(ctx, ref); err != nil || !it.Same(home) || it.ID != home.ID {
				t.Errorf("Of(%q) = %+v %v, want %s", ref, it, err, home.ID)
			}
		}
		dev, err := ids.Of(ctx, "duckdb://dev.crm.accounts")
		if err != nil || dev.ID != "duckdb://dev.crm.accounts" || dev.Node != "" || dev.Same(home) {
			t.Errorf("another database: %+v %v", dev, err)
		}
		noHome := Identities{Graph: g}
		if it, err := noHome.Of(ctx, "duckdb://dev.crm.accounts"); err != nil || it.ID != "duckdb://crm.accounts" {
			t.Errorf("no configured warehouse: %+v %v", it, err)
		}
		a, _ := ids.Of(ctx, "duckdb://prod.s.t")
		b, _ := ids.Of(ctx, "duckdb://dev.s.t")
		if a.Same(b) {
			t.Errorf("%s and %s are one table", a.ID, b.ID)
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
