package schemahistory

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/warehouse"
)

func cols(spec ...string) []warehouse.Column {
	var out []warehouse.Column
	for i := 0; i+1 < len(spec); i += 2 {
		out = append(out, warehouse.Column{Name: spec[i], Type: spec[i+1], Nullable: true, Position: i/2 + 1})
	}
	return out
}

func TestDiffColumns(t *testing.T) {
	old := cols("usage_id", "VARCHAR", "egress_bytes", "BIGINT", "region", "VARCHAR", "status", "INTEGER")
	cur := cols("usage_id", "VARCHAR", "egress_kib", "BIGINT", "status", "BIGINT", "tier", "VARCHAR")
	got := DiffColumns(old, cur)
	want := map[string]ColumnChange{
		"egress_kib": {Column: "egress_kib", How: "likely_renamed", OldType: "BIGINT", NewType: "BIGINT", RenamedFrom: "egress_bytes"},
		"status":     {Column: "status", How: "type_changed", OldType: "INTEGER", NewType: "BIGINT"},
		"region":     {Column: "region", How: "dropped", OldType: "VARCHAR"},
		"tier":       {Column: "tier", How: "added", NewType: "VARCHAR"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for _, c := range got {
		if want[c.Column] != c {
			t.Errorf("%s: got %+v want %+v", c.Column, c, want[c.Column])
		}
	}
}

func TestSnapshotsStoreOnlyChanges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		at := time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)
		tab := &warehouse.Table{Ref: warehouse.TableRef{Schema: "usage", Name: "usage_hourly"}, Columns: cols("usage_id", "VARCHAR", "egress_bytes", "BIGINT")}
		cur, prev, err := Take(ctx, db, "demo", tab, at)
		if err != nil || prev != nil || len(cur.Changes) != 0 {
			t.Fatalf("first: %+v %+v %v", cur, prev, err)
		}
		if _, prev, err = Take(ctx, db, "demo", tab, at.Add(time.Hour)); err != nil || prev == nil {
			t.Fatalf("same again: %v %v", prev, err)
		}
		tab.Columns = cols("usage_id", "VARCHAR")
		cur, prev, err = Take(ctx, db, "demo", tab, at.Add(2*time.Hour))
		if err != nil || prev == nil || len(cur.Changes) != 1 || cur.Changes[0].How != "dropped" {
			t.Fatalf("drop: %+v %v", cur, err)
		}
		hist, err := History(ctx, db, "demo", "usage.usage_hourly", 0)
		if err != nil || len(hist) != 2 {
			t.Fatalf("history: %d %v (an unchanged snapshot must not be stored)", len(hist), err)
		}
		if !hist[0].TakenAt.Equal(at.Add(2 * time.Hour)) {
			t.Errorf("newest first: %v", hist[0].TakenAt)
		}
	})
}

func TestRegistryVersionsFirstSeenKept(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		t0 := time.Date(2026, 11, 3, 14, 6, 0, 0, time.UTC)
		v := []SubjectVersion{{Subject: "api-usage-value", Version: 12, ID: 100012, SchemaType: "AVRO", Schema: `"long"`, SHA256: "x"}}
		fresh, err := RecordVersions(ctx, db, v, t0)
		if err != nil || len(fresh) != 1 {
			t.Fatalf("%v %v", fresh, err)
		}
		fresh, err = RecordVersions(ctx, db, v, t0.Add(time.Hour))
		if err != nil || len(fresh) != 0 {
			t.Fatalf("again: %v %v", fresh, err)
		}
		got, err := Versions(ctx, db, "api-usage-value")
		if err != nil || len(got) != 1 || !got[0].FirstSeen.Equal(t0) {
			t.Fatalf("%+v %v", got, err)
		}
	})
}
