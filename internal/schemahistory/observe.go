package schemahistory

import (
	"context"
	"fmt"
	"github.com/dataworkers/dw/internal/changelog"
	"strconv"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/store"
)

// ReadSubject reads a subject's versions from the registry, remembers them
// in the store and writes each version seen for the first time to the
// change log (the first sight of a whole subject is its history, not a
// change). It returns every stored version and the fresh ones. source
// names who read it and clk dates what is first seen; the change key is shared, so whichever reader sees a
// version first records it and the others change nothing.
func ReadSubject(ctx context.Context, db *store.DB, c *registry.Client, subject, source string, clk clock.Clock) (stored, fresh []SubjectVersion, err error) {
	hist, err := c.History(ctx, subject)
	if err != nil {
		return nil, nil, err
	}
	return remember(ctx, db, c, subject, hist, source, clk)
}

// remember is ReadSubject after the registry has listed the subject's
// versions: their canonical hashes stored, the first sightings logged.
func remember(ctx context.Context, db *store.DB, c *registry.Client, subject string, hist []registry.SchemaVersion, source string, clk clock.Clock) (stored, fresh []SubjectVersion, err error) {
	cvs, err := c.CompatVersions(ctx, hist)
	if err != nil {
		return nil, nil, err
	}
	var versions []SubjectVersion
	for i, v := range hist {
		kind := v.SchemaType
		if kind == "" {
			kind = string(compat.Avro)
		}
		sum := ""
		if can, err := compat.Canonicalize(compat.Kind(kind), cvs[i].Schema); err == nil {
			sum = can.SHA256
		}
		versions = append(versions, SubjectVersion{Subject: subject, Version: v.Version, ID: v.ID,
			SchemaType: kind, Schema: v.Schema, References: cvs[i].References, SHA256: sum})
	}
	if fresh, err = RecordVersions(ctx, db, versions, clk.Now()); err != nil {
		return nil, nil, err
	}
	if stored, err = Versions(ctx, db, subject); err != nil {
		return nil, nil, err
	}
	if len(fresh) == 0 || len(fresh) == len(stored) {
		return stored, fresh, nil
	}
	svc := &changelog.Log{DB: db, Clock: clk}
	for _, v := range fresh {
		if _, err := svc.RecordChange(ctx, VersionChange(stored, v, source)); err != nil {
			return nil, nil, err
		}
	}
	return stored, fresh, nil
}

// VersionChange is a newly seen version as the change log records it,
// with the fields it added, removed, renamed or retyped against the
// version before it. The registry keeps no registration time: the change
// is dated when first seen, and says so.
func VersionChange(stored []SubjectVersion, v SubjectVersion, source string) changelog.RecordChangeParams {
	params := changelog.RecordChangeParams{
		Key: "schema-registry:" + v.Subject + ":" + strconv.Itoa(v.Version), At: v.FirstSeen, Kind: "schema_version",
		System: "schema-registry", Assets: []string{"schema://" + v.Subject}, Source: source,
		Summary: fmt.Sprintf("%s version %d seen in the registry", v.Subject, v.Version),
		Details: map[string]string{"version": strconv.Itoa(v.Version), "schema_id": strconv.Itoa(v.ID),
			"at_is": "first seen by Data Workers; the registry keeps no registration time"},
	}
	var prev *SubjectVersion
	for i := range stored {
		if stored[i].Version < v.Version && (prev == nil || stored[i].Version > prev.Version) {
			prev = &stored[i]
		}
	}
	if prev == nil {
		return params
	}
	changes, err := compat.Diff(compat.Kind(v.SchemaType), compat.Schema{Text: prev.Schema, References: prev.References}, compat.Schema{Text: v.Schema, References: v.References})
	if err != nil {
		return params
	}
	for _, c := range changes {
		var how changelog.FieldOp
		switch c.Kind {
		case "removed":
			how = changelog.FieldRemoved
		case "added":
			how = changelog.FieldAdded
		case "renamed":
			how = changelog.FieldRenamed
		case "type_changed":
			how = changelog.FieldTypeChanged
		default:
			continue
		}
		fc := changelog.FieldChange{Name: c.Path, How: how}
		if how == changelog.FieldRenamed {
			fc.Name, fc.NewName = c.OldPath, c.Path
		}
		params.Fields = append(params.Fields, fc)
	}
	params.Fields, params.Details = changelog.FitFields(params.Fields, params.Details)
	return params
}
