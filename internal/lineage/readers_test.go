package lineage

import (
	"context"
	"reflect"
	"testing"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// billingReaders records a subject whose topic feeds a rollup job (reading
// response_bytes and account_id, with its SQL) and a money-tagged report
// that reads account_id through the rollup's table.
func billingReaders(t *testing.T, g *Graph) {
	t.Helper()
	_, err := g.RecordLineage(context.Background(), Note{
		Path: []string{"schema://api-usage-value", "kafka://prod/api-usage"},
		Assets: []NoteAsset{
			{ID: "schema://api-usage-value", Owner: "sam"},
			{ID: "flink://usage-hourly-rollup", Kind: "stream_job", Owner: "sam", Title: "Hourly rollup",
				SQL: "INSERT INTO usage_hourly SELECT account_id, SUM(response_bytes) AS egress_bytes FROM api_usage GROUP BY account_id"},
			{ID: "duckdb://usage.usage_hourly", Kind: "table", Owner: "data-eng"},
			{ID: "sigma://billing-report", Kind: "report", Owner: "finance", Tags: []string{"money", "weekly"},
				Schedule: &Schedule{Cron: "0 6 * * *"}},
		},
		Edges: []NoteEdge{
			{From: "kafka://prod/api-usage", To: "flink://usage-hourly-rollup", ReadsFields: []string{"response_bytes", "account_id"}},
			{From: "flink://usage-hourly-rollup", To: "duckdb://usage.usage_hourly",
				Columns: []ColumnMapping{{From: "account_id", To: "account_id"}, {From: "response_bytes", To: "egress_bytes"}}},
			{From: "duckdb://usage.usage_hourly", To: "sigma://billing-report", ReadsFields: []string{"egress_bytes"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAssetReadersGroupsFieldsAndNamesOwners(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g, _ := newGraph(t, db)
		billingReaders(t, g)
		ctx := context.Background()
		readers, note, err := g.AssetReaders(ctx, "schema://api-usage-value", []string{"response_bytes"})
		if err != nil || note != "" {
			t.Fatalf("readers: %v, note %q", err, note)
		}
		byID := map[string]AssetReader{}
		for _, r := range readers {
			if _, dup := byID[r.Asset]; dup {
				t.Errorf("reader %s listed twice", r.Asset)
			}
			byID[r.Asset] = r
		}
		roll, ok := byID["flink://usage-hourly-rollup"]
		if !ok {
			t.Fatalf("the rollup reads response_bytes: %+v", readers)
		}
		if roll.Owner != "sam" || roll.Kind != "stream_job" || roll.Title != "Hourly rollup" || !reflect.DeepEqual(roll.Fields, []string{"response_bytes"}) {
			t.Errorf("rollup = %+v", roll)
		}
		if roll.Evidence == "" {
			t.Errorf("the rollup's SQL should be its evidence: %+v", roll)
		}
		if _, ok := byID["kafka://prod/api-usage"]; ok {
			t.Error("the topic carries the field; it is not a reader")
		}

		// Both fields read by one job: one entry naming both.
		readers, _, err = g.AssetReaders(ctx, "schema://api-usage-value", []string{"response_bytes", "account_id"})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range readers {
			if r.Asset == "flink://usage-hourly-rollup" && len(r.Fields) != 2 {
				t.Errorf("rollup should read both fields in one entry: %+v", r)
			}
		}

		// No fields: nothing is read, and the answer is an empty list.
		readers, note, err = g.AssetReaders(ctx, "schema://api-usage-value", nil)
		if err != nil || note != "" || readers == nil || len(readers) != 0 {
			t.Errorf("no fields: %+v %q %v", readers, note, err)
		}

		// An asset the graph does not have: readers are unknown, said in
		// the note, never an empty "safe" answer without one.
		readers, note, err = g.AssetReaders(ctx, "schema://no-such-subject", []string{"response_bytes"})
		if err != nil || note == "" || len(readers) != 0 {
			t.Errorf("unknown asset: %+v %q %v", readers, note, err)
		}
	})
}

func TestSQLEvidenceNamesTheExpression(t *testing.T) {
	sql := "SELECT account_id, SUM(response_bytes) AS egress FROM api_usage GROUP BY account_id"
	if got := sqlEvidence(sql, []string{"response_bytes"}); got != "SUM(response_bytes)" {
		t.Errorf("evidence = %q", got)
	}
	if got := sqlEvidence(sql, []string{"region"}); got != "" {
		t.Errorf("a field the SQL does not read has no evidence: %q", got)
	}
}
