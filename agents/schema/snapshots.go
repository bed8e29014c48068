package schema

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

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
	Snapshot schemahistory.Snapshot `json:"snapshot" jsonschema:"the columns now (the first 100; get_schema_snapshot pages them all) and what changed (the first 100 changes)"`
	// ColumnsTotal and ChangesTotal count what the snapshot lists only
	// the start of.
	ColumnsTotal int    `json:"columns_total" jsonschema:"columns the table has"`
	ChangesTotal int    `json:"changes_total" jsonschema:"column changes since the previous snapshot"`
	Truncated    bool   `json:"truncated,omitempty" jsonschema:"true when snapshot lists fewer columns or changes than the totals"`
	First        bool   `json:"first" jsonschema:"no earlier snapshot existed; nothing to compare"`
	Previous     string `json:"previous,omitempty" jsonschema:"when the snapshot compared against was taken (RFC 3339)"`
	Changed      bool   `json:"changed" jsonschema:"the columns differ from the previous snapshot"`
	ChangeID     int64  `json:"change_id,omitempty" jsonschema:"id of the change recorded in the change log, when something changed"`
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
	det, err := schemahistory.Detect(ctx, db, w.Name(), w.Dialect().Name(), tab, h.d.Clock, Name+" detect_schema_change")
	if err != nil {
		return nil, "", err
	}
	cur, prev := det.Current, det.Previous
	out := &DetectOut{Snapshot: *cur, First: prev == nil, ColumnsTotal: len(cur.Columns), ChangesTotal: len(cur.Changes),
		Changed: det.Changed, ChangeID: det.ChangeID}
	if prev != nil {
		out.Previous = prev.TakenAt.Format("2006-01-02T15:04:05Z07:00")
	}
	out.Snapshot, out.Truncated = capSnapshot(out.Snapshot, maxDetectColumns)
	var b strings.Builder
	switch {
	case out.First:
		fmt.Fprintf(&b, "first snapshot of %s: %d columns", cur.Table, len(cur.Columns))
	case !out.Changed:
		fmt.Fprintf(&b, "%s unchanged since %s (%d columns)", cur.Table, out.Previous, len(cur.Columns))
	default:
		fmt.Fprintf(&b, "%s changed since %s: %s (recorded as change %d)", cur.Table, out.Previous, schemahistory.DescribeChanges(cur.Changes), out.ChangeID)
	}
	return out, b.String(), nil
}

// maxDetectColumns is how many columns detect_schema_change lists; the
// answer is about what changed, and get_schema_snapshot pages the rest.
const maxDetectColumns = 100

// maxSnapshotChanges bounds the column changes one snapshot lists: a table
// rebuilt with 20,000 new columns is one change worth a line, not 20,000.
const maxSnapshotChanges = 100

// maxListedChanges bounds the column changes each entry of
// list_schema_changes lists (a page holds up to 500 entries).
const maxListedChanges = 10

// capSnapshot keeps the first columns and the first maxSnapshotChanges
// changes of a snapshot, and says whether it dropped any.
func capSnapshot(s schemahistory.Snapshot, columns int) (schemahistory.Snapshot, bool) {
	cut := false
	if len(s.Columns) > columns {
		s.Columns, cut = s.Columns[:columns:columns], true
	}
	if len(s.Changes) > maxSnapshotChanges {
		s.Changes, cut = s.Changes[:maxSnapshotChanges:maxSnapshotChanges], true
	}
	return s, cut
}

// ListIn filters the recorded schema changes.
type ListIn struct {
	Warehouse string `json:"warehouse,omitempty" jsonschema:"warehouse name; default: the first configured"`
	Table     string `json:"table,omitempty" jsonschema:"only this table (schema.table as the catalog spells it)"`
	page.Params
}

// ListOut lists snapshots that changed something.
type ListOut struct {
	Warehouse string         `json:"warehouse" jsonschema:"warehouse"`
	Changes   []ListedChange `json:"changes" jsonschema:"this page of snapshots that differ from the one before, newest first"`
	page.Info
}

// ListedChange is one snapshot that changed something, with at most
// maxListedChanges of its column changes.
type ListedChange struct {
	schemahistory.Change
	ChangesTotal int `json:"changes_total" jsonschema:"column changes in this snapshot; changes lists the first 10 (get_schema_snapshot has the latest in full)"`
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
	changes, info, err := schemahistory.Changes(ctx, db, wc.Name, in.Table, in.Params)
	if err != nil {
		return nil, "", err
	}
	total := info.Total
	out := &ListOut{Warehouse: wc.Name, Changes: make([]ListedChange, len(changes)), Info: info}
	for i, c := range changes {
		lc := ListedChange{Change: c, ChangesTotal: len(c.Changes)}
		if len(c.Changes) > maxListedChanges {
			lc.Changes = c.Changes[:maxListedChanges:maxListedChanges]
		}
		out.Changes[i] = lc
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d schema changes detected in %s", total, wc.Name)
	for i, s := range out.Changes {
		if i == 20 {
			fmt.Fprintf(&b, "\n… and %d more on this page", len(out.Changes)-20)
			break
		}
		fmt.Fprintf(&b, "\n- %s %s: %s", s.TakenAt.Format("2006-01-02 15:04"), s.Table, schemahistory.DescribeChanges(s.Changes))
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
	page.Params
}

// SnapshotOut is the latest stored snapshot, its columns paged.
type SnapshotOut struct {
	Snapshot     schemahistory.Snapshot `json:"snapshot" jsonschema:"the latest stored snapshot of the table: this page of its columns, in position order, and the first 100 of its changes"`
	ChangesTotal int                    `json:"changes_total" jsonschema:"column changes this snapshot recorded against the one before"`
	// Info pages the columns.
	page.Info
}

// snapshotColumnsDefault is get_schema_snapshot's page of columns: most
// tables fit in one.
const snapshotColumnsDefault = 200

var getSchemaSnapshotTool = mcpserver.Tool{
	Name:        "get_schema_snapshot",
	Title:       "Get a table's latest schema snapshot",
	Description: "Returns the latest stored column snapshot of a warehouse table (taken by detect_schema_change), with the changes it recorded against the snapshot before it (the first 100, with changes_total). Columns are paged: limit (default 200, at most 500), next_cursor, total.",
	ReadOnly:    true, Idempotent: true, OpenWorld: false,
	InputSchema: mcpserver.InputSchema[SnapshotIn](func(s *jsonschema.Schema) {
		s.Properties["limit"].Description = fmt.Sprintf("columns per page: 1 to %d (default %d)", page.MaxLimit, snapshotColumnsDefault)
	}),
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
	// The paging arguments are checked before anything is read, so a bad
	// cursor is named as such whatever the table.
	pg, err := in.ResolveKeysetWith(snapshotColumnsDefault, page.MaxLimit, snapshotKey, "get_schema_snapshot", wc.Name, in.Table)
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
	// A cursor pages the one column list it started on (by its hash): a
	// newer snapshot with other columns is not continued by position.
	from := 0
	if k := pg.After; k != nil {
		if k.Text(0) != s.SHA256 {
			return nil, "", fmt.Errorf("cursor: the columns of %s changed since the first page (a newer snapshot, taken %s): omit cursor to read them from the first column",
				s.Table, s.TakenAt.Format("2006-01-02 15:04"))
		}
		from = int(min(max(k.Int(1), 0), int64(len(s.Columns))))
	}
	out := &SnapshotOut{Snapshot: *s, ChangesTotal: len(s.Changes)}
	to := min(from+pg.Limit, len(s.Columns))
	out.Snapshot.Columns = s.Columns[from:to:to]
	out.Info = page.Info{Total: len(s.Columns), NextCursor: pg.NextAfter(page.Key{s.SHA256, int64(to)}, to < len(s.Columns))}
	out.Snapshot, _ = capSnapshot(out.Snapshot, len(out.Snapshot.Columns))
	summary := fmt.Sprintf("%s as of %s: %d columns", s.Table, s.TakenAt.Format("2006-01-02 15:04"), len(s.Columns))
	if out.NextCursor != "" {
		summary += fmt.Sprintf(" (%d to %d listed; pass next_cursor as cursor for more)", from+1, from+len(out.Snapshot.Columns))
	}
	return out, summary, nil
}

// snapshotKey is a position in a snapshot's columns: the hash of the
// column list and the index after the last column shown.
var snapshotKey = page.Keyset{page.Text, page.Int}
