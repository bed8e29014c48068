package ingest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/lineage"

	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func loyaltyManifest(t *testing.T) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v11.json", "adapter_type": "snowflake", "project_name": "loyalty"},
		"nodes": map[string]any{"model.loyalty.fct_member_tier": map[string]any{
			"unique_id": "model.loyalty.fct_member_tier", "resource_type": "model", "name": "fct_member_tier",
			"database": "ANALYTICS", "schema": "LOYALTY", "alias": "FCT_MEMBER_TIER", "relation_name": "ANALYTICS.LOYALTY.FCT_MEMBER_TIER",
			"depends_on": map[string]any{"nodes": []string{"source.loyalty.loyalty.member_balances"}},
		}},
		"sources": map[string]any{"source.loyalty.loyalty.member_balances": map[string]any{
			"unique_id": "source.loyalty.loyalty.member_balances", "resource_type": "source", "name": "member_balances",
			"database": "ANALYTICS", "schema": "LOYALTY", "identifier": "MEMBER_BALANCES", "relation_name": "ANALYTICS.LOYALTY.MEMBER_BALANCES",
			"meta": map[string]any{"owner": map[string]any{"name": "loyalty-data", "email": "loyalty@example.com"}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const loyaltyEvent = `{"eventType": "COMPLETE", "eventTime": "2026-03-10T14:02:00Z", "producer": "https://example.com/spark",
 "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
 "run": {"runId": "0192963f-f6f8-71c0-8380-500bc70883ee"},
 "job": {"namespace": "spark-prod", "name": "balances_backfill", "facets": {"jobType": {"integration": "SPARK", "processingType": "BATCH", "jobType": "JOB"}}},
 "inputs": [{"namespace": "s3://loyalty-exports", "name": "balances/2026-03-09"}],
 "outputs": [{"namespace": "snowflake://acme-prod", "name": "analytics.loyalty.member_balances",
   "facets": {"schema": {"fields": [{"name": "member_id", "type": "STRING"}, {"name": "balance", "type": "NUMBER"}]}}}]}`

func TestSameTableFromEverySourceIsOneAsset(t *testing.T) {
	steps := map[string]func(t *testing.T, g *lineage.Graph){
		"dbt": func(t *testing.T, g *lineage.Graph) {
			if _, err := DBTManifest(context.Background(), g, strings.NewReader(loyaltyManifest(t)), DBTOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		"openlineage": func(t *testing.T, g *lineage.Graph) {
			if _, err := RunEvents(context.Background(), g, []byte(loyaltyEvent), OpenLineageOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		"connect": func(t *testing.T, g *lineage.Graph) {
			_, err := Connectors(context.Background(), g, []ConnectorSpec{{
				Name: "member-balances-sink", Class: "com.snowflake.kafka.connector.SnowflakeSinkConnector",
				Topic: "member-balances", Table: "ANALYTICS.LOYALTY.MEMBER_BALANCES",
			}}, ConnectorOptions{Cluster: "prod"})
			if err != nil {
				t.Fatal(err)
			}
		},
		"note": func(t *testing.T, g *lineage.Graph) {
			if _, err := g.RecordLineage(context.Background(), lineage.Note{Assets: []lineage.NoteAsset{{ID: "snowflake://loyalty.member_balances", Tags: []string{"customer_facing"}}}}); err != nil {
				t.Fatal(err)
			}
		},
	}
	for _, order := range [][]string{{"dbt", "openlineage", "connect", "note"}, {"note", "connect", "openlineage", "dbt"}, {"openlineage", "note", "dbt", "connect"}} {
		t.Run(strings.Join(order, "-"), func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				g, _ := newGraph(t, db)
				for _, s := range order {
					steps[s](t, g)
				}
				var ids []string
				for _, ref := range []string{"snowflake://ANALYTICS.LOYALTY.MEMBER_BALANCES", "snowflake://analytics.loyalty.member_balances",
					`snowflake://"ANALYTICS"."LOYALTY"."MEMBER_BALANCES"`, "snowflake://loyalty.member_balances",
					"dbt://source.loyalty.loyalty.member_balances", "openlineage://snowflake://acme-prod/analytics.loyalty.member_balances", "member_balances"} {
					id, err := g.Resolve(ctx, ref)
					if err != nil {
						t.Fatalf("Resolve(%s): %v", ref, err)
					}
					ids = append(ids, id)
				}
				if len(slices.Compact(slices.Clone(ids))) != 1 {
					t.Fatalf("one table resolved to several assets: %v", ids)
				}
				l := mustLineage(t, g, ids[0])
				a := l.Asset
				if a.Kind != lineage.KindTable || a.Owner != "loyalty-data" || !slices.Contains(a.Tags, lineage.TagCustomerFacing) || len(a.Columns) != 2 {
					t.Errorf("merged asset %+v", a)
				}
				if !slices.Equal(a.Sources, []lineage.Source{lineage.SourceConnect, lineage.SourceDBT, lineage.SourceNote, lineage.SourceOpenLineage}) {
					t.Errorf("sources %v", a.Sources)
				}
				up := neighborIDs(l.Upstream)
				if !slices.Equal(up, []string{"connect://member-balances-sink", "spark://balances_backfill"}) {
					t.Errorf("upstream %v", up)
				}
				if down := neighborIDs(l.Downstream); !slices.Equal(down, []string{"dbt://model.loyalty.fct_member_tier"}) {
					t.Errorf("downstream %v", down)
				}
				var n int
				if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM lineage_assets WHERE name_key = 'member_balances'").Scan(&n); err != nil || n != 1 {
					t.Errorf("member_balances assets: %d %v", n, err)
				}
			})
		})
	}
}

// Two assets the graph held apart (a note's dbt model and an OpenLineage
// table) are merged when a run event names both, keeping every edge.
func TestMergeKeepsEdges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		if _, err := g.RecordLineage(ctx, lineage.Note{
			Path:   []string{"dbt://model.jaffle_shop.stg_customers", "hightouch://sync/customers-to-braze"},
			Assets: []lineage.NoteAsset{{ID: "dbt://model.jaffle_shop.stg_customers", Owner: "jaffle-team"}},
		}); err != nil {
			t.Fatal(err)
		}
		// The customers model's run lists stg_customers as an input table.
		var events []json.RawMessage
		if err := json.Unmarshal(fixture(t, "openlineage/openlineage__dbt__postgres__successful_run_ol_events.json"), &events); err != nil {
			t.Fatal(err)
		}
		var customers, rest []json.RawMessage
		for _, e := range events {
			if strings.Contains(string(e), `"name": "model.jaffle_shop.customers"`) {
				customers = append(customers, e)
			} else {
				rest = append(rest, e)
			}
		}
		b, _ := json.Marshal(customers)
		if _, err := RunEvents(ctx, g, b, OpenLineageOptions{}); err != nil {
			t.Fatal(err)
		}
		if id, _ := g.Resolve(ctx, "postgres://postgres.public.stg_customers"); id != "postgres://postgres.public.stg_customers" {
			t.Fatalf("before the merge the table is its own asset, got %s", id)
		}
		before := lineagetest.Count(t, db, "lineage_assets")
		b, _ = json.Marshal(rest)
		res, err := RunEvents(ctx, g, b, OpenLineageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.AssetsMerged != 1 {
			t.Errorf("merged %d", res.AssetsMerged)
		}
		id, err := g.Resolve(ctx, "postgres://postgres.public.stg_customers")
		if err != nil || id != "dbt://model.jaffle_shop.stg_customers" {
			t.Fatalf("after the merge: %s %v", id, err)
		}
		l := mustLineage(t, g, id)
		if l.Asset.Owner != "jaffle-team" || l.Asset.Kind != lineage.KindDBTModel {
			t.Errorf("merged asset %+v", l.Asset)
		}
		if !slices.Equal(neighborIDs(l.Downstream), []string{"dbt://model.jaffle_shop.customers", "hightouch://sync/customers-to-braze"}) {
			t.Errorf("downstream after merge %v", neighborIDs(l.Downstream))
		}
		if !slices.Equal(neighborIDs(l.Upstream), []string{"postgres://postgres.public.raw_customers"}) {
			t.Errorf("upstream after merge %v", neighborIDs(l.Upstream))
		}
		// Before: the note's model and sync, customers' three input tables
		// and the customers model (6). The rest adds three raw tables and
		// the orders model, and folds the stg_customers table into the
		// note's model (the other stg_ tables become their models in place).
		if got := lineagetest.Count(t, db, "lineage_assets"); before != 6 || got != 9 {
			t.Errorf("assets %d -> %d, want 6 -> 9", before, got)
		}
		var orphans int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM lineage_edges e WHERE NOT EXISTS (SELECT 1 FROM lineage_assets a WHERE a.seq = e.from_seq)
			OR NOT EXISTS (SELECT 1 FROM lineage_assets a WHERE a.seq = e.to_seq)`).Scan(&orphans); err != nil || orphans != 0 {
			t.Errorf("edges pointing at merged-away assets: %d %v", orphans, err)
		}
		var dangling int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM lineage_aliases l WHERE l.asset_seq <> 0 AND NOT EXISTS (SELECT 1 FROM lineage_assets a WHERE a.seq = l.asset_seq)`).Scan(&dangling); err != nil || dangling != 0 {
			t.Errorf("aliases pointing at merged-away assets: %d %v", dangling, err)
		}
	})
}

// Two databases with the same schema.table stay two assets, and the partial
// name is reported as ambiguous rather than guessed.
func TestPartialNameSharedByTwoDatabases(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		if _, err := g.RecordLineage(ctx, lineage.Note{Path: []string{"snowflake://usage.usage_hourly", "dbt://model.billing.fct_billable_egress"}}); err != nil {
			t.Fatal(err)
		}
		for _, ev := range []string{"ANALYTICS", "DEV_ANALYTICS"} {
			doc := strings.ReplaceAll(loyaltyEvent, "analytics.loyalty.member_balances", ev+".USAGE.USAGE_HOURLY")
			if _, err := RunEvents(ctx, g, []byte(doc), OpenLineageOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		prod, err := g.Resolve(ctx, "snowflake://analytics.usage.usage_hourly")
		if err != nil {
			t.Fatal(err)
		}
		dev, err := g.Resolve(ctx, "snowflake://dev_analytics.usage.usage_hourly")
		if err != nil {
			t.Fatal(err)
		}
		// The first full name claimed the note's partial name; the second
		// database's table is its own asset.
		if prod != "snowflake://usage.usage_hourly" || dev != "snowflake://dev_analytics.usage.usage_hourly" {
			t.Errorf("prod %s dev %s", prod, dev)
		}
	})
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		for _, ev := range []string{"ANALYTICS", "DEV_ANALYTICS"} {
			doc := strings.ReplaceAll(loyaltyEvent, "analytics.loyalty.member_balances", ev+".USAGE.USAGE_HOURLY")
			if _, err := RunEvents(ctx, g, []byte(doc), OpenLineageOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := g.Resolve(ctx, "snowflake://usage.usage_hourly")
		if err == nil || !strings.Contains(err.Error(), "several databases") ||
			!strings.Contains(err.Error(), "snowflake://analytics.usage.usage_hourly") || !strings.Contains(err.Error(), "snowflake://dev_analytics.usage.usage_hourly") {
			t.Errorf("ambiguous partial name: %v", err)
		}
	})
}
