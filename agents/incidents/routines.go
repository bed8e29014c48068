package incidents

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/routines/runlog"
)

var listRoutineRunsTool = mcpserver.Tool{
	Name:  "list_routine_runs",
	Title: "What the scheduled watching saw",
	Description: "Lists the runs of the routines `dw watch` runs on a schedule (quality checks, team metrics, consumer lag, topic health, connector status), newest first: when each ran, its status (ok, flagged, failed, canceled, lost), what each observation saw, the incidents it opened or joined, which owner was told (or, without Slack, would have been), and the holds it drafted for a person to approve (or why none: autonomy below L2, dw stop). " +
		"Answers \"what did the watching see overnight?\" with since. Paged: limit (default 50, at most 500), next_cursor, total. Routines observe and propose; they never carry anything out.",
	ReadOnly:    true,
	Destructive: false,
	Idempotent:  true,
	OpenWorld:   false,
	InputSchema: mcpserver.InputSchema[runlog.ListParams](func(s *jsonschema.Schema) {
		mcpserver.Enum(s, "status", runlog.Statuses...)
	}),
}

func (h *handlers) listRoutineRuns(ctx context.Context, in runlog.ListParams) (*runlog.ListResult, string, error) {
	db, err := h.d.Store(ctx)
	if err != nil {
		return nil, "", err
	}
	res, err := runlog.List(ctx, db, in)
	if err != nil {
		return nil, "", err
	}
	if res.Total == 0 {
		return res, "No routine runs match: `dw watch` runs the routines of dw.yaml and records each run.", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d run(s):", len(res.Runs), res.Total)
	for i, r := range res.Runs {
		if i == 20 {
			fmt.Fprintf(&b, "\n… and %d more on this page", len(res.Runs)-20)
			break
		}
		fmt.Fprintf(&b, "\n- %s at %s: %s — %s", r.Routine, r.Tick.UTC().Format(time.RFC3339), r.Status, r.Summary)
	}
	if res.NextCursor != "" {
		b.WriteString("\nMore runs: pass next_cursor as cursor.")
	}
	return res, b.String(), nil
}
