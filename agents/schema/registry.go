package schema

import (
	"context"
	"errors"
	"fmt"
	"github.com/dataworkers/dw/internal/changelog"
	"strings"

	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/deps/clients"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/schemahistory"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/suggest"
)

// registryClient is the Schema Registry client deps holds, or says the
// registry is not configured (ok false).
func (h *handlers) registryClient() (*registry.Client, bool, error) {
	if !clients.RegistryConfigured(h.d) {
		return nil, false, nil
	}
	c, err := clients.Registry(h.d)
	return c, true, err
}

// subjectHistory reads a subject's versions: from the registry when it is
// configured and reachable (remembering them in the store), else from the
// versions remembered earlier. note says where they came from when that
// matters to the reader.
func (h *handlers) subjectHistory(ctx context.Context, db *store.DB, c *registry.Client, subject string) (versions []schemahistory.SubjectVersion, reached bool, note string, err error) {
	if c != nil {
		hist, err := c.History(ctx, subject)
		switch {
		case err == nil:
			cvs, err := c.CompatVersions(ctx, hist)
			if err != nil {
				return nil, true, "", err
			}
			for i, v := range hist {
				kind := v.SchemaType
				if kind == "" {
					kind = string(compat.Avro)
				}
				sum := ""
				if can, err := compat.Canonicalize(compat.Kind(kind), cvs[i].Schema); err == nil {
					sum = can.SHA256
				}
				versions = append(versions, schemahistory.SubjectVersion{Subject: subject, Version: v.Version, ID: v.ID,
					SchemaType: kind, Schema: v.Schema, References: cvs[i].References, SHA256: sum})
			}
			fresh, err := schemahistory.RecordVersions(ctx, db, versions, h.d.Clock.Now())
			if err != nil {
				return nil, true, "", err
			}
			stored, err := schemahistory.Versions(ctx, db, subject)
			if err != nil {
				return nil, true, "", err
			}
			if err := h.recordVersionChanges(ctx, db, stored, fresh); err != nil {
				return nil, true, "", err
			}
			return stored, true, "", nil
		case registry.IsUnreachable(err):
			note = fmt.Sprintf("the schema registry was not reached (%v); the local verdict uses the versions Data Workers stored when it last read the registry", err)
		default:
			var nf *registry.SubjectNotFoundError
			if errors.As(err, &nf) {
				// A brand-new subject: the schema would be its first version.
				note := fmt.Sprintf("the registry has no subject %q yet: this schema would be its first version", subject)
				if subjects, lerr := c.Subjects(ctx); lerr == nil {
					if closest := suggest.Closest(subject, subjects, 3); len(closest) > 0 {
						note += fmt.Sprintf("; if you meant another subject, the closest are %s", strings.Join(closest, ", "))
					}
				}
				return nil, true, note, nil
			}
			return nil, true, "", err
		}
	} else {
		note = "no schema registry is configured (set schema_registry.url in dw.yaml); the local verdict uses the versions Data Workers stored earlier"
	}
	stored, err := schemahistory.Versions(ctx, db, subject)
	if err != nil {
		return nil, false, note, err
	}
	if len(stored) == 0 {
		// Nothing known: judged as a first version, with the closest known
		// subjects named in case the name was mistyped.
		known, _ := schemahistory.Subjects(ctx, db)
		note = fmt.Sprintf("no versions of subject %q are known, so it is judged as a first version (%s)", subject, note)
		if closest := suggest.Closest(subject, known, 5); len(closest) > 0 {
			note += fmt.Sprintf("; if you meant another subject, the closest known are %s", strings.Join(closest, ", "))
		}
		return nil, false, note, nil
	}
	return stored, false, note, nil
}

// recordVersionChanges writes each newly seen version to the change log,
// so a diagnosis can rank "version 12 of api-usage-value" as a cause. The
// key is the one dw-connectors uses, so whichever agent sees a version
// first records it and the other changes nothing. The registry keeps no
// registration time: the change is dated when first seen, and says so.
func (h *handlers) recordVersionChanges(ctx context.Context, db *store.DB, stored, fresh []schemahistory.SubjectVersion) error {
	if len(fresh) == 0 || len(fresh) == len(stored) {
		// The first sight of a whole subject is its history, not a change.
		return nil
	}
	svc := &changelog.Log{DB: db, Clock: h.d.Clock}
	for _, v := range fresh {
		params := schemahistory.VersionChange(stored, v, Name)
		if _, err := svc.RecordChange(ctx, params); err != nil {
			return err
		}
	}
	return nil
}
