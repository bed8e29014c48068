package connectors

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/flink"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// FlinkRestoresIn names a job.
type FlinkRestoresIn struct {
	Job string `json:"job" jsonschema:"Flink job name (every job id under that name is read, so redeploys from savepoints are included) or a 32-hex-character job id"`
}

// FlinkRestoresOut is a job's restore history.
type FlinkRestoresOut struct {
	JobManager string                  `json:"job_manager" jsonschema:"the JobManager that answered"`
	Restores   []flink.RecordedRestore `json:"restores" jsonschema:"restores from a checkpoint or savepoint, oldest first, each recorded as a restore change"`
	Note       string                  `json:"note" jsonschema:"what the REST API cannot tell about a restore"`
}

var flinkRestoresTool = mcpserver.Tool{
	Name:  "read_flink_restores",
	Title: "Flink restores",
	Description: "Reads a Flink job's checkpoint and restore history from the JobManager REST API: for each job id under the name, the checkpoint or savepoint it was restored from (path, id, savepoint or not) and when. " +
		"Records each restore in the change log as a restore change (once per restore) so diagnose_incident can rank it. Whether a restore skipped state (allowNonRestoredState) cannot be read from REST: record that from the deployment's config with record_change.",
	ReadOnly:   false,
	Idempotent: true,
	OpenWorld:  true,
}

func (h *handlers) flinkRestores(ctx context.Context, in FlinkRestoresIn) (*FlinkRestoresOut, string, error) {
	job := strings.TrimSpace(in.Job)
	if job == "" {
		return nil, "", errors.New("job is empty: give a Flink job name (e.g. points-balance) or a 32-hex-character job id")
	}
	fc, err := h.flinkClient()
	if err != nil {
		return nil, "", err
	}
	rep, err := fc.ReadRestores(ctx, flink.JobParams(job))
	if err != nil {
		return nil, "", err
	}
	log, err := h.changeLog(ctx)
	if err != nil {
		return nil, "", err
	}
	out := &FlinkRestoresOut{JobManager: fc.URL(), Restores: rep.Record(ctx, log, fc.URL(), Name), Note: rep.Note}
	var b strings.Builder
	b.WriteString(rep.Summary())
	for _, r := range out.Restores {
		switch {
		case r.RecordError != "":
			fmt.Fprintf(&b, "\nnot recorded (%s): %s", r.ChangeKey, r.RecordError)
		case r.Created:
			fmt.Fprintf(&b, "\nrecorded as change %d", r.ChangeID)
		default:
			fmt.Fprintf(&b, "\nalready recorded as change %d", r.ChangeID)
		}
	}
	return out, b.String(), nil
}
