package routines

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/flink/flinktest"
	"github.com/dataworkers/dw/internal/registry/registrytest"
	"github.com/dataworkers/dw/internal/store/storetest"
)

const schemaV1 = `{"type":"record","name":"Usage","namespace":"x","fields":[{"name":"id","type":"string"},{"name":"egress_bytes","type":["null","long"],"default":null}]}`
const schemaV2 = `{"type":"record","name":"Usage","namespace":"x","fields":[{"name":"id","type":"string"},{"name":"response_bytes","type":["null","long"],"default":null}]}`

// New schema versions and Flink restores are written to the change log
// (once, whoever reads them first); they are not symptoms, so nobody is
// paged for them.
func TestChangesGoToTheChangeLog(t *testing.T) {
	reg := registrytest.New(t)
	reg.Seed("api-usage-value", "", schemaV1)
	fl := flinktest.NewServer()
	t.Cleanup(fl.Close)
	jobID, err := fl.AddJob(flinktest.Job{Name: "points-balance", Start: utc("2026-03-01T00:00:00Z")})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := fl.AddCheckpoint(jobID, flinktest.Checkpoint{Savepoint: true, Trigger: utc("2026-03-10T14:00:00Z"), ExternalPath: "s3://sp/1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := fl.Restore(jobID, cp, utc("2026-03-10T14:02:00Z"), true, "s3://sp/1"); err != nil {
		t.Fatal(err)
	}
	yaml := "schema_registry: {url: " + reg.URL() + "}\nflink: {url: " + fl.URL() + "}\nroutines:\n" +
		"  - {name: upstream, every: 5m, schema_subjects: [api-usage-value], flink_jobs: [points-balance]}\n"
	cfg := writeConfig(t, yaml)
	db := storetest.SQLite(t)
	clk := clock.NewFake(utc("2026-03-10T15:05:00Z"))
	r := newRunner(t, db, cfg, clk, nil)
	find := func(runs []*Run, kind string) Finding {
		t.Helper()
		if len(runs) != 1 {
			t.Fatalf("%d runs", len(runs))
		}
		for _, f := range runs[0].Findings {
			if f.Kind == kind {
				return f
			}
		}
		t.Fatalf("no %s finding in %+v", kind, runs[0].Findings)
		return Finding{}
	}
	runs := runOnce(t, r, clk)
	if runs[0].Status != StatusOK || len(runs[0].Incidents) != 0 {
		t.Fatalf("first run: %+v", runs[0])
	}
	if f := find(runs, "schema"); f.Status != "ok" {
		t.Errorf("first read of a subject is its history, not a change: %+v", f)
	}
	if f := find(runs, "flink"); f.Status != "changed" {
		t.Errorf("restore not recorded: %+v", f)
	}
	// The gateway team registers version 2; the restore is read again.
	reg.Seed("api-usage-value", "", schemaV2)
	clk.Advance(5 * time.Minute)
	runs = runOnce(t, r, clk)
	if f := find(runs, "schema"); f.Status != "changed" {
		t.Errorf("new version not seen: %+v", f)
	}
	if f := find(runs, "flink"); f.Status != "ok" {
		t.Errorf("the same restore recorded twice: %+v", f)
	}
	svc := &changelog.Log{DB: db, Clock: clk}
	list, err := svc.ListChanges(context.Background(), changelog.ChangeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, c := range list.Changes {
		kinds[string(c.Kind)]++
	}
	if kinds["schema_version"] != 1 || kinds["restore"] != 1 || len(list.Changes) != 2 {
		t.Fatalf("change log: %+v", kinds)
	}
}
