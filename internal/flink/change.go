package flink

import (
	"fmt"
	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/textrule"
	"strconv"
	"time"
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
