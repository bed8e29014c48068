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

// RecordedRestore is one restore and its change-log entry.
type RecordedRestore struct {
	Restore
	ChangeID    int64  `json:"change_id,omitempty" jsonschema:"id of the restore change in the change log"`
	ChangeKey   string `json:"change_key" jsonschema:"external key the restore is recorded under"`
	Created     bool   `json:"created" jsonschema:"true when this call recorded the restore for the first time"`
	RecordError string `json:"record_error,omitempty" jsonschema:"why the restore was not recorded"`
}

// RecordedRestores is what RecordRestores wrote: every restore is
// recorded, the latest are listed.
type RecordedRestores struct {
	Restores []RecordedRestore
	Total    int // restores read
	Created  int // recorded for the first time by this call
	Failed   int // not recorded
}

// listedRestores is how many restores an answer lists: the latest ones, a
// redeploying job restores once per deploy, and the change log keeps them
// all (list_changes kind restore, system flink).
const listedRestores = 50

// RecordRestores records each restore of rep in the change log as a
// restore change (once per restore, by ChangeKey) and lists the latest
// listedRestores, oldest first.
func RecordRestores(ctx context.Context, log *changelog.Log, rep *RestoreReport, jobManager, source string) RecordedRestores {
	out := RecordedRestores{Restores: []RecordedRestore{}, Total: len(rep.Restores)}
	first := max(0, len(rep.Restores)-listedRestores)
	for i, r := range rep.Restores {
		rr := RecordedRestore{Restore: r, ChangeKey: ChangeKey(r)}
		res, err := log.RecordChange(ctx, RestoreChange(r, jobManager, source))
		if err != nil {
			rr.RecordError = err.Error()
			out.Failed++
		} else {
			rr.ChangeID, rr.Created = res.Change.ID, res.Created
			if res.Created {
				out.Created++
			}
		}
		if i >= first {
			out.Restores = append(out.Restores, rr)
		}
	}
	return out
}

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
