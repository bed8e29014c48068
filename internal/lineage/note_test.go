package lineage

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestRecordLineageReadsFieldsFromSQL(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		// The input's columns are known, so the SQL is matched against them.
		res, err := g.RecordLineage(ctx, Note{
			Path: []string{"schema://api-usage-value", "flink://usage-hourly-rollup", "kafka://prod/usage-hourly"},
			Assets: []NoteAsset{
				{ID: "schema://api-usage-value", Columns: []Column{{Name: "usage_id"}, {Name: "account_id"}, {Name: "endpoint"}, {Name: "response_bytes"}, {Name: "event_time"}}},
				{ID: "flink://usage-hourly-rollup", SQL: rollupSQL},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		got := res.ReadsFields["schema://api-usage-value -> flink://usage-hourly-rollup"]
		if !slices.Equal(got, []string{"account_id", "event_time", "response_bytes"}) {
			t.Errorf("fields read = %v", got)
		}
		job := mustLineage(t, g, "usage-hourly-rollup")
		if job.Asset.SQL != rollupSQL || job.Asset.Kind != KindStreamJob {
			t.Errorf("job %+v", job.Asset)
		}
		// Recording the job again with explicit fields replaces what the SQL gave.
		if _, err := g.RecordLineage(ctx, Note{Assets: []NoteAsset{{ID: "flink://usage-hourly-rollup", ReadsFields: []string{"RESPONSE_BYTES"}}}}); err != nil {
			t.Fatal(err)
		}
		cols, _ := edgeCols(t, g, "schema://api-usage-value", "flink://usage-hourly-rollup")
		if !slices.Equal(cols, []ColumnMapping{{From: "response_bytes"}}) {
			t.Errorf("after explicit fields: %v", cols)
		}
	})
}

func TestRecordLineageRejectsBadNotes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		buildBillingStory(t, g)
		before := graphDump(t, db)
		cases := []struct {
			note Note
			want string
		}{
			{Note{}, "empty"},
			{Note{Path: []string{"kafka://prod/a"}}, "at least two"},
			{Note{Path: []string{"kafka://prod/a", "kafka://prod/a"}}, "same asset"},
			{Note{Path: []string{"kafka://prod/a", "no_such_thing"}}, "path[1]"},
			{Note{Path: []string{"kafka://prod/a", "fct_billable_egres"}}, "closest: dbt://model.billing.fct_billable_egress"},
			{Note{Assets: []NoteAsset{{ID: "kafka://prod/a", Kind: "topick"}}}, "valid kinds"},
			{Note{Assets: []NoteAsset{{ID: "airflow://dag/x", Schedule: &Schedule{Cron: "0 25 * * *"}}}}, "assets[0].schedule"},
			{Note{Assets: []NoteAsset{{ID: "airflow://dag/x", Schedule: &Schedule{Cron: "0 23 * * *", Timezone: "Mars/Olympus"}}}}, "IANA"},
			{Note{Edges: []NoteEdge{{From: "kafka://prod/a", To: "kafka://prod/b", Kind: "pushes"}}}, "edges[0].kind"},
			{Note{Assets: []NoteAsset{{ID: "flink://usage-hourly-rollup", ReadsFields: []string{"response_byte"}}}}, "closest: response_bytes"},
			{Note{Edges: []NoteEdge{{From: "schema://api-usage-value", To: "flink://x", ReadsFields: []string{"bytes"}}}}, "edges[0].reads_fields"},
			{Note{Assets: []NoteAsset{{ID: "flink://lonely", ReadsFields: []string{"a"}}}}, "needs at least one input"},
			{Note{Assets: []NoteAsset{{ID: "snowflake://a..b"}}}, "empty part"},
		}
		for i, c := range cases {
			_, err := g.RecordLineage(ctx, c.note)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("case %d: error %v, want mention of %q", i, err, c.want)
			}
		}
		if after := graphDump(t, db); !slices.Equal(before, after) {
			t.Errorf("rejected notes changed the graph")
		}
	})
}

func TestRecordLineageTagsAndSchedule(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, clk := newGraph(t, db)
		buildBillingStory(t, g)
		dag := mustLineage(t, g, "sync_metered_usage_to_stripe")
		if !dag.Asset.NextRun.Equal(time.Date(2026, 3, 10, 23, 0, 0, 0, time.UTC)) {
			t.Errorf("next run %v", dag.Asset.NextRun)
		}
		clk.Set(time.Date(2026, 3, 10, 23, 30, 0, 0, time.UTC))
		if dag = mustLineage(t, g, "sync_metered_usage_to_stripe"); !dag.Asset.NextRun.Equal(time.Date(2026, 3, 11, 23, 0, 0, 0, time.UTC)) {
			t.Errorf("next run after 23:00 %v", dag.Asset.NextRun)
		}
		if _, err := g.RecordLineage(ctx, Note{Assets: []NoteAsset{{ID: "sigma://workbook/revenue-today", Tags: []string{"Customer Facing"}, RemoveTags: []string{"money"}}}}); err != nil {
			t.Fatal(err)
		}
		wb := mustLineage(t, g, "sigma://workbook/revenue-today")
		if !slices.Equal(wb.Asset.Tags, []string{"customer-facing"}) || wb.Asset.Title != "Revenue today" {
			t.Errorf("workbook %+v", wb.Asset)
		}
		res, err := g.SearchAssets(ctx, SearchParams{Tags: []string{"customer_facing"}})
		if err != nil || len(res.Assets) != 1 || res.Assets[0].ID != "sigma://workbook/revenue-today" {
			t.Errorf("search by tag: %+v %v", res, err)
		}
	})
}

func TestSearchAndOwners(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		buildBillingStory(t, g)
		res, err := g.SearchAssets(ctx, SearchParams{Query: "usage hourly"})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, a := range res.Assets {
			ids = append(ids, a.ID)
		}
		if len(ids) < 3 || !slices.Contains(ids, "snowflake://usage.usage_hourly") || !slices.Contains(ids, "flink://usage-hourly-rollup") {
			t.Errorf("search 'usage hourly' = %v", ids)
		}
		res, _ = g.SearchAssets(ctx, SearchParams{Query: "response_bytes"})
		if len(res.Assets) == 0 || res.Assets[0].ID != "schema://api-usage-value" || !slices.Contains(res.Assets[0].Matched, "column:response_bytes") {
			t.Errorf("search by column: %+v", res.Assets)
		}
		res, _ = g.SearchAssets(ctx, SearchParams{Query: "revenue", Kinds: []string{"workbook"}})
		if len(res.Assets) != 1 || res.Assets[0].ID != "sigma://workbook/revenue-today" {
			t.Errorf("search by title and kind: %+v", res.Assets)
		}
		res, _ = g.SearchAssets(ctx, SearchParams{Query: "100%_"})
		if len(res.Assets) != 0 {
			t.Errorf("LIKE wildcards in the query matched %d assets", len(res.Assets))
		}
		if _, err := g.SearchAssets(ctx, SearchParams{Kinds: []string{"spreadsheet"}}); err == nil || !strings.Contains(err.Error(), "valid kinds") {
			t.Errorf("bad kind: %v", err)
		}
		own, err := g.Owners(ctx, OwnersParams{Assets: []string{"fct_billable_egress", "sync_metered_usage_to_stripe", "kafka://prod/usage-hourly"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(own.ByOwner) != 1 || own.ByOwner[0].Owner != "billing-data" || len(own.ByOwner[0].Assets) != 2 || own.ByOwner[0].Email != "billing-data@example.com" {
			t.Errorf("by owner %+v", own.ByOwner)
		}
		if !slices.Equal(own.Unowned, []string{"kafka://prod/usage-hourly"}) || own.Assets[2].UpstreamOwner != "streaming-platform" {
			t.Errorf("unowned %+v %+v", own.Unowned, own.Assets[2])
		}
	})
}

func TestImportConnectors(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		_, err := g.ImportConnectors(ctx, []ConnectorSpec{
			{Name: "member-balances-bq", Class: "com.wepay.kafka.connect.bigquery.BigQuerySinkConnector", Topic: "member-balances", Table: "acme-loyalty.loyalty.member_balances", Owner: "loyalty"},
			{Name: "pg-orders", Class: "io.debezium.connector.postgresql.PostgresConnector", Direction: "source", Topic: "shop.public.orders", Table: "shop.public.Orders"},
		}, ConnectorOptions{Cluster: "prod"})
		if err != nil {
			t.Fatal(err)
		}
		sink := mustLineage(t, g, "connect://member-balances-bq")
		if sink.Asset.Kind != KindConnector || sink.Asset.Owner != "loyalty" {
			t.Errorf("sink %+v", sink.Asset)
		}
		if !slices.Equal(neighborIDs(sink.Upstream), []string{"kafka://prod/member-balances"}) ||
			!slices.Equal(neighborIDs(sink.Downstream), []string{"bigquery://acme-loyalty.loyalty.member_balances"}) {
			t.Errorf("sink edges %v -> %v", neighborIDs(sink.Upstream), neighborIDs(sink.Downstream))
		}
		src := mustLineage(t, g, "connect://pg-orders")
		if !slices.Equal(neighborIDs(src.Upstream), []string{"postgres://shop.public.orders"}) ||
			!slices.Equal(neighborIDs(src.Downstream), []string{"kafka://prod/shop.public.orders"}) {
			t.Errorf("source edges %v -> %v", neighborIDs(src.Upstream), neighborIDs(src.Downstream))
		}
		before := count(t, db, "lineage_assets")
		for _, c := range []struct {
			spec ConnectorSpec
			want string
		}{
			{ConnectorSpec{Name: "x", Class: "com.acme.Mirror", Topic: "t", Table: "a.b", Platform: "postgres"}, "direction"},
			{ConnectorSpec{Name: "x", Class: "io.confluent.connect.jdbc.JdbcSinkConnector", Topic: "t", Table: "a.b"}, "set platform"},
			{ConnectorSpec{Name: "", Class: "BigQuerySinkConnector", Topic: "t", Table: "a.b"}, "name is empty"},
			{ConnectorSpec{Name: "x", Class: "BigQuerySinkConnector", Topic: "t"}, "table is empty"},
			{ConnectorSpec{Name: "x", Class: "BigQuerySinkConnector", Topic: "t", Table: "a..b"}, "empty part"},
		} {
			if _, err := g.ImportConnectors(ctx, []ConnectorSpec{c.spec}, ConnectorOptions{Cluster: "prod"}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
			}
		}
		if _, err := g.ImportConnectors(ctx, []ConnectorSpec{{Name: "x", Class: "BigQuerySinkConnector", Topic: "t", Table: "a.b"}}, ConnectorOptions{}); err == nil || !strings.Contains(err.Error(), "cluster") {
			t.Errorf("missing cluster: %v", err)
		}
		if count(t, db, "lineage_assets") != before {
			t.Error("rejected connectors wrote assets")
		}
	})
}

func TestScheduleNextRun(t *testing.T) {
	now := time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)
	for _, c := range []struct {
		s    Schedule
		want time.Time
	}{
		{Schedule{Cron: "0 23 * * *"}, time.Date(2026, 3, 10, 23, 0, 0, 0, time.UTC)},
		{Schedule{Cron: "*/15 * * * *"}, time.Date(2026, 3, 10, 15, 15, 0, 0, time.UTC)},
		{Schedule{Cron: "0 22 * * *", Timezone: "Europe/Berlin"}, time.Date(2026, 3, 10, 21, 0, 0, 0, time.UTC)},
		{Schedule{Cron: "@daily"}, time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC)},
		{Schedule{Cron: "0 9 * * MON"}, time.Date(2026, 3, 16, 9, 0, 0, 0, time.UTC)},
	} {
		got, err := c.s.NextRun(now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%+v: %v %v, want %v", c.s, got, err, c.want)
		}
	}
	for _, bad := range []Schedule{{Cron: ""}, {Cron: "0 23 * *"}, {Cron: "0 0 23 * * *"}, {Cron: "CRON_TZ=UTC 0 23 * * *"}, {Cron: "0 23 * * *", Timezone: "Nowhere"}} {
		if err := ValidateSchedule(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestSQLColumns(t *testing.T) {
	got := SQLColumns(rollupSQL)
	if !slices.Equal(got, []string{"account_id", "event_time", "response_bytes", "window_end", "window_start"}) {
		t.Errorf("SQLColumns = %v", got)
	}
	got = SQLColumns(`SELECT u.account_id, COALESCE(u.response_kib * 1024, u.response_bytes) AS egress_bytes -- 'x'
		FROM usage u JOIN accounts AS a ON a.id = u.account_id WHERE u.endpoint <> 'health'`)
	if !slices.Equal(got, []string{"account_id", "endpoint", "id", "response_bytes", "response_kib"}) {
		t.Errorf("SQLColumns = %v", got)
	}
	if got := SQLMentions(`SELECT "date", value AS amount FROM t`, []string{"date", "value", "amount", "other"}); !slices.Equal(got, []string{"date", "value"}) {
		t.Errorf("SQLMentions = %v", got)
	}
}

// A connector's config comes from a Connect cluster: its errors show names
// only while short and identifier-like, never whole values.
func TestConnectorErrorsDoNotQuoteTheConfig(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g, _ := newGraph(t, db)
		for _, c := range []struct {
			spec ConnectorSpec
			want string
		}{
			{ConnectorSpec{Name: "orders sink hunter2", Class: "com.acme.Mirror hunter2", Topic: "t", Table: "a.b", Platform: "postgres"},
				`connectors[0] ("orders"… (a name of 19 characters)): direction (empty): use sink (topic -> table) or source (table -> topic); the class name "com.acme.Mirror"… (a name of 23 characters) doesn't say`},
			{ConnectorSpec{Name: "x", Class: "JdbcSinkConnector", Topic: "t", Table: "a.b hunter2"},
				`connectors[0] ("x"): cannot tell the table's platform from class "JdbcSinkConnector"; set platform (e.g. bigquery, snowflake, postgres)`},
			{ConnectorSpec{Name: "x", Class: "BigQuerySinkConnector", Topic: "t", Table: "sales..orders"},
				`connectors[0] ("x").table: table name "sales..orders" has an empty part`},
			{ConnectorSpec{Name: "x", Class: "BigQuerySinkConnector", Topic: "t", Table: "a . .hunter2 password"},
				`connectors[0] ("x").table: table name (a name of 21 characters) has an empty part`},
		} {
			_, err := g.ImportConnectors(context.Background(), []ConnectorSpec{c.spec}, ConnectorOptions{Cluster: "prod"})
			if err == nil || err.Error() != c.want {
				t.Errorf("%+v:\n got %v\nwant %s", c.spec, err, c.want)
			}
		}
		if n := count(t, db, "lineage_assets"); n != 0 {
			t.Errorf("refused connectors wrote %d assets", n)
		}
	})
}
