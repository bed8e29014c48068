package schemahistory

import (
	"context"
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/textrule"
	"github.com/dataworkers/dw/internal/warehouse"
)

// Detection is a table's snapshot now against the one before it.
type Detection struct {
	// Current is the snapshot taken now, with every column and change.
	Current *Snapshot
	// Previous is the snapshot compared against; nil for the first.
	Previous *Snapshot
	// Changed is true when the columns differ from Previous.
	Changed bool
	// ChangeID is the change-log entry recorded for the difference.
	ChangeID int64
}

// Detect snapshots a warehouse table's columns, compares them with the
// last stored snapshot and, when they differ, records the difference in
// the change log (kind schema_version, the table's asset id, each column
// as a field change) so a diagnosis can rank it. whName is the warehouse's
// name in dw.yaml, platform its dialect (the asset id's scheme); source
// names the reader;
// the key is the snapshot's hash, so detecting the same difference twice
// records it once.
func Detect(ctx context.Context, db *store.DB, whName, platform string, tab *warehouse.Table, clk clock.Clock, source string) (*Detection, error) {
	now := clk.Now()
	cur, prev, err := Take(ctx, db, whName, tab, now)
	if err != nil {
		return nil, err
	}
	d := &Detection{Current: cur, Previous: prev, Changed: prev != nil && len(cur.Changes) > 0}
	if !d.Changed {
		return d, nil
	}
	assetID, _, err := lineage.TableID(platform, cur.Table)
	if err != nil {
		return nil, err
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
	// A table rebuilt with thousands of new columns is one change.
	fields, details := changelog.FitFields(fields, nil)
	svc := &changelog.Log{DB: db, Clock: clk}
	res, err := svc.RecordChange(ctx, changelog.RecordChangeParams{
		Key: fmt.Sprintf("table-snapshot:%s:%s:%s", whName, cur.Table, cur.SHA256),
		At:  now, Kind: "schema_version", System: whName, Assets: []string{assetID}, Fields: fields, Details: details,
		Source:  source,
		Summary: textrule.Line(fmt.Sprintf("columns of %s changed since %s: %s", cur.Table, prev.TakenAt.Format("2006-01-02T15:04:05Z07:00"), DescribeChanges(cur.Changes))), // column names as the warehouse spells them
	})
	if err != nil {
		return nil, err
	}
	d.ChangeID = res.Change.ID
	return d, nil
}

// maxDescribedChanges bounds the changes a one-line description names.
const maxDescribedChanges = 20

// DescribeChanges is column changes in one line: "egress_bytes likely
// renamed to egress_kib; dropped region", the first 20 and how many more.
func DescribeChanges(cs []ColumnChange) string {
	more := 0
	if len(cs) > maxDescribedChanges {
		cs, more = cs[:maxDescribedChanges], len(cs)-maxDescribedChanges
	}
	parts := make([]string, len(cs), len(cs)+1)
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
	if more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", more))
	}
	return strings.Join(parts, "; ")
}
