package schemahistory

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/warehouse"
)

func TestDetectRecordsAChangeOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := clock.NewFake(time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC))
		ref := warehouse.TableRef{Schema: "usage", Name: "usage_hourly"}
		detect := func(c []warehouse.Column) *Detection {
			t.Helper()
			d, err := Detect(ctx, db, "wh", "duckdb", &warehouse.Table{Ref: ref, Columns: c}, clk, "test detect")
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		log := &changelog.Log{DB: db, Clock: clk}
		changes := func() []changelog.Change {
			t.Helper()
			list, err := log.ListChanges(ctx, changelog.ChangeFilter{Asset: "duckdb://usage.usage_hourly"})
			if err != nil {
				t.Fatal(err)
			}
			return list.Changes
		}

		first := detect(cols("usage_id", "VARCHAR", "egress_bytes", "BIGINT", "region", "VARCHAR"))
		if first.Previous != nil || first.Changed || first.ChangeID != 0 || len(changes()) != 0 {
			t.Fatalf("first snapshot is history, not a change: %+v", first)
		}
		clk.Advance(time.Hour)
		same := detect(cols("usage_id", "VARCHAR", "egress_bytes", "BIGINT", "region", "VARCHAR"))
		if same.Previous == nil || same.Changed || same.ChangeID != 0 {
			t.Fatalf("unchanged: %+v", same)
		}

		clk.Advance(time.Hour)
		next := detect(cols("usage_id", "VARCHAR", "egress_kib", "BIGINT"))
		if !next.Changed || next.ChangeID == 0 || next.Previous == nil || !next.Previous.TakenAt.Equal(first.Current.TakenAt) {
			t.Fatalf("changed: %+v", next)
		}
		got := changes()
		if len(got) != 1 || got[0].ID != next.ChangeID || got[0].Kind != "schema_version" || got[0].Source != "test detect" {
			t.Fatalf("change log = %+v", got)
		}
		how := map[string]changelog.FieldChange{}
		for _, f := range got[0].Fields {
			how[f.Name] = f
		}
		if r := how["egress_bytes"]; r.How != changelog.FieldRenamed || r.NewName != "egress_kib" {
			t.Errorf("rename = %+v (all %+v)", r, got[0].Fields)
		}
		if how["region"].How != changelog.FieldRemoved {
			t.Errorf("drop = %+v", how["region"])
		}
		if !strings.Contains(got[0].Summary, "egress_bytes likely renamed to egress_kib") || !strings.Contains(got[0].Summary, "dropped region") {
			t.Errorf("summary = %q", got[0].Summary)
		}
	})
}

func TestDescribeChangesIsBounded(t *testing.T) {
	var cs []ColumnChange
	for i := 0; i < 25; i++ {
		cs = append(cs, ColumnChange{Column: "c" + string(rune('a'+i)), How: "added"})
	}
	parts := strings.Split(DescribeChanges(cs), "; ")
	if len(parts) != maxDescribedChanges+1 || parts[0] != "added ca" || parts[len(parts)-1] != "and 5 more" {
		t.Errorf("parts = %q", parts)
	}
	if got := DescribeChanges([]ColumnChange{{Column: "status", How: "type_changed", OldType: "INTEGER", NewType: "BIGINT"}}); got != "status INTEGER -> BIGINT" {
		t.Errorf("retype = %q", got)
	}
}
