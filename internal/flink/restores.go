package flink

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/suggest"
)

// SkippedStateNote is what REST cannot tell about a restore. Whether the
// job was started with allowNonRestoredState (--allowNonRestoredState on
// the CLI, execution.savepoint.ignore-unclaimed-state in the config, the
// allowNonRestoredState field of a jar run) is a submission parameter the
// JobManager does not expose afterwards, and neither is which operator state
// it skipped. A restore that dropped state must therefore be recorded by the
// team or read from the deployment's job config; the restore events here
// carry only what REST gives.
const SkippedStateNote = "Flink's REST API does not say whether a restore ran with allowNonRestoredState or which state it skipped; record that from the deployment's job config or the team's release notes."

// Restore is one restore of a job from a checkpoint or savepoint, the shape
// the change log records.
type Restore struct {
	JobID    string `json:"job_id"`
	JobName  string `json:"job_name"`
	JobState string `json:"job_state"`
	// CheckpointID is the id of the checkpoint or savepoint restored.
	CheckpointID int64     `json:"checkpoint_id"`
	At           time.Time `json:"at" jsonschema:"when the job restored"`
	IsSavepoint  bool      `json:"is_savepoint"`
	ExternalPath string    `json:"external_path" jsonschema:"where the restored checkpoint or savepoint lives"`
	// RestoreCount is how many times this job restored. The JobManager
	// keeps only the latest restore of a job, so a count above one means
	// earlier restores of the same job id are not listed.
	RestoreCount int64 `json:"restore_count" jsonschema:"restores of this job id; only the latest is listed"`
}

// RestoreParams selects a job for ReadRestores: exactly one of the two.
type RestoreParams struct {
	JobID   string `json:"job_id,omitempty" jsonschema:"Flink job id, 32 hex characters"`
	JobName string `json:"job_name,omitempty" jsonschema:"job name; every job id under it is read, so redeploys are included"`
}

// RestoreReport answers a restore reading: the restores and what REST
// cannot say about them.
type RestoreReport struct {
	Restores []Restore `json:"restores"`
	Note     string    `json:"note"`
}

// ReadRestores reads the restores of a job by id or by name.
func (c *Client) ReadRestores(ctx context.Context, p RestoreParams) (*RestoreReport, error) {
	var rs []Restore
	var err error
	switch {
	case (p.JobID == "") == (p.JobName == ""):
		return nil, fmt.Errorf("flink: give exactly one of job_id and job_name")
	case p.JobID != "":
		rs, err = c.Restores(ctx, p.JobID)
	default:
		rs, err = c.RestoresByName(ctx, p.JobName)
	}
	if err != nil {
		return nil, err
	}
	if rs == nil {
		rs = []Restore{}
	}
	return &RestoreReport{Restores: rs, Note: SkippedStateNote}, nil
}

// Summary is a few lines a person can read in the client.
func (r *RestoreReport) Summary() string {
	if len(r.Restores) == 0 {
		return "no restores: the job started without a checkpoint or savepoint"
	}
	var b strings.Builder
	// The latest restores, which a diagnosis asks about first.
	first := max(0, len(r.Restores)-summaryRestores)
	if first > 0 {
		fmt.Fprintf(&b, "%d restores; the latest %d:\n", len(r.Restores), summaryRestores)
	}
	for i, x := range r.Restores[first:] {
		if i > 0 {
			b.WriteByte('\n')
		}
		kind := "checkpoint"
		if x.IsSavepoint {
			kind = "savepoint"
		}
		fmt.Fprintf(&b, "%s (%s, %s) restored from %s %d at %s: %s", x.JobName, x.JobID, x.JobState, kind, x.CheckpointID, x.At.Format(time.RFC3339), x.ExternalPath)
	}
	b.WriteString("\n" + r.Note)
	return b.String()
}

// summaryRestores is how many restores Summary names.
const summaryRestores = 10

// Restores returns the restore of a job (the latest one, which is all the
// JobManager keeps; none when the job started fresh). See SkippedStateNote
// for what is not known.
func (c *Client) Restores(ctx context.Context, jobID string) ([]Restore, error) {
	if err := c.checkJob(ctx, jobID, nil); err != nil {
		return nil, err
	}
	jobs, err := c.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	job := JobDetails{JID: jobID}
	for _, j := range jobs {
		if j.JID == jobID {
			job = j
		}
	}
	return c.restoresOf(ctx, []JobDetails{job})
}

// RestoresByName returns the restores of every job the JobManager knows
// under a name, oldest first. A redeploy from a savepoint is a new job id
// with the same name, so this is the restore history across releases for
// as long as the JobManager keeps the finished jobs.
func (c *Client) RestoresByName(ctx context.Context, name string) ([]Restore, error) {
	jobs, err := c.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	var pick []JobDetails
	names := map[string]bool{}
	for _, j := range jobs {
		names[j.Name] = true
		if j.Name == name {
			pick = append(pick, j)
		}
	}
	if len(pick) == 0 {
		all := make([]string, 0, len(names))
		for n := range names {
			all = append(all, n)
		}
		return nil, fmt.Errorf("flink: no job named %q on %s; closest: %s", name, c.base, strings.Join(suggest.Closest(name, all, 3), ", "))
	}
	return c.restoresOf(ctx, pick)
}

func (c *Client) restoresOf(ctx context.Context, jobs []JobDetails) ([]Restore, error) {
	var out []Restore
	for _, j := range jobs {
		cp, err := c.Checkpoints(ctx, j.JID)
		if err != nil {
			return nil, err
		}
		r := cp.Latest.Restored
		if r == nil {
			continue
		}
		out = append(out, Restore{
			JobID: j.JID, JobName: j.Name, JobState: j.State,
			CheckpointID: r.ID, At: time.UnixMilli(r.RestoreTimestamp).UTC(),
			IsSavepoint: r.IsSavepoint, ExternalPath: r.ExternalPath, RestoreCount: cp.Counts.Restored,
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}
