package flink_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/flink"
	"github.com/dataworkers/dw/internal/flink/flinktest"
	"github.com/dataworkers/dw/internal/rest/resttest"
)

var t0 = time.Date(2026, 3, 3, 14, 0, 0, 0, time.UTC)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// loyalty arranges story B: v4.1 of points-balance runs from Monday, a
// savepoint is taken at 14:00, v4.1 is cancelled and v4.2 restores from
// that savepoint at 14:02; an unrelated job never restored.
func loyalty(t *testing.T) (*flinktest.Server, *flink.Client, string, string) {
	t.Helper()
	fm := flinktest.NewServer()
	t.Cleanup(fm.Close)
	v41, err := fm.AddJob(flinktest.Job{Name: "points-balance", Start: t0.Add(-26 * time.Hour), Tasks: 4})
	must(t, err)
	must(t, fm.Restore(v41, 7, t0.Add(-26*time.Hour), false, "s3://flink/checkpoints/0aa1/chk-7"))
	_, err = fm.AddCheckpoint(v41, flinktest.Checkpoint{ID: 120, Savepoint: true, Trigger: t0, Duration: 4 * time.Second, Size: 64 << 20,
		ExternalPath: "s3://flink/savepoints/points-balance/savepoint-9f1c2e-5d5e6f7a8b9c"})
	must(t, err)
	must(t, fm.SetState(v41, "CANCELED", t0.Add(time.Minute)))
	v42, err := fm.AddJob(flinktest.Job{Name: "points-balance", Start: t0.Add(2 * time.Minute), Tasks: 4})
	must(t, err)
	must(t, fm.Restore(v42, 120, t0.Add(2*time.Minute), true, "s3://flink/savepoints/points-balance/savepoint-9f1c2e-5d5e6f7a8b9c"))
	_, err = fm.AddCheckpoint(v42, flinktest.Checkpoint{Trigger: t0.Add(5 * time.Minute), Duration: time.Second, Size: 1 << 10, ExternalPath: "s3://flink/checkpoints/x/chk-121"})
	must(t, err)
	_, err = fm.AddJob(flinktest.Job{Name: "usage-hourly-rollup", Start: t0.Add(-time.Hour)})
	must(t, err)
	c, err := flink.NewClient(fm.URL(), 2*time.Second)
	must(t, err)
	return fm, c, v41, v42
}

func TestRestores(t *testing.T) {
	ctx := context.Background()
	_, c, v41, v42 := loyalty(t)

	jobs, err := c.Jobs(ctx)
	must(t, err)
	if len(jobs) != 3 || jobs[0].JID != v42 || jobs[0].State != "RUNNING" || jobs[0].EndTime != -1 ||
		jobs[2].JID != v41 || jobs[2].State != "CANCELED" || jobs[2].EndTime != t0.Add(time.Minute).UnixMilli() || jobs[2].Tasks["total"] != 4 {
		t.Fatalf("jobs: %+v", jobs)
	}

	rs, err := c.Restores(ctx, v42)
	must(t, err)
	want := flink.Restore{JobID: v42, JobName: "points-balance", JobState: "RUNNING", CheckpointID: 120, At: t0.Add(2 * time.Minute),
		IsSavepoint: true, ExternalPath: "s3://flink/savepoints/points-balance/savepoint-9f1c2e-5d5e6f7a8b9c", RestoreCount: 1}
	if len(rs) != 1 || rs[0] != want {
		t.Fatalf("restores of v4.2: %+v", rs)
	}

	all, err := c.RestoresByName(ctx, "points-balance")
	must(t, err)
	if len(all) != 2 || all[0].JobID != v41 || all[0].IsSavepoint || all[1] != want {
		t.Fatalf("restores by name: %+v", all)
	}
	none, err := c.RestoresByName(ctx, "usage-hourly-rollup")
	if err != nil || len(none) != 0 {
		t.Fatalf("fresh job: %+v %v", none, err)
	}
	_, err = c.RestoresByName(ctx, "points_balance")
	if err == nil || !strings.Contains(err.Error(), `no job named "points_balance"`) || !strings.Contains(err.Error(), "closest: points-balance") {
		t.Fatalf("unknown name: %v", err)
	}
	if !strings.Contains(flink.SkippedStateNote, "allowNonRestoredState") {
		t.Fatal("the note must name allowNonRestoredState")
	}

	rep, err := c.ReadRestores(ctx, flink.RestoreParams{JobName: "points-balance"})
	must(t, err)
	if len(rep.Restores) != 2 || rep.Note != flink.SkippedStateNote ||
		!strings.Contains(rep.Summary(), "points-balance ("+v42+", RUNNING) restored from savepoint 120 at 2026-03-03T14:02:00Z: s3://flink/savepoints/points-balance/savepoint-9f1c2e-5d5e6f7a8b9c") {
		t.Fatalf("report: %+v\n%s", rep, rep.Summary())
	}
	rep, err = c.ReadRestores(ctx, flink.RestoreParams{JobID: v42})
	if err != nil || len(rep.Restores) != 1 {
		t.Fatalf("by id: %+v %v", rep, err)
	}
	for _, p := range []flink.RestoreParams{{}, {JobID: v42, JobName: "points-balance"}} {
		if _, err := c.ReadRestores(ctx, p); err == nil || !strings.Contains(err.Error(), "exactly one of job_id and job_name") {
			t.Fatalf("%+v: %v", p, err)
		}
	}
}

func TestCheckpointsAndExceptions(t *testing.T) {
	ctx := context.Background()
	fm, c, _, v42 := loyalty(t)
	cs, err := c.Checkpoints(ctx, v42)
	must(t, err)
	if cs.Counts.Completed != 1 || cs.Latest.Completed == nil || cs.Latest.Completed.Class != flink.ClassCompleted ||
		*cs.Latest.Completed.ExternalPath != "s3://flink/checkpoints/x/chk-121" || cs.Latest.Savepoint != nil || cs.Latest.Failed != nil {
		t.Fatalf("checkpoints: %+v", cs)
	}

	for i := 0; i < 25; i++ {
		must(t, fm.AddException(v42, flink.RootExceptionInfo{ExceptionInfo: flink.ExceptionInfo{
			ExceptionName: "java.lang.IllegalStateException", Stacktrace: "java.lang.IllegalStateException: boom\n\tat x", Timestamp: t0.Add(time.Duration(i) * time.Second).UnixMilli(),
			TaskName: "GroupAggregate (1/4)"}}))
	}
	ex, err := c.Exceptions(ctx, v42, 0)
	must(t, err)
	if len(ex.ExceptionHistory.Entries) != flinktest.DefaultMaxExceptions || !ex.ExceptionHistory.Truncated ||
		ex.ExceptionHistory.Entries[0].Timestamp != t0.Add(24*time.Second).UnixMilli() {
		t.Fatalf("exceptions: %d truncated %v", len(ex.ExceptionHistory.Entries), ex.ExceptionHistory.Truncated)
	}
	ex, err = c.Exceptions(ctx, v42, 30)
	must(t, err)
	if len(ex.ExceptionHistory.Entries) != 25 || ex.ExceptionHistory.Truncated || ex.ExceptionHistory.Entries[0].TaskName != "GroupAggregate (1/4)" {
		t.Fatalf("exceptions max 30: %d %v", len(ex.ExceptionHistory.Entries), ex.ExceptionHistory.Truncated)
	}
}

func TestBadJobIDs(t *testing.T) {
	ctx := context.Background()
	_, c, _, v42 := loyalty(t)
	_, err := c.Checkpoints(ctx, "points-balance")
	if err == nil || !strings.Contains(err.Error(), "not 32 lowercase hex characters") || !strings.Contains(err.Error(), "(points-balance)") {
		t.Fatalf("name for id: %v", err)
	}
	unknown := strings.Repeat("0", 32)
	_, err = c.Restores(ctx, unknown)
	if err == nil || !flink.IsNotFound(err) || !strings.Contains(err.Error(), "Could not find Flink job ("+unknown+")") ||
		!strings.Contains(err.Error(), "closest jobs:") {
		t.Fatalf("unknown job: %v", err)
	}
	_, err = c.Exceptions(ctx, strings.ToUpper(v42), 0)
	if err == nil || !strings.Contains(err.Error(), "closest jobs: "+v42) {
		t.Fatalf("upper-case id: %v", err)
	}
}

func TestUnreachableJobManager(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := l.Addr().String()
	l.Close()
	c, err := flink.NewClient("http://"+addr, 400*time.Millisecond)
	must(t, err)
	_, err = c.Jobs(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot reach JobManager at http://"+addr) || !strings.Contains(err.Error(), "timeout 400ms") {
		t.Fatalf("closed port: %v", err)
	}
	if _, err := flink.NewClient("jobmanager:8081", 0); err == nil {
		t.Fatal("URL without a scheme accepted")
	}
}

// TestTypesFollowTheSnapshot holds every client type's JSON member names to
// the schema Flink publishes for it: no member missing, none invented.
func TestTypesFollowTheSnapshot(t *testing.T) {
	raw, err := os.ReadFile("flinktest/testdata/flink__rest_api_v1.snapshot.json")
	must(t, err)
	var doc any
	must(t, json.Unmarshal(raw, &doc))
	schemas := map[string]map[string]any{}
	var collect func(v any)
	collect = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if id, ok := x["id"].(string); ok && x["properties"] != nil {
				schemas[id] = x
			}
			for _, e := range x {
				collect(e)
			}
		case []any:
			for _, e := range x {
				collect(e)
			}
		}
	}
	collect(doc)
	props := func(ids ...string) []string {
		set := map[string]bool{}
		for _, id := range ids {
			s, ok := schemas["urn:jsonschema:org:apache:flink:runtime:"+id]
			if !ok {
				t.Fatalf("schema %s not in the snapshot", id)
			}
			for k := range s["properties"].(map[string]any) {
				set[k] = true
			}
		}
		var out []string
		for k := range set {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	const cp = "rest:messages:checkpoints:"
	for _, c := range []struct {
		v     any
		ids   []string
		extra []string // wire members outside the schema's properties
	}{
		{flink.MultipleJobsDetails{}, []string{"messages:webmonitor:MultipleJobsDetails"}, nil},
		{flink.JobDetails{}, []string{"messages:webmonitor:JobDetails"}, nil},
		{flink.CheckpointingStatistics{}, []string{cp + "CheckpointingStatistics"}, nil},
		{flink.Counts{}, []string{cp + "CheckpointingStatistics:Counts"}, nil},
		{flink.Summary{}, []string{cp + "CheckpointingStatistics:Summary"}, nil},
		{flink.StatsSummaryDto{}, []string{"rest:messages:util:stats:StatsSummaryDto"}, nil},
		{flink.LatestCheckpoints{}, []string{cp + "CheckpointingStatistics:LatestCheckpoints"}, nil},
		{flink.RestoredCheckpointStatistics{}, []string{cp + "CheckpointingStatistics:RestoredCheckpointStatistics"}, nil},
		{flink.TaskCheckpointStatistics{}, []string{cp + "TaskCheckpointStatistics"}, nil},
		{flink.CheckpointStatistics{}, []string{cp + "CheckpointStatistics", cp + "CheckpointStatistics:CompletedCheckpointStatistics",
			cp + "CheckpointStatistics:FailedCheckpointStatistics"}, []string{"@class"}},
		{flink.JobExceptionsInfoWithHistory{}, []string{"rest:messages:JobExceptionsInfoWithHistory"}, nil},
		{flink.JobExceptionHistory{}, []string{"rest:messages:JobExceptionsInfoWithHistory:JobExceptionHistory"}, nil},
		{flink.ExceptionInfo{}, []string{"rest:messages:JobExceptionsInfoWithHistory:ExceptionInfo"}, nil},
		{flink.RootExceptionInfo{}, []string{"rest:messages:JobExceptionsInfoWithHistory:RootExceptionInfo"}, nil},
	} {
		got := jsonNames(reflect.TypeOf(c.v))
		want := append(props(c.ids...), c.extra...)
		sort.Strings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%T members\n got %v\nwant %v", c.v, got, want)
		}
	}
}

// jsonNames lists a struct's JSON member names, embedded structs flattened.
func jsonNames(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			out = append(out, jsonNames(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// A JobManager answering 1 GiB, as a success or as an error, costs at most
// the cap: the call fails as too large instead of exhausting memory.
func TestHugeAnswerIsBounded(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusInternalServerError} {
		srv := resttest.HugeServer(t, status)
		c, err := flink.NewClient(srv.URL, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		resttest.RequireBounded(t, 4*flink.MaxResponseBytes, func() error {
			_, err := c.Jobs(context.Background())
			return err
		})
	}
}
