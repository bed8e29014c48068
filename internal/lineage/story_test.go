package lineage

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// billingManifest is a dbt v12 manifest on Snowflake: the source over the
// Tableflow table and the model the finance dashboards read.
func billingManifest(t *testing.T) []byte {
	t.Helper()
	m := map[string]any{
		"metadata": map[string]any{
			"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json",
			"dbt_version":        "1.8.5", "adapter_type": "snowflake", "project_name": "billing",
		},
		"nodes": map[string]any{
			"model.billing.fct_billable_egress": map[string]any{
				"unique_id": "model.billing.fct_billable_egress", "resource_type": "model", "name": "fct_billable_egress",
				"database": "ANALYTICS", "schema": "BILLING", "alias": "FCT_BILLABLE_EGRESS",
				"relation_name": "ANALYTICS.BILLING.FCT_BILLABLE_EGRESS",
				"config":        map[string]any{"materialized": "table", "meta": map[string]any{"owner": "billing-data", "domain": "billing"}},
				"columns": map[string]any{
					"account_id":   map[string]any{"name": "account_id"},
					"egress_bytes": map[string]any{"name": "egress_bytes", "description": "bytes served, missing counted as 0"},
				},
				"depends_on": map[string]any{"nodes": []string{"source.billing.usage.usage_hourly"}},
			},
		},
		"sources": map[string]any{
			"source.billing.usage.usage_hourly": map[string]any{
				"unique_id": "source.billing.usage.usage_hourly", "resource_type": "source", "name": "usage_hourly",
				"database": "ANALYTICS", "schema": "USAGE", "identifier": "USAGE_HOURLY",
				"relation_name": "ANALYTICS.USAGE.USAGE_HOURLY",
			},
		},
		"exposures":  map[string]any{},
		"parent_map": map[string]any{"model.billing.fct_billable_egress": []string{"source.billing.usage.usage_hourly"}, "source.billing.usage.usage_hourly": []string{}},
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const rollupSQL = "INSERT INTO `usage-hourly`\n" +
	"SELECT account_id, window_start, SUM(response_bytes) AS egress_bytes\n" +
	"FROM TABLE(TUMBLE(TABLE `api-usage`, DESCRIPTOR(event_time), INTERVAL '1' HOUR))\n" +
	"GROUP BY account_id, window_start, window_end"

// buildBillingStory records story A's context graph the way a team would:
// notes for the streaming hops and the consumers, dbt for the models.
func buildBillingStory(t *testing.T, g *Graph) {
	t.Helper()
	ctx := context.Background()
	_, err := g.RecordLineage(ctx, Note{
		Path: []string{"kafka://prod/api-usage", "schema://api-usage-value", "flink://usage-hourly-rollup",
			"kafka://prod/usage-hourly", "snowflake://usage.usage_hourly"},
		Assets: []NoteAsset{
			{ID: "schema://api-usage-value", Owner: "gateway-team", Columns: []Column{
				{Name: "usage_id", Type: "string"}, {Name: "account_id", Type: "string"}, {Name: "endpoint", Type: "string"},
				{Name: "response_bytes", Type: `["null","long"]`}, {Name: "event_time", Type: "timestamp-millis"}}},
			{ID: "flink://usage-hourly-rollup", Owner: "streaming-platform", Domain: "usage", SQL: rollupSQL, ReadsFields: []string{"response_bytes"}},
			{ID: "snowflake://usage.usage_hourly", Description: "usage-hourly landed by Tableflow"},
		},
	})
	if err != nil {
		t.Fatalf("streaming note: %v", err)
	}
	// Another statement on the same subject that never touches response_bytes.
	if _, err := g.RecordLineage(ctx, Note{
		Path:   []string{"schema://api-usage-value", "flink://requests-by-endpoint", "kafka://prod/requests-by-endpoint"},
		Assets: []NoteAsset{{ID: "flink://requests-by-endpoint", SQL: "SELECT endpoint, COUNT(*) AS requests FROM `api-usage` GROUP BY endpoint"}},
	}); err != nil {
		t.Fatalf("second statement: %v", err)
	}
	if err := ImportDBTForTest(ctx, g, strings.NewReader(string(billingManifest(t)))); err != nil {
		t.Fatalf("dbt: %v", err)
	}
	if _, err := g.RecordLineage(ctx, Note{
		Edges: []NoteEdge{
			{From: "fct_billable_egress", To: "sigma://workbook/revenue-today"},
			{From: "fct_billable_egress", To: "airflow://dag/sync_metered_usage_to_stripe"},
		},
		Assets: []NoteAsset{
			{ID: "sigma://workbook/revenue-today", Title: "Revenue today", Tags: []string{"money"}, Owner: "finance"},
			{ID: "airflow://dag/sync_metered_usage_to_stripe", Tags: []string{"outbound", "money"}, Owner: "billing-data",
				OwnerEmail: "billing-data@example.com", Schedule: &Schedule{Cron: "0 23 * * *"}},
		},
	}); err != nil {
		t.Fatalf("consumer note: %v", err)
	}
}

func TestBillingStoryBlastRadius(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		buildBillingStory(t, g)

		// The Tableflow table named by the note and dbt's source are one asset.
		id, err := g.Resolve(ctx, "snowflake://ANALYTICS.USAGE.USAGE_HOURLY")
		if err != nil || id != "snowflake://usage.usage_hourly" {
			t.Fatalf("Resolve(dbt relation) = %s, %v", id, err)
		}
		if id, err := g.Resolve(ctx, "usage_hourly"); err != nil || id != "snowflake://usage.usage_hourly" {
			t.Errorf("bare name usage_hourly = %s, %v", id, err)
		}

		res, err := g.BlastRadius(ctx, BlastParams{Asset: "schema://api-usage-value", Columns: []string{"response_bytes"}})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, a := range res.Assets {
			ids = append(ids, a.ID)
		}
		for _, want := range []string{"flink://usage-hourly-rollup", "kafka://prod/usage-hourly", "snowflake://usage.usage_hourly",
			"dbt://model.billing.fct_billable_egress", "sigma://workbook/revenue-today", "airflow://dag/sync_metered_usage_to_stripe"} {
			if !slices.Contains(ids, want) {
				t.Errorf("blast radius misses %s; got %v", want, ids)
			}
		}
		for _, not := range []string{"flink://requests-by-endpoint", "kafka://prod/requests-by-endpoint", "kafka://prod/api-usage"} {
			if slices.Contains(ids, not) {
				t.Errorf("blast radius of response_bytes includes %s, which does not read it", not)
			}
		}
		if res.Total != 6 || res.Partial {
			t.Errorf("total %d partial %v, want 6 complete", res.Total, res.Partial)
		}
		// Outbound and money first, the DAG with its 23:00 run ahead of the workbook.
		dag := res.Assets[0]
		if dag.ID != "airflow://dag/sync_metered_usage_to_stripe" || !slices.Equal(dag.Critical, []string{"money", "outbound"}) {
			t.Errorf("first = %+v", dag)
		}
		if want := time.Date(2026, 3, 10, 23, 0, 0, 0, time.UTC); !dag.NextRun.Equal(want) {
			t.Errorf("DAG next run %v, want %v", dag.NextRun, want)
		}
		if res.Assets[1].ID != "sigma://workbook/revenue-today" {
			t.Errorf("second = %s, want the money workbook", res.Assets[1].ID)
		}
		if want := []string{"schema://api-usage-value", "flink://usage-hourly-rollup", "kafka://prod/usage-hourly",
			"snowflake://usage.usage_hourly", "dbt://model.billing.fct_billable_egress", "airflow://dag/sync_metered_usage_to_stripe"}; !slices.Equal(dag.Path, want) || dag.Distance != 5 {
			t.Errorf("DAG path %v (distance %d)", dag.Path, dag.Distance)
		}
		if dag.Owner != "billing-data" || res.Critical != 2 || res.Scheduled != 1 {
			t.Errorf("owner %q critical %d scheduled %d", dag.Owner, res.Critical, res.Scheduled)
		}
		if res.CountsByKind["dbt_model"] != 1 || res.CountsByKind["stream_job"] != 1 || res.CountsByKind["topic"] != 1 ||
			res.CountsByKind["dashboard"] != 1 || res.CountsByKind["orchestrator_job"] != 1 || res.CountsByKind["table"] != 1 {
			t.Errorf("counts by kind = %v", res.CountsByKind)
		}
		// The statement reads response_bytes; its output edge has no column
		// lineage, so everything past it is included in full and said so.
		if !slices.Contains(res.NoColumnLineage, EdgeRef{From: "flink://usage-hourly-rollup", To: "kafka://prod/usage-hourly"}) {
			t.Errorf("no_column_lineage = %v", res.NoColumnLineage)
		}
		for _, a := range res.Assets {
			if a.ID == "flink://usage-hourly-rollup" && !slices.Equal(a.AffectedColumns, []string{"response_bytes"}) {
				t.Errorf("rollup affected columns = %v", a.AffectedColumns)
			}
		}
		if !strings.Contains(res.Summary, "airflow://dag/sync_metered_usage_to_stripe [money, outbound] next run 2026-03-10 23:00 UTC") {
			t.Errorf("summary: %s", res.Summary)
		}

		// Without columns the endpoint statement is in too.
		all, err := g.BlastRadius(ctx, BlastParams{Asset: "api-usage-value"})
		if err != nil {
			t.Fatal(err)
		}
		if all.Total != 8 {
			t.Errorf("whole-subject blast radius = %d, want 8", all.Total)
		}

		// A column the subject doesn't have is refused with the closest names.
		_, err = g.BlastRadius(ctx, BlastParams{Asset: "schema://api-usage-value", Columns: []string{"response_byte"}})
		if err == nil || !strings.Contains(err.Error(), "response_bytes") {
			t.Errorf("unknown column error = %v", err)
		}

		// The trace crosses every platform of the story.
		tr, err := g.Trace(ctx, TraceParams{Asset: "flink://usage-hourly-rollup"})
		if err != nil {
			t.Fatal(err)
		}
		var longest TracePath
		for _, p := range tr.Downstream {
			if p.Assets[len(p.Assets)-1] == "airflow://dag/sync_metered_usage_to_stripe" {
				longest = p
			}
		}
		if !slices.Equal(longest.Platforms, []string{"flink", "kafka", "snowflake", "airflow"}) {
			t.Errorf("downstream platforms %v (paths %+v)", longest.Platforms, tr.Downstream)
		}
		if len(tr.Upstream) != 1 || !slices.Equal(tr.Upstream[0].Assets, []string{"kafka://prod/api-usage", "schema://api-usage-value", "flink://usage-hourly-rollup"}) {
			t.Errorf("upstream %+v", tr.Upstream)
		}
	})
}

// ImportDBTForTest reads a dbt manifest into g. lineage cannot import its
// ingest formats (ingest imports lineage), so ingesthook_test.go, an
// external test file, sets it to ingest.DBTManifest.
var ImportDBTForTest func(ctx context.Context, g *Graph, r io.Reader) error
