package incidents

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/mcpserver"
)

var recordChangeTool = mcpserver.Tool{
	Name:  "record_change",
	Title: "Record a change in the change log",
	Description: "Adds a change to the change log diagnoses rank causes from: a deploy or release, a schema version, a restore (state_skipped when a snapshot's state was not restored, e.g. allowNonRestoredState), a config, connector, partitioning or pipeline change; with when it took effect, the system, the assets and fields it touched (removed, added, type_changed, renamed) and who made it. " +
		"With a key (e.g. schema-registry:api-usage-value:12) recording the same event again changes nothing. Times in the future are refused. " +
		fmt.Sprintf("A change names at most %d assets and %d fields (record a larger deploy per system or per group of models); the answer lists the first of each with their totals, and `dw changes show <id>` prints the whole change.", changelog.MaxChangeAssets, changelog.MaxChangeFields),
	ReadOnly:    false,
	Destructive: false,
	Idempotent:  false,
	OpenWorld:   false,
	InputSchema: mcpserver.InputSchema[changelog.RecordChangeParams](func(s *jsonschema.Schema) {
		mcpserver.Enum(s, "kind", changelog.ChangeKinds...)
	}),
}

func (h *handlers) recordChange(ctx context.Context, in changelog.RecordChangeParams) (*changelog.RecordChangeResult, string, error) {
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	if strings.TrimSpace(in.Source) == "" {
		in.Source = Name
	}
	res, err := e.log.RecordChange(ctx, in)
	if err != nil {
		return nil, "", err
	}
	res.Bound()
	c := res.Change
	verb := "Recorded"
	if !res.Created {
		verb = "Already recorded (same key; nothing changed):"
	}
	assets := strings.Join(c.Assets, ", ")
	if c.AssetsTotal > 0 {
		assets += fmt.Sprintf(" and %d more (dw changes show %d)", c.AssetsTotal-len(c.Assets), c.ID)
	}
	return res, fmt.Sprintf("%s change %d: %s (%s on %s at %s, assets %s).", verb, c.ID, c.Summary, c.Kind, c.System,
		c.At.UTC().Format("2006-01-02 15:04 UTC"), assets), nil
}

var listChangesTool = mcpserver.Tool{
	Name:  "list_changes",
	Title: "List recorded changes",
	Description: "Lists the change log, newest first, optionally only changes touching an asset, of a kind or system, or in a time range (since inclusive, until exclusive). " +
		"Paged: limit (default 50, at most 500; a page of long changes ends early), next_cursor for the next page, total. Each change lists its first assets, fields and details with their totals; `dw changes show <id>` prints one whole.",
	ReadOnly:    true,
	Destructive: false,
	Idempotent:  true,
	OpenWorld:   false,
	InputSchema: mcpserver.InputSchema[changelog.ChangeFilter](func(s *jsonschema.Schema) {
		mcpserver.Enum(s, "kind", changelog.ChangeKinds...)
	}),
}

func (h *handlers) listChanges(ctx context.Context, in changelog.ChangeFilter) (*changelog.ChangeList, string, error) {
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	list, err := e.log.ListChanges(ctx, in)
	if err != nil {
		return nil, "", err
	}
	if len(list.Changes) == 0 {
		return list, "No recorded change matches.", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d matching change(s), newest first:", len(list.Changes), list.Total)
	for i, c := range list.Changes {
		if i == 10 {
			fmt.Fprintf(&b, "\n… and %d more on this page", len(list.Changes)-10)
			break
		}
		fmt.Fprintf(&b, "\n- %s %s (%s): %s", c.At.UTC().Format("2006-01-02 15:04"), c.Kind, c.System, c.Summary)
	}
	if list.NextCursor != "" {
		b.WriteString("\nMore changes match: pass next_cursor as cursor for the next page, or narrow the filter.")
	}
	return list, b.String(), nil
}
