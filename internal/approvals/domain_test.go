package approvals

import (
	"context"
	"slices"
	"testing"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// salesConfig is one DuckDB warehouse at warehouse.duckdb, a sales domain
// owning what glob names, and a catch-all domain for other DuckDB tables
// (or, with catchAll, other platforms' assets).
func salesConfig(t *testing.T, glob string, catchAll ...string) *config.Config {
	t.Helper()
	all := "duckdb://**"
	if len(catchAll) > 0 {
		all = catchAll[0]
	}
	cfg, err := config.Parse("dw.yaml", []byte(`
warehouses:
  - {name: wh, kind: duckdb, path: /data/warehouse.duckdb}
people:
  - {id: ana, name: Ana, os_users: [ana]}
domains:
  - name: sales
    assets: ["`+glob+`"]
    owners: [ana]
  - name: everything-else
    assets: ["`+all+`"]
    owners: [ana]
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func domainName(t *testing.T, ctx context.Context, cfg *config.Config, ids lineage.Identities, asset string) string {
	t.Helper()
	d, ok, err := DomainOf(ctx, cfg, ids, asset)
	if err != nil {
		t.Fatalf("DomainOf(%q): %v", asset, err)
	}
	if !ok {
		return ""
	}
	return d.Name
}

// The case: the catalog prints duckdb://warehouse.sales.orders, a
// check prints duckdb://sales.orders, a person types sales.orders; a domain
// written in any of those spellings owns all of them, and nothing else.
func TestDomainOfAnySpelling(t *testing.T) {
	ctx := context.Background()
	for _, glob := range []string{"duckdb://sales.*", "sales.*", "duckdb://warehouse.sales.*", "DUCKDB://Warehouse.Sales.*"} {
		cfg := salesConfig(t, glob)
		ids := lineage.StoreIdentities(nil, cfg)
		for _, id := range []string{"duckdb://warehouse.sales.orders", "duckdb://sales.orders", "sales.orders", `"Sales"."Orders"`} {
			if d := domainName(t, ctx, cfg, ids, id); d != "sales" {
				t.Errorf("glob %s: %s is in %q", glob, id, d)
			}
		}
		for _, id := range []string{"duckdb://warehouse.crm.accounts", "duckdb://other.sales.orders"} {
			if d := domainName(t, ctx, cfg, ids, id); d != "everything-else" {
				t.Errorf("glob %s: %s is in %q", glob, id, d)
			}
		}
		if d := domainName(t, ctx, cfg, ids, "snowflake://sales.orders"); d != "" {
			t.Errorf("glob %s: a Snowflake table is in %s", glob, d)
		}
	}
}

// A table the graph knows by the dbt model that builds it is owned by a
// glob on its table name and by a glob on its dbt id, under every spelling
// (seeded: quoted, any case, with or without platform and database, the
// dbt id), and a proposal targeting any of them is stored under the table
// and routed to that domain. Another database's table of the same name is
// not in it. The table's own names decide before its dbt id: a domain
// owning every DuckDB table owns it ahead of one globbing its dbt id.
func TestDomainOfDBTBuiltTable(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		t.Setenv("DW_HOME", t.TempDir()) // the receipt key
		g := lineage.New(db, clock.NewFake(t0))
		if _, err := g.RecordLineage(ctx, lineage.Note{Assets: []lineage.NoteAsset{{ID: "dbt://model.shop.orders", Aliases: []string{"duckdb://warehouse.sales.orders"}}},
			Path: []string{"dbt://model.shop.orders", "sigma://workbook/rev"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := g.RecordLineage(ctx, lineage.Note{Path: []string{"duckdb://dev.sales.orders", "dagster://shop/dev_job"}}); err != nil {
			t.Fatal(err)
		}
		spellings := lineagetest.DuckDBSpellings(14, 40, "warehouse", "sales", "orders", "model.shop.orders")
		for _, c := range []struct{ glob, catchAll, dev string }{
			{"duckdb://sales.*", "duckdb://**", "everything-else"},
			{"sales.*", "duckdb://**", "everything-else"},
			{"duckdb://warehouse.sales.orders", "duckdb://**", "everything-else"},
			{"dbt://*.shop.*", "dagster://**", ""},
		} {
			cfg := salesConfig(t, c.glob, c.catchAll)
			s := New(db, cfg, clock.NewFake(t0), nil)
			for _, ref := range spellings {
				if d := domainName(t, ctx, cfg, s.ids, ref); d != "sales" {
					t.Errorf("glob %s: %q is in %q, want sales", c.glob, ref, d)
				}
			}
			if d := domainName(t, ctx, cfg, s.ids, "duckdb://dev.sales.orders"); d != c.dev {
				t.Errorf("glob %s: the dev table is in %q, want %q", c.glob, d, c.dev)
			}
			for _, ref := range []string{"dbt://model.shop.orders", `"Sales"."Orders"`} {
				p, err := s.Propose(ctx, NewProposal{Kind: KindHold, What: "Pause the revenue workbook refresh", Why: "orders are short",
					Targets: []string{ref}, Undo: "resume the refresh", Proposer: "dw-incidents"})
				if err != nil {
					t.Fatalf("glob %s: propose on %s: %v", c.glob, ref, err)
				}
				if p.Domain != "sales" || !slices.Equal(p.Targets, []string{"duckdb://warehouse.sales.orders"}) {
					t.Errorf("glob %s: proposal on %s is in %s with targets %v", c.glob, ref, p.Domain, p.Targets)
				}
			}
		}
		cfg := salesConfig(t, "dbt://*.shop.*")
		if d := domainName(t, ctx, cfg, lineage.StoreIdentities(db, cfg), "dbt://model.shop.orders"); d != "everything-else" {
			t.Errorf("with a domain owning every DuckDB table, the model's table is in %q", d)
		}
	})
}

// An asset's own names decide its domain before its ids in other tools: a
// Hightouch sync a dbt exposure also declares is owned by the domain of
// hightouch://sync/* even when a domain globbing the dbt ids comes first,
// and by that one only when no domain owns the sync's own id.
func TestDomainOfPrefersTheAssetsOwnNames(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g := lineage.New(db, clock.NewFake(t0))
		if _, err := g.RecordLineage(ctx, lineage.Note{Assets: []lineage.NoteAsset{{ID: "hightouch://sync/braze-tiers", Aliases: []string{"dbt://exposure.loyalty.braze_tiers"}}}}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			domains []config.Domain
			want    string
		}{
			{[]config.Domain{{Name: "loyalty", Assets: []string{"dbt://*.loyalty.*"}}, {Name: "crm", Assets: []string{"hightouch://sync/*"}}}, "crm"},
			{[]config.Domain{{Name: "loyalty", Assets: []string{"dbt://*.loyalty.*"}}, {Name: "crm", Assets: []string{"hightouch://sync/other"}}}, "loyalty"},
		} {
			cfg := &config.Config{Domains: c.domains}
			for _, ref := range []string{"hightouch://sync/braze-tiers", "dbt://exposure.loyalty.braze_tiers"} {
				if d := domainName(t, ctx, cfg, lineage.StoreIdentities(db, cfg), ref); d != c.want {
					t.Errorf("%v: %s is in %q, want %q", c.domains, ref, d, c.want)
				}
			}
		}
	})
}
