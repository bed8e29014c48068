package flink_test

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/flink"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestJobParams(t *testing.T) {
	for job, want := range map[string]flink.RestoreParams{
		"0123456789abcdef0123456789abcdef":  {JobID: "0123456789abcdef0123456789abcdef"},
		"points-balance":                    {JobName: "points-balance"},
		"0123456789ABCDEF0123456789ABCDEF":  {JobName: "0123456789ABCDEF0123456789ABCDEF"}, // Flink writes ids in lower case
		"0123456789abcdef0123456789abcdef0": {JobName: "0123456789abcdef0123456789abcdef0"},
	} {
		if got := flink.JobParams(job); got != want {
			t.Errorf("JobParams(%s) = %+v, want %+v", job, got, want)
		}
	}
}

// Each restore of a reading is recorded once, whoever reads it again; a
// restore the change log refuses says why and is not a failed reading.
func TestRecordRestores(t *testing.T) {
	ctx := context.Background()
	fm, c, v41, v42 := loyalty(t)
	rep, err := c.ReadRestores(ctx, flink.JobParams("points-balance"))
	must(t, err)
	db := storetest.SQLite(t)
	log := &changelog.Log{DB: db, Clock: clock.NewFake(t0.Add(10 * time.Minute))}
	first := flink.RecordRestores(ctx, log, rep, fm.URL(), "test").Restores
	if len(first) != 2 || first[0].JobID != v41 || first[1].JobID != v42 {
		t.Fatalf("recorded %+v", first)
	}
	for i, r := range first {
		if !r.Created || r.ChangeID == 0 || r.RecordError != "" || r.ChangeKey != flink.ChangeKey(r.Restore) {
			t.Errorf("restore %d: %+v", i, r)
		}
	}
	again := flink.RecordRestores(ctx, log, rep, fm.URL(), "test").Restores
	for i, r := range again {
		if r.Created || r.ChangeID != first[i].ChangeID {
			t.Errorf("read again, restore %d: %+v, want change %d already recorded", i, r, first[i].ChangeID)
		}
	}
	list, err := log.ListChanges(ctx, changelog.ChangeFilter{Asset: flink.Asset("points-balance")})
	must(t, err)
	if len(list.Changes) != 2 || list.Changes[0].Kind != changelog.ChangeRestore || list.Changes[0].Details["job_manager"] != fm.URL() {
		t.Fatalf("change log: %+v", list.Changes)
	}
	must(t, db.Close())
	for i, r := range flink.RecordRestores(ctx, log, rep, fm.URL(), "test").Restores {
		if r.RecordError == "" || r.Created || r.ChangeID != 0 {
			t.Errorf("closed store, restore %d: %+v", i, r)
		}
	}
}
