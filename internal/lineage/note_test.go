package lineage

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/lineage/lineagetest"
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
		before := lineagetest.GraphDump(t, db)
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
		if after := lineagetest.GraphDump(t, db); !slices.Equal(before, after) {
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

// A note that gives an edge's fields explicitly and the job's SQL too: the
// fields given win for that edge (the SQL stands in only where no fields
// are given), whether the SQL mentions other columns of the input or none.
func TestRecordLineageEdgeReadsOutrankSQL(t *testing.T) {
	cols := []Column{{Name: "usage_id"}, {Name: "account_id"}, {Name: "endpoint"}, {Name: "response_bytes"}, {Name: "event_time"}}
	for name, sqlText := range map[string]string{
		"sql mentions other columns": rollupSQL,
		"sql mentions none":          "SELECT 1 AS one",
	} {
		t.Run(name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				g, _ := newGraph(t, db)
				res, err := g.RecordLineage(ctx, Note{
					Path:  []string{"flink://usage-hourly-rollup", "kafka://prod/usage-hourly"},
					Edges: []NoteEdge{{From: "schema://api-usage-value", To: "flink://usage-hourly-rollup", ReadsFields: []string{"endpoint"}}},
					Assets: []NoteAsset{
						{ID: "schema://api-usage-value", Columns: cols},
						{ID: "flink://usage-hourly-rollup", SQL: sqlText},
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				key := "schema://api-usage-value -> flink://usage-hourly-rollup"
				if got := res.ReadsFields[key]; !slices.Equal(got, []string{"endpoint"}) {
					t.Errorf("answer's fields read = %v, want [endpoint]", got)
				}
				got, _ := edgeCols(t, g, "schema://api-usage-value", "flink://usage-hourly-rollup")
				if !slices.Equal(got, []ColumnMapping{{From: "endpoint"}}) {
					t.Errorf("stored edge columns = %v, want the explicit [endpoint]", got)
				}
			})
		})
	}
}
