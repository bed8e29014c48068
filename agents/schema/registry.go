package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/schemahistory"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/suggest"
)

// registryClient builds a client from dw.yaml, or says the registry is not
// configured (ok false).
func (h *handlers) registryClient() (*registry.Client, bool, error) {
	sr := h.d.Config.SchemaRegistry
	if sr == nil || sr.URL == "" {
		return nil, false, nil
	}
	cfg := registry.Config{URL: sr.URL, Timeout: sr.Timeout}
	if sr.UsernameEnv != "" {
		u, err := config.Secret(sr.UsernameEnv, "schema_registry.username_env")
		if err != nil {
			return nil, true, err
		}
		p, err := config.Secret(sr.PasswordEnv, "schema_registry.password_env")
		if err != nil {
			return nil, true, err
		}
		cfg.Username, cfg.Password = u, p
	}
	c, err := registry.New(cfg)
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
			if _, err := schemahistory.RecordVersions(ctx, db, versions, h.d.Clock.Now()); err != nil {
				return nil, true, "", err
			}
			stored, err := schemahistory.Versions(ctx, db, subject)
			return stored, true, "", err
		case registry.IsUnreachable(err):
			note = fmt.Sprintf("the schema registry was not reached (%v); the local verdict uses the versions Data Workers stored when it last read the registry", err)
		default:
			var nf *registry.SubjectNotFoundError
			if errors.As(err, &nf) {
				return nil, true, "", err
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
		known, _ := schemahistory.Subjects(ctx, db)
		return nil, false, note, fmt.Errorf("no versions of subject %q are known (%s); closest known subjects: %v", subject, note, suggest.Closest(subject, known, 5))
	}
	return stored, false, note, nil
}
