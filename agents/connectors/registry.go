package connectors

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/schemahistory"
)

// ListSubjectsIn optionally narrows the listing.
type ListSubjectsIn struct {
	Prefix string `json:"prefix,omitempty" jsonschema:"only subjects starting with this text, e.g. api-usage"`
	page.Params
}

// ListSubjectsOut lists subjects.
type ListSubjectsOut struct {
	Registry string   `json:"registry" jsonschema:"the Schema Registry that answered"`
	Subjects []string `json:"subjects" jsonschema:"this page of subject names, sorted"`
	// RegistryTotal counts before the prefix filter; Total (in page.Info)
	// after it.
	RegistryTotal int `json:"registry_total" jsonschema:"subjects in the registry before the prefix filter"`
	page.Info
}

var listSubjectsTool = mcpserver.Tool{
	Name:        "list_subjects",
	Title:       "List Schema Registry subjects",
	Description: "Lists the Schema Registry's subjects, optionally those starting with a prefix. Use it to find the exact subject name (e.g. api-usage-value) before get_latest_schema or register_stream_schema. Paged: limit (default 50, at most 500), next_cursor, total.",
	ReadOnly:    true,
	Idempotent:  true,
	OpenWorld:   true,
}

func (h *handlers) listSubjects(ctx context.Context, in ListSubjectsIn) (*ListSubjectsOut, string, error) {
	pg, err := in.Resolve("list_subjects", in.Prefix)
	if err != nil {
		return nil, "", err
	}
	rc, err := h.registryClient()
	if err != nil {
		return nil, "", err
	}
	all, err := rc.Subjects(ctx)
	if err != nil {
		return nil, "", err
	}
	var match []string
	for _, s := range all {
		if strings.HasPrefix(s, in.Prefix) {
			match = append(match, s)
		}
	}
	slices.Sort(match)
	out := &ListSubjectsOut{Registry: rc.URL(), RegistryTotal: len(all)}
	// Offset-paged: the subjects are the registry's answer to this call,
	// not rows in the store (see package page).
	out.Subjects, out.Info = page.Slice(pg, match)
	summary := fmt.Sprintf("%d subjects in %s", out.Total, rc.URL())
	if in.Prefix != "" {
		summary = fmt.Sprintf("%d of %d subjects in %s start with %q", out.Total, len(all), rc.URL(), in.Prefix)
	}
	if len(out.Subjects) > 0 {
		shown := out.Subjects[:min(len(out.Subjects), 20)]
		summary += ": " + strings.Join(shown, ", ")
		if out.Total > len(shown) {
			summary += ", …"
		}
	}
	if out.NextCursor != "" {
		summary += "\nMore: pass next_cursor as cursor."
	}
	return out, summary, nil
}

// LatestSchemaIn names a subject.
type LatestSchemaIn struct {
	Subject string `json:"subject" jsonschema:"subject name, e.g. api-usage-value"`
}

// RecordedChange is the change-log entry written for a registry version.
type RecordedChange struct {
	ID      int64     `json:"id" jsonschema:"change id in the change log"`
	Key     string    `json:"key" jsonschema:"external key: schema-registry:<subject>:<version>"`
	At      time.Time `json:"at" jsonschema:"the time recorded for the version (see note)"`
	Created bool      `json:"created" jsonschema:"true when this call recorded the version for the first time"`
	Note    string    `json:"note" jsonschema:"what the recorded time means"`
}

// LatestSchemaOut is a subject's newest version, how it differs from the
// one before, and its change-log entry.
type LatestSchemaOut struct {
	Registry      string               `json:"registry" jsonschema:"the Schema Registry that answered"`
	Subject       string               `json:"subject" jsonschema:"subject"`
	Version       int                  `json:"version" jsonschema:"newest version number"`
	ID            int                  `json:"id" jsonschema:"registry-wide schema id"`
	SchemaType    string               `json:"schema_type" jsonschema:"AVRO, JSON or PROTOBUF"`
	Schema        string               `json:"schema" jsonschema:"the schema text; left out when longer than 20,000 characters (schema_chars; notes say where the registry serves it)"`
	SchemaChars   int                  `json:"schema_chars,omitempty" jsonschema:"length of the schema text, when it is left out for its size"`
	References    []registry.Reference `json:"references,omitempty" jsonschema:"schemas this one refers to"`
	SHA256        string               `json:"sha256,omitempty" jsonschema:"SHA-256 of the schema's canonical form: the hash a schema_version proposal binds"`
	Compatibility string               `json:"compatibility,omitempty" jsonschema:"compatibility level that applies to the subject"`
	LevelSource   string               `json:"level_source,omitempty" jsonschema:"subject when the subject has its own level, global otherwise"`
	Versions      []int                `json:"versions" jsonschema:"the subject's version numbers, oldest first: the latest 100 (versions_total counts them all)"`
	VersionsTotal int                  `json:"versions_total,omitempty" jsonschema:"versions of the subject in all, when versions lists only the latest"`
	Previous      int                  `json:"previous_version,omitempty" jsonschema:"the version compared against"`
	Changes       []compat.Change      `json:"changes_from_previous,omitempty" jsonschema:"field-level differences from the previous version: the first 100 (changes_total counts them all)"`
	ChangesTotal  int                  `json:"changes_total,omitempty" jsonschema:"field-level differences in all, when changes_from_previous lists only the first"`
	Change        *RecordedChange      `json:"change,omitempty" jsonschema:"the version's entry in the change log"`
	Notes         []string             `json:"notes,omitempty" jsonschema:"what could not be read or recorded"`
}

var latestSchemaTool = mcpserver.Tool{
	Name:  "get_latest_schema",
	Title: "Latest schema of a subject",
	Description: "Reads a subject's newest version from the Schema Registry with its compatibility level, its canonical SHA-256 (the hash a schema_version proposal binds), and the field-level differences from the version before. " +
		"Records the version in the change log as a schema_version change (once per subject and version) so diagnose_incident can rank it; the registry gives no registration time, so the time recorded is when Data Workers first saw the version.",
	ReadOnly:   false,
	Idempotent: true,
	OpenWorld:  true,
}

func (h *handlers) latestSchema(ctx context.Context, in LatestSchemaIn) (*LatestSchemaOut, string, error) {
	lv, err := schemahistory.ReadLatestVersion(ctx, h.registrySources(), in.Subject)
	if err != nil {
		return nil, "", err
	}
	latest, rec := lv.Version, lv.Facts
	out := &LatestSchemaOut{Registry: lv.Registry, Subject: latest.Subject, Version: latest.Version, ID: latest.ID,
		SchemaType: string(latest.Kind()), Schema: latest.Schema, References: latest.References,
		Compatibility: lv.Compatibility, LevelSource: lv.LevelSource,
		Versions: rec.Versions, Previous: rec.Previous, Changes: rec.Changes, SHA256: rec.SHA256,
		SchemaChars: lv.SchemaChars, VersionsTotal: lv.VersionsTotal, ChangesTotal: lv.ChangesTotal,
		Change: recordedChange(lv.Change), Notes: lv.Notes}
	return out, lv.Summary(), nil
}

// registrySources is how the registry workflows reach the registry, the
// change log and the clock; each is opened only when a call gets that far.
func (h *handlers) registrySources() schemahistory.Sources {
	return schemahistory.Sources{Registry: h.registryClient, ChangeLog: h.changeLog, Clock: h.d.Clock, Source: Name}
}

// recordedChange shapes a change-log entry for a tool's answer.
func recordedChange(c *schemahistory.RecordedVersion) *RecordedChange {
	if c == nil {
		return nil
	}
	return &RecordedChange{ID: c.ID, Key: c.Key, At: c.At, Created: c.Created, Note: c.Note}
}
