package connectors

import (
	"context"
	"github.com/dataworkers/dw/internal/changelog"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/flink/flinktest"
)

// loyaltyJobManager holds points-balance as the loyalty story has it:
// release v4.1 ran from Monday and took the 14:00 savepoint; v4.2 started
// at 14:02 from that savepoint.
func loyaltyJobManager(t *testing.T) (*flinktest.Server, string, string) {
	t.Helper()
	jm := flinktest.NewServer()
	t.Cleanup(jm.Close)
	old, err := jm.AddJob(flinktest.Job{Name: "points-balance", Start: t0.Add(-26 * time.Hour), Tasks: 4})
	if err != nil {
		t.Fatal(err)
	}
	sp, err := jm.AddCheckpoint(old, flinktest.Checkpoint{Savepoint: true, Trigger: t0, Duration: 3 * time.Second, Size: 1 << 30,
		ExternalPath: "s3://flink/savepoints/points-balance/savepoint-4f2a1c-1400"})
	if err != nil {
		t.Fatal(err)
	}
	if err := jm.SetState(old, "FINISHED", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	cur, err := jm.AddJob(flinktest.Job{Name: "points-balance", Start: t0.Add(2 * time.Minute), Tasks: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := jm.Restore(cur, sp, t0.Add(2*time.Minute), true, "s3://flink/savepoints/points-balance/savepoint-4f2a1c-1400"); err != nil {
		t.Fatal(err)
	}
	return jm, old, cur
}

func TestReadFlinkRestores(t *testing.T) {
	engines(t, func(t *testing.T, sy string) {
		ctx := context.Background()
		jm, _, cur := loyaltyJobManager(t)
		e := newEnv(t, sy+"flink:\n  url: "+jm.URL()+"\n  timeout: 2s\n")
		e.clk.Set(t0.Add(65 * time.Minute))

		out, summary, err := e.h.flinkRestores(ctx, FlinkRestoresIn{Job: "points-balance"})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Restores) != 1 {
			t.Fatalf("restores: %+v", out.Restores)
		}
		r := out.Restores[0]
		if r.JobID != cur || !r.IsSavepoint || !r.At.Equal(t0.Add(2*time.Minute)) || !strings.HasSuffix(r.ExternalPath, "savepoint-4f2a1c-1400") || !r.Created || r.ChangeID == 0 {
			t.Errorf("restore: %+v", r)
		}
		if !strings.Contains(out.Note, "allowNonRestoredState") || !strings.Contains(summary, "allowNonRestoredState") {
			t.Errorf("the note on skipped state is missing: %s", summary)
		}

		changes := e.changes("flink://points-balance")
		if len(changes) != 1 {
			t.Fatalf("changes: %+v", changes)
		}
		c := changes[0]
		if c.Kind != changelog.ChangeRestore || c.System != "flink" || !c.At.Equal(t0.Add(2*time.Minute)) || c.StateSkipped ||
			c.Details["from"] != "savepoint" || !strings.HasPrefix(c.Details["state_skipped"], "unknown") || !strings.Contains(c.Summary, "restored from savepoint") {
			t.Errorf("change: %+v", c)
		}

		// By job id, and again: the same change, not a second one.
		out, _, err = e.h.flinkRestores(ctx, FlinkRestoresIn{Job: cur})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Restores) != 1 || out.Restores[0].Created || out.Restores[0].ChangeID != c.ID {
			t.Errorf("again: %+v", out.Restores)
		}
		if n := len(e.changes("flink://points-balance")); n != 1 {
			t.Errorf("%d changes", n)
		}

		_, _, err = e.h.flinkRestores(ctx, FlinkRestoresIn{Job: "points-balanse"})
		wantErr(t, err, `no job named "points-balanse"`, "closest: points-balance")
		_, _, err = e.h.flinkRestores(ctx, FlinkRestoresIn{})
		wantErr(t, err, "job is empty")
	})
}

// TestReadFlinkRestoresAheadOfTheClock: a restore stamped after now (a
// JobManager clock running ahead) is listed but not recorded, and says why.
func TestReadFlinkRestoresAheadOfTheClock(t *testing.T) {
	jm, _, _ := loyaltyJobManager(t)
	e := newEnv(t, "flink:\n  url: "+jm.URL()+"\n")
	out, summary, err := e.h.flinkRestores(context.Background(), FlinkRestoresIn{Job: "points-balance"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Restores) != 1 || out.Restores[0].ChangeID != 0 || !strings.Contains(out.Restores[0].RecordError, "in the future") || !strings.Contains(summary, "not recorded") {
		t.Errorf("%+v", out.Restores)
	}
}

func TestFlinkNotReachable(t *testing.T) {
	e := newEnv(t, "flink:\n  url: http://127.0.0.1:1\n  timeout: 300ms\n")
	_, _, err := e.h.flinkRestores(context.Background(), FlinkRestoresIn{Job: "points-balance"})
	wantErr(t, err, "http://127.0.0.1:1", "300ms")
	e = newEnv(t, "")
	_, _, err = e.h.flinkRestores(context.Background(), FlinkRestoresIn{Job: "points-balance"})
	wantErr(t, err, "set flink.url in dw.yaml")
}
