package incidents

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// storyAGraph is the usage-billing lineage: the schema subject feeds the
// topic, the Flink statement reads response_bytes from it (recorded SQL),
// its output lands in the warehouse table, dbt builds on top and the Sigma
// workbook and the Stripe DAG read that.
func storyAGraph() *memGraph {
	g := newMemGraph()
	g.edge("schema://api-usage-value", "kafka://prod/api-usage")
	g.reads("kafka://prod/api-usage", "flink://usage-hourly-rollup", "response_bytes", "recorded SQL: SUM(response_bytes)")
	g.reads("kafka://prod/api-usage", "flink://usage-hourly-rollup", "account_id", "recorded SQL: GROUP BY account_id")
	g.chain("flink://usage-hourly-rollup", "kafka://prod/usage-hourly", "snowflake://usage.usage_hourly",
		"dbt://model.billing.fct_billable_egress", "sigma://workbook/revenue-today")
	g.edge("dbt://model.billing.fct_billable_egress", "airflow://dag/sync_metered_usage_to_stripe")
	// An unrelated corner of the graph.
	g.chain("kafka://prod/clicks", "snowflake://web.clicks", "sigma://workbook/traffic")
	return g
}

func causeIndex(causes []Cause, summary string) int {
	for i, c := range causes {
		if c.Change.Summary == summary {
			return i
		}
	}
	return -1
}

func TestDiagnoseStoryASchemaChangeRanksFirst(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := newService(t, db, tue(15, 5), storyAGraph())
		// An earlier dbt deploy on the symptomatic table itself (Monday).
		mustRecord(t, s, changelog.RecordChangeParams{At: tue(14, 5).Add(-22 * time.Hour), Kind: "deploy", System: "dbt",
			Assets: []string{"snowflake://usage.usage_hourly"}, Summary: "dbt deploy: usage sources updated", Actor: "analytics"})
		mustRecord(t, s, schemaV12())
		// A later dashboard change on an unrelated workbook, still before
		// the check found the nulls.
		mustRecord(t, s, changelog.RecordChangeParams{At: tue(14, 20), Kind: "config", System: "sigma",
			Assets: []string{"sigma://workbook/traffic"}, Summary: "traffic workbook: new chart"})
		// A change three days before the lookback window ends is ignored.
		mustRecord(t, s, changelog.RecordChangeParams{At: tue(14, 0).Add(-80 * time.Hour), Kind: "schema_version", System: "schema-registry",
			Assets: []string{"schema://api-usage-value"}, Summary: "version 11", Fields: []changelog.FieldChange{{Name: "response_bytes", How: changelog.FieldAdded}}})
		rep := mustReport(t, s, Symptom{Kind: SymptomNulls, Asset: "snowflake://usage.usage_hourly", Column: "egress_bytes",
			Metric: "null_rate", Observed: 0.18, ExpectedHigh: 0, At: tue(14, 10), Source: "run_quality_check",
			Detail: "egress_bytes is null in 18% of rows (0% in every earlier check)"})
		id := rep.Incidents[0].ID

		d, err := Diagnose(ctx, db, s.Graph, id, DiagnoseOptions{Clock: s.Clock})
		if err != nil {
			t.Fatal(err)
		}
		if d.Considered != 3 {
			t.Fatalf("considered %d changes, want 3 (the one 80h before is outside the window)", d.Considered)
		}
		top := d.Causes[0]
		t.Logf("ranking: %s\n%s", rankingText(d.Causes), strings.Join(top.Evidence, "\n"))
		if top.Change.Summary != "version 12 of schema://api-usage-value" {
			t.Fatalf("top cause = %q; ranking: %s", top.Change.Summary, rankingText(d.Causes))
		}
		if top.Relation != RelationUpstream || top.Distance != 4 || len(top.Readers) != 1 || top.Readers[0] != "flink://usage-hourly-rollup" {
			t.Fatalf("top cause relation=%s distance=%d readers=%v", top.Relation, top.Distance, top.Readers)
		}
		evidence := strings.Join(top.Evidence, "\n")
		for _, want := range []string{
			"at 14:05, 5 min before the onset at 14:10",
			"removed response_bytes",
			"flink://usage-hourly-rollup reads response_bytes from kafka://prod/api-usage (recorded SQL: SUM(response_bytes))",
			"4 hop(s) upstream of snowflake://usage.usage_hourly",
			"where egress_bytes is null in 18% of rows",
			"shows up downstream as nulls",
		} {
			if !strings.Contains(evidence, want) {
				t.Errorf("evidence lacks %q:\n%s", want, evidence)
			}
		}
		if top.Confidence <= 0 || top.Confidence > 1 {
			t.Fatalf("confidence %v out of [0,1]", top.Confidence)
		}
		dbt, dash := causeIndex(d.Causes, "dbt deploy: usage sources updated"), causeIndex(d.Causes, "traffic workbook: new chart")
		if dbt < 1 || dash < 1 {
			t.Fatalf("dbt deploy at %d, dashboard change at %d; ranking: %s", dbt, dash, rankingText(d.Causes))
		}
		if !strings.Contains(strings.Join(d.Causes[dash].Evidence, "\n"), "no recorded lineage connects") {
			t.Errorf("unrelated change evidence: %v", d.Causes[dash].Evidence)
		}
		// Stored on the incident, which is now diagnosed.
		inc, err := s.GetIncident(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if inc.Status != StatusDiagnosed || len(inc.Causes) != 3 || inc.Causes[0].Change.ID != top.Change.ID || inc.DiagnosedAt.IsZero() {
			t.Fatalf("stored incident: status=%s causes=%d diagnosed=%v", inc.Status, len(inc.Causes), inc.DiagnosedAt)
		}
		// Same inputs, same ranking.
		again, err := Diagnose(ctx, db, s.Graph, id, DiagnoseOptions{Clock: s.Clock})
		if err != nil {
			t.Fatal(err)
		}
		if rankingText(again.Causes) != rankingText(d.Causes) {
			t.Fatalf("ranking changed between runs:\n%s\n%s", rankingText(d.Causes), rankingText(again.Causes))
		}
	})
}

func rankingText(cs []Cause) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, c.Change.Summary+"="+formatNumber(c.Confidence))
	}
	return strings.Join(parts, " > ")
}

// storyBGraph is the loyalty lineage: the Flink job writes balances to a
// compacted topic, the BigQuery sink connector merges them into the table,
// dbt builds tiers, Hightouch syncs them to Braze.
func storyBGraph() *memGraph {
	return newMemGraph().chain("flink://points-balance", "kafka://prod/member-balances", "connect://bq-sink-member-balances",
		"bigquery://loyalty.member_balances", "dbt://model.loyalty.fct_member_tier", "hightouch://sync/braze-tiers")
}

func TestDiagnoseStoryBRestoreWithSkippedStateRanksFirst(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := newService(t, db, tue(15, 5), storyBGraph())
		mustRecord(t, s, changelog.RecordChangeParams{At: tue(14, 0), Kind: "release", System: "flink", Assets: []string{"flink://points-balance"},
			Summary: "release v4.2 of points-balance: filters test stores, adds last_store_id",
			Fields:  []changelog.FieldChange{{Name: "last_store_id", How: changelog.FieldAdded}}, Actor: "loyalty-eng"})
		mustRecord(t, s, changelog.RecordChangeParams{Key: "flink:points-balance:restore:sp-1400", At: tue(14, 2), Kind: "restore", System: "flink",
			Assets: []string{"flink://points-balance"}, StateSkipped: true,
			Summary: "points-balance restored from the 14:00 savepoint with allowNonRestoredState",
			Details: map[string]string{"savepoint": "s3://savepoints/points-balance/sp-1400", "allowNonRestoredState": "true"}})
		rep := mustReport(t, s, Symptom{Kind: SymptomValue, Asset: "bigquery://loyalty.member_balances", Metric: "avg_active_member_balance",
			Observed: 41, Expected: 455, ExpectedLow: 400, ExpectedHigh: 510, At: tue(14, 0), Source: "monitor_metrics"})
		d, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: rep.Incidents[0].ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Causes) != 2 {
			t.Fatalf("got %d causes, want the restore and the release", len(d.Causes))
		}
		top := d.Causes[0]
		t.Logf("ranking: %s\n%s\n%s", rankingText(d.Causes), strings.Join(top.Evidence, "\n"), d.Summary)
		if top.Change.Kind != changelog.ChangeRestore || !top.Change.StateSkipped {
			t.Fatalf("top cause = %s; ranking: %s", top.Change.Summary, rankingText(d.Causes))
		}
		if !(top.Confidence > d.Causes[1].Confidence) {
			t.Fatalf("restore %.3f not above release %.3f", top.Confidence, d.Causes[1].Confidence)
		}
		ev := strings.Join(top.Evidence, "\n")
		for _, want := range []string{"skipped operator state", "restarts aggregates from zero", "2 min after the onset", "3 hop(s) upstream of bigquery://loyalty.member_balances"} {
			if !strings.Contains(ev, want) {
				t.Errorf("restore evidence lacks %q:\n%s", want, ev)
			}
		}
		if rel := strings.Join(d.Causes[1].Evidence, "\n"); !strings.Contains(rel, "only added fields") {
			t.Errorf("release evidence should note it only added fields:\n%s", rel)
		}
	})
}

func TestDiagnoseMostRecentChangeIsNotTheCause(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g := newMemGraph().chain("airflow://dag/load_orders", "duckdb://sales.orders", "dbt://model.sales.fct_revenue", "looker://dashboard/revenue")
		g.chain("kafka://prod/clicks", "duckdb://web.clicks")
		s, _ := newService(t, db, tue(9, 30), g)
		mustRecord(t, s, changelog.RecordChangeParams{At: tue(6, 30), Kind: "pipeline", System: "airflow", Assets: []string{"airflow://dag/load_orders"},
			Summary: "load_orders: extract_eu task removed from the DAG"})
		mustRecord(t, s, changelog.RecordChangeParams{At: tue(8, 50), Kind: "deploy", System: "dbt", Assets: []string{"duckdb://sales.orders"},
			Summary: "dbt deploy touching the orders source docs"})
		mustRecord(t, s, changelog.RecordChangeParams{At: tue(8, 55), Kind: "deploy", System: "looker", Assets: []string{"looker://dashboard/revenue"},
			Summary: "revenue dashboard redesign"})
		mustRecord(t, s, changelog.RecordChangeParams{At: tue(8, 58), Kind: "config", System: "kafka", Assets: []string{"kafka://prod/clicks"},
			Summary: "clicks topic retention raised"})
		rep := mustReport(t, s, Symptom{Kind: SymptomVolume, Asset: "duckdb://sales.orders", Metric: "row_count",
			Observed: 5200, ExpectedLow: 9000, ExpectedHigh: 11000, At: tue(9, 0)})
		d, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: rep.Incidents[0].ID})
		if err != nil {
			t.Fatal(err)
		}
		if d.Causes[0].Change.Summary != "load_orders: extract_eu task removed from the DAG" {
			t.Fatalf("top cause %q; ranking: %s", d.Causes[0].Change.Summary, rankingText(d.Causes))
		}
		last := causeIndex(d.Causes, "clicks topic retention raised")
		if last == 0 {
			t.Fatal("the most recent change ranked first")
		}
		dash := causeIndex(d.Causes, "revenue dashboard redesign")
		if d.Causes[dash].Relation != RelationDownstream || d.Causes[dash].Confidence > 0.1 {
			t.Fatalf("downstream dashboard: relation %s confidence %v", d.Causes[dash].Relation, d.Causes[dash].Confidence)
		}
	})
}

func TestDiagnoseHistoryOfSameCauseRaisesConfidence(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g := storyBGraph()
		s, clk := newService(t, db, tue(15, 0).Add(-7*24*time.Hour), g)
		restore := func(at time.Time, summary string) {
			mustRecord(t, s, changelog.RecordChangeParams{At: at, Kind: "restore", System: "flink", Assets: []string{"flink://points-balance"},
				StateSkipped: true, Summary: summary})
		}
		symptom := func(at time.Time) string {
			return mustReport(t, s, Symptom{Kind: SymptomValue, Asset: "bigquery://loyalty.member_balances", Metric: "avg_balance",
				Observed: 10, ExpectedLow: 400, ExpectedHigh: 500, At: at}).Incidents[0].ID
		}
		// A week earlier the same thing happened.
		restore(tue(14, 2).Add(-7*24*time.Hour), "restore a week ago")
		first := symptom(tue(14, 0).Add(-7 * 24 * time.Hour))
		d1, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: first})
		if err != nil {
			t.Fatal(err)
		}
		if d1.Causes[0].Factors.History != 0 {
			t.Fatalf("first incident already has history: %+v", d1.Causes[0].Factors)
		}
		clk.Set(tue(15, 0))
		restore(tue(14, 2), "restore today")
		second := symptom(tue(14, 0))
		d2, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: second})
		if err != nil {
			t.Fatal(err)
		}
		top := d2.Causes[0]
		if top.Change.Summary != "restore today" || top.Factors.History != 1 || !(top.Confidence > d1.Causes[0].Confidence) {
			t.Fatalf("second diagnosis top=%s history=%v conf %.3f vs first %.3f", top.Change.Summary, top.Factors.History, top.Confidence, d1.Causes[0].Confidence)
		}
		if ev := strings.Join(top.Evidence, "\n"); !strings.Contains(ev, "this feed broke the same way before: "+first) {
			t.Fatalf("history evidence missing:\n%s", ev)
		}
	})
}

func TestDiagnoseRefusesWrongStatusAndHandlesEmptyLog(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := newService(t, db, tue(15, 0), nil)
		id := mustReport(t, s, Symptom{Kind: SymptomFreshness, Asset: "duckdb://a.b", Observed: 7200, At: tue(14, 0)}).Incidents[0].ID
		d, err := Diagnose(ctx, db, nil, id, DiagnoseOptions{Clock: clock.NewFake(tue(15, 0))})
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Causes) != 0 || d.Causes == nil || !strings.Contains(d.Summary, "no recorded change") {
			t.Fatalf("empty log diagnosis: %+v", d)
		}
		if _, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: "INC-999"}); err == nil || !strings.Contains(err.Error(), "closest: "+id) {
			t.Fatalf("unknown incident: %v", err)
		}
		if _, err := s.Transition(ctx, TransitionParams{IncidentID: id, To: "closed", Note: "false alarm: feed paused on purpose"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: id}); err == nil || !strings.Contains(err.Error(), "is closed") {
			t.Fatalf("diagnosing a closed incident: %v", err)
		}
	})
}
