package schema

import (
	"context"
	"errors"
	"fmt"
	"github.com/dataworkers/dw/internal/changelog"
	"strings"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/schemahistory"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/suggest"
	"github.com/dataworkers/dw/internal/warehouse"
)

// DetectIn names a warehouse table.
type DetectIn struct {
	Table     string `json:"table" jsonschema:"table as schema.table (or table when unambiguous), e.g. usage.usage_hourly"`
	Warehouse string `json:"warehouse,omitempty" jsonschema:"warehouse name from dw.yaml; default: the first configured"`
}

// DetectOut is the table's columns now and what changed since the last snapshot.
type DetectOut struct {
	Snapshot schemahistory.Snapshot `json:"snapshot" jsonschema:"the columns now"`
	First    bool                   `json:"first" jsonschema:"no earlier snapshot existed; nothing to compare"`
	Previous string                 `json:"previous,omitempty" jsonschema:"when the snapshot compared against was taken (RFC 3339)"`
	Changed  bool                   `json:"changed" jsonschema:"the columns differ from the previous snapshot"`
	ChangeID int64                  `json:"change_id,omitempty" jsonschema:"id of the change recorded in the change log, when something changed"`
}

var detectSchemaChangeTool = mcpserver.Tool{
	Name:  "detect_schema_change",
	Title: "Detect a warehouse table's schema change",
	Description: "Snapshots a warehouse table's columns from the information schema and compares them with the previous snapshot: added, dropped, retyped columns and likely renames. " +
		"A difference is stored and recorded in the change log (kind schema_version) so a diagnosis can rank it.",
	ReadOnly: false, Destructive: false, Idempotent: true, OpenWorld: true,
}

func (h *handlers) detectSchemaChange(ctx context.Context, in DetectIn) (*DetectOut, string, error) {
	w, err := h.d.Warehouse(ctx, in.Warehouse)
	if err != nil {
		return nil, "", err
	}
	tab, err := warehouse.Resolve(ctx, w, in.Table)
	if err != nil {
		return nil, "", err
	}
	db, err := h.d.Store(ctx)
	if err != nil {
		return nil, "", err
	}
	now := h.d.Clock.Now()
	cur, prev, err := schemahistory.Take(ctx, db, w.Name(), tab, now)
	if err != nil {
		return nil, "", err
	}
	out := &DetectOut{Snapshot: *cur, First: prev == nil}
	if prev != nil {
		out.Previous = prev.TakenAt.Format("2006-01-02T15:04:05Z07:00")
		out.Changed = len(cur.Changes) > 0
	}
	if out.Changed {
		assetID, _, err := lineage.TableID(w.Dialect().Name(), cur.Table)
		if err != nil {
			return nil, "", err
		}
		fields := make([]changelog.FieldChange, 0, len(cur.Changes))
		for _, c := range cur.Changes {
			fc := changelog.FieldChange{Asset: assetID, Name: c.Column}
			switch c.How {
			case "dropped":
				fc.How = changelog.FieldRemoved
			case "added":
				fc.How = changelog.FieldAdded
			case "likely_renamed":
				fc.How, fc.Name, fc.NewName = changelog.FieldRenamed, c.RenamedFrom, c.Column
			default:
				fc.How = changelog.FieldTypeChanged
				fc.Detail = c.OldType + " -> " + c.NewType
			}
			fields = append(fields, fc)
		}
		svc := &changelog.Log{DB: db, Clock: h.d.Clock}
		res, err := svc.RecordChange(ctx, changelog.RecordChangeParams{
			Key: fmt.Sprintf("table-snapshot:%s:%s:%s", w.Name(), cur.Table, cur.SHA256),
			At:  now, Kind: "schema_version", System: w.Name(), Assets: []string{assetID}, Fields: fields,
			Source:  Name + " detect_schema_change",
			Summary: fmt.Sprintf("columns of %s changed since %s: %s", cur.Table, out.Previous, describeColumnChanges(cur.Changes)),
		})
		if err != nil {
			return nil, "", err
		}
		out.ChangeID = res.Change.ID
	}
	var b strings.Builder
	switch {
	case out.First:
		fmt.Fprintf(&b, "first snapshot of %s: %d columns", cur.Table, len(cur.Columns))
	case !out.Changed:
		fmt.Fprintf(&b, "%s unchanged since %s (%d columns)", cur.Table, out.Previous, len(cur.Columns))
	default:
		fmt.Fprintf(&b, "%s changed since %s: %s (recorded as change %d)", cur.Table, out.Previous, describeColumnChanges(cur.Changes), out.ChangeID)
	}
	return out, b.String(), nil
}

func describeColumnChanges(cs []schemahistory.ColumnChange) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		switch c.How {
		case "likely_renamed":
			parts[i] = fmt.Sprintf("%s likely renamed to %s", c.RenamedFrom, c.Column)
		case "type_changed":
			parts[i] = fmt.Sprintf("%s %s -> %s", c.Column, c.OldType, c.NewType)
		default:
			parts[i] = c.How + " " + c.Column
		}
	}
	return strings.Join(parts, "; ")
}

// ListIn filters the recorded schema changes.
type ListIn struct {
	Warehouse string `json:"warehouse,omitempty" jsonschema:"warehouse name; default: the first configured"`
	Table     string `json:"table,omitempty" jsonschema:"only this table (schema.table as the catalog spells it)"`
	page.Params
}

// ListOut lists snapshots that changed something.
type ListOut struct {
	Warehouse string                 `json:"warehouse" jsonschema:"warehouse"`
	Changes   []schemahistory.Change `json:"changes" jsonschema:"this page of snapshots that differ from the one before, newest first"`
	page.Info
}

var listSchemaChangesTool = mcpserver.Tool{
	Name:        "list_schema_changes",
	Title:       "List detected warehouse schema changes",
	Description: "Lists the column changes detect_schema_change has found in a warehouse's tables, newest first, with what changed in each (added, dropped, retyped, likely renamed). Paged: limit (default 50, at most 500), next_cursor, total.",
	ReadOnly:    true, Idempotent: true, OpenWorld: false,
}

func (h *handlers) listSchemaChanges(ctx context.Context, in ListIn) (*ListOut, string, error) {
	wc, err := h.d.Config.Warehouse(in.Warehouse)
	if err != nil {
		return nil, "", err
	}
	db, err := h.d.Store(ctx)
	if err != nil {
		return nil, "", err
	}
	if in.Table != "" {
		if err := h.knownTable(ctx, db, wc.Name, in.Table); err != nil {
			return nil, "", err
		}
	}
	pg, err := in.Resolve("list_schema_changes", wc.Name, in.Table)
	if err != nil {
		return nil, "", err
	}
	changes, total, err := schemahistory.Changes(ctx, db, wc.Name, in.Table, pg.Limit, pg.Offset)
	if err != nil {
		return nil, "", err
	}
	out := &ListOut{Warehouse: wc.Name, Changes: changes, Info: pg.Info(len(changes), total)}
	var b strings.Builder
	fmt.Fprintf(&b, "%d schema changes detected in %s", total, wc.Name)
	for i, s := range out.Changes {
		if i == 20 {
			fmt.Fprintf(&b, "\n… and %d more on this page", len(out.Changes)-20)
			break
		}
		fmt.Fprintf(&b, "\n- %s %s: %s", s.TakenAt.Format("2006-01-02 15:04"), s.Table, describeColumnChanges(s.Changes))
	}
	if out.NextCursor != "" {
		b.WriteString("\nMore: pass next_cursor as cursor.")
	}
	return out, b.String(), nil
}

func (h *handlers) knownTable(ctx context.Context, db *store.DB, wh, table string) error {
	tables, err := schemahistory.Tables(ctx, db, wh)
	if err != nil {
		return err
	}
	for _, t := range tables {
		if strings.EqualFold(t, table) {
			return nil
		}
	}
	return fmt.Errorf("no snapshots of table %q in warehouse %s; run detect_schema_change first. Tables with snapshots: %s",
		table, wh, strings.Join(suggest.Closest(table, tables, 5), ", "))
}

// SnapshotIn names a table.
type SnapshotIn struct {
	Table     string `json:"table" jsonschema:"schema.table as the catalog spells it"`
	Warehouse string `json:"warehouse,omitempty" jsonschema:"warehouse name; default: the first configured"`
}

// SnapshotOut is the latest stored snapshot.
type SnapshotOut struct {
	Snapshot schemahistory.Snapshot `json:"snapshot" jsonschema:"the latest stored snapshot of the table"`
}

var getSchemaSnapshotTool = mcpserver.Tool{
	Name:        "get_schema_snapshot",
	Title:       "Get a table's latest schema snapshot",
	Description: "Returns the latest stored column snapshot of a warehouse table (taken by detect_schema_change), with the changes it recorded against the snapshot before it.",
	ReadOnly:    true, Idempotent: true, OpenWorld: false,
}

func (h *handlers) getSchemaSnapshot(ctx context.Context, in SnapshotIn) (*SnapshotOut, string, error) {
	wc, err := h.d.Config.Warehouse(in.Warehouse)
	if err != nil {
		return nil, "", err
	}
	db, err := h.d.Store(ctx)
	if err != nil {
		return nil, "", err
	}
	s, err := schemahistory.Latest(ctx, db, wc.Name, in.Table)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", h.knownTable(ctx, db, wc.Name, in.Table)
	}
	if err != nil {
		return nil, "", err
	}
	return &SnapshotOut{Snapshot: *s}, fmt.Sprintf("%s as of %s: %d columns", s.Table, s.TakenAt.Format("2006-01-02 15:04"), len(s.Columns)), nil
}
