package flink

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/textrule"
)

// ChangeKey names one restore in the change log: a job id restores at most
// once per checkpoint and time, and the JobManager keeps only its latest
// restore, so reading it again (from read_flink_restores or a routine)
// maps to the same key and records nothing new.
func ChangeKey(r Restore) string {
	return fmt.Sprintf("flink:%s:restore:%d:%d", r.JobID, r.CheckpointID, r.At.UnixMilli())
}

// Asset is a job's asset id in the context graph.
func Asset(jobName string) string { return "flink://" + jobName }

// RestoreChange is a restore as the change log records it, so a diagnosis
// can rank it as a cause. source names who read it.
func RestoreChange(r Restore, jobManager, source string) changelog.RecordChangeParams {
	from := "checkpoint"
	if r.IsSavepoint {
		from = "savepoint"
	}
	return changelog.RecordChangeParams{
		Key: ChangeKey(r), At: r.At, Kind: string(changelog.ChangeRestore), System: "flink",
		Assets: []string{Asset(r.JobName)}, Source: source,
		// Escaped: the job id and path come from the JobManager, and the
		// change log refuses what a terminal would act on.
		Summary: textrule.Line(fmt.Sprintf("%s (job %s) restored from %s %d at %s: %s", r.JobName, r.JobID, from, r.CheckpointID, r.At.UTC().Format(time.RFC3339), r.ExternalPath)),
		Details: map[string]string{
			"job_id": r.JobID, "job_name": r.JobName, "job_state": r.JobState, "checkpoint_id": strconv.FormatInt(r.CheckpointID, 10),
			"from": from, "path": r.ExternalPath, "restore_count": strconv.FormatInt(r.RestoreCount, 10),
			"job_manager": jobManager, "state_skipped": "unknown: " + SkippedStateNote,
		},
	}
}

// jobID is a Flink job id; compiled on first use, not at every start.
var jobID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{32}$`) })

// JobParams reads a job as people name it: a 32-hex-character job id,
// else a job name.
func JobParams(job string) RestoreParams {
	if jobID().MatchString(job) {
		return RestoreParams{JobID: job}
	}
	return RestoreParams{JobName: job}
}

// RecordedRestore is one restore and its change-log entry.
type RecordedRestore struct {
	Restore
	ChangeID    int64  `json:"change_id,omitempty" jsonschema:"id of the restore change in the change log"`
	ChangeKey   string `json:"change_key" jsonschema:"external key the restore is recorded under"`
	Created     bool   `json:"created" jsonschema:"true when this call recorded the restore for the first time"`
	RecordError string `json:"record_error,omitempty" jsonschema:"why the restore was not recorded"`
}

// Record writes each restore of the reading to the change log as a
// restore change, once per restore (ChangeKey), so a diagnosis can rank
// it; jobManager is the JobManager read, source who read it. A restore
// that cannot be recorded says why in its RecordError, and the others are
// still recorded.
func (r *RestoreReport) Record(ctx context.Context, log *changelog.Log, jobManager, source string) []RecordedRestore {
	out := make([]RecordedRestore, 0, len(r.Restores))
	for _, x := range r.Restores {
		rr := RecordedRestore{Restore: x, ChangeKey: ChangeKey(x)}
		res, err := log.RecordChange(ctx, RestoreChange(x, jobManager, source))
		if err != nil {
			rr.RecordError = err.Error()
		} else {
			rr.ChangeID, rr.Created = res.Change.ID, res.Created
		}
		out = append(out, rr)
	}
	return out
}
