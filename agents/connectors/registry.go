package connectors

import (
	"context"
	"fmt"
	"github.com/dataworkers/dw/internal/changelog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/registry"
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
	Schema        string               `json:"schema" jsonschema:"the schema text"`
	References    []registry.Reference `json:"references,omitempty" jsonschema:"schemas this one refers to"`
	SHA256        string               `json:"sha256,omitempty" jsonschema:"SHA-256 of the schema's canonical form: the hash a schema_version proposal binds"`
	Compatibility string               `json:"compatibility,omitempty" jsonschema:"compatibility level that applies to the subject"`
	LevelSource   string               `json:"level_source,omitempty" jsonschema:"subject when the subject has its own level, global otherwise"`
	Versions      []int                `json:"versions" jsonschema:"every version number of the subject, oldest first"`
	Previous      int                  `json:"previous_version,omitempty" jsonschema:"the version compared against"`
	Changes       []compat.Change      `json:"changes_from_previous,omitempty" jsonschema:"field-level differences from the previous version"`
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
	subject := strings.TrimSpace(in.Subject)
	if subject == "" {
		return nil, "", fmt.Errorf("subject is empty: give a subject name such as api-usage-value (list_subjects lists them)")
	}
	rc, err := h.registryClient()
	if err != nil {
		return nil, "", err
	}
	latest, err := rc.Latest(ctx, subject)
	if err != nil {
		return nil, "", err
	}
	out := &LatestSchemaOut{Registry: rc.URL(), Subject: latest.Subject, Version: latest.Version, ID: latest.ID,
		SchemaType: string(latest.Kind()), Schema: latest.Schema, References: latest.References, Versions: []int{}}
	if cfg, err := rc.Config(ctx, subject); err == nil {
		out.Compatibility, out.LevelSource = string(cfg.Level), cfg.Source
	} else {
		out.Notes = append(out.Notes, "compatibility level not read: "+err.Error())
	}
	rec, err := h.describeVersion(ctx, rc, latest)
	if err != nil {
		return nil, "", err
	}
	out.Versions, out.Previous, out.Changes, out.SHA256 = rec.versions, rec.previous, rec.changes, rec.sha256
	out.Notes = append(out.Notes, rec.notes...)
	ch, err := h.recordSchemaVersion(ctx, rc, latest, rec, "", firstSeenNote, nil)
	if err != nil {
		out.Notes = append(out.Notes, "not recorded in the change log: "+err.Error())
	} else {
		out.Change = ch
	}

	var b strings.Builder
	fmt.Fprintf(&b, "%s version %d (schema id %d, %s)", out.Subject, out.Version, out.ID, out.SchemaType)
	if out.Compatibility != "" {
		fmt.Fprintf(&b, ", compatibility %s (%s)", out.Compatibility, out.LevelSource)
	}
	if out.Previous > 0 {
		if len(out.Changes) == 0 {
			fmt.Fprintf(&b, "\nno field changes from version %d", out.Previous)
		} else {
			fmt.Fprintf(&b, "\nfrom version %d:", out.Previous)
			for _, c := range out.Changes {
				fmt.Fprintf(&b, "\n- %s", c)
			}
		}
	}
	if ch := out.Change; ch != nil {
		if ch.Created {
			fmt.Fprintf(&b, "\nrecorded in the change log as change %d at %s (first seen; the registry gives no registration time)", ch.ID, ch.At.Format(time.RFC3339))
		} else {
			fmt.Fprintf(&b, "\nalready in the change log as change %d, first seen %s", ch.ID, ch.At.Format(time.RFC3339))
		}
	}
	for _, n := range out.Notes {
		b.WriteString("\nnote: " + n)
	}
	return out, b.String(), nil
}

// firstSeenNote explains the time recorded for a version read from the
// registry.
const firstSeenNote = "the Schema Registry API gives no registration time; at is when Data Workers first saw this version, so the real registration may be earlier"

// versionFacts is what is known about one registry version beyond the
// registry's answer: its canonical hash and how it differs from the
// version before.
type versionFacts struct {
	versions []int
	previous int
	changes  []compat.Change
	sha256   string
	notes    []string
}

// describeVersion hashes a version and diffs it against the subject's
// previous version. What cannot be worked out (a reference that does not
// resolve, a schema the local parser refuses) becomes a note, not an
// error: the registry's answer stands on its own.
func (h *handlers) describeVersion(ctx context.Context, rc *registry.Client, v *registry.SchemaVersion) (*versionFacts, error) {
	f := &versionFacts{versions: []int{}}
	nums, err := rc.Versions(ctx, v.Subject)
	if err != nil {
		return nil, err
	}
	f.versions = nums
	for _, n := range nums {
		if n < v.Version && n > f.previous {
			f.previous = n
		}
	}
	pair := []registry.SchemaVersion{*v}
	if f.previous > 0 {
		prev, err := rc.Version(ctx, v.Subject, f.previous)
		if err != nil {
			return nil, err
		}
		pair = []registry.SchemaVersion{*prev, *v}
	}
	cvs, err := rc.CompatVersions(ctx, pair)
	if err != nil {
		f.notes = append(f.notes, "references not resolved, so no hash or diff: "+err.Error())
		return f, nil
	}
	kind := v.Kind()
	cur := cvs[len(cvs)-1].Schema
	if c, err := compat.Canonicalize(kind, cur); err == nil {
		f.sha256 = c.SHA256
	} else {
		f.notes = append(f.notes, "canonical hash not computed: "+err.Error())
	}
	if len(cvs) == 2 {
		changes, err := compat.Diff(kind, cvs[0].Schema, cur)
		if err != nil {
			f.notes = append(f.notes, fmt.Sprintf("no diff against version %d: %v", f.previous, err))
		} else {
			f.changes = changes
		}
	}
	return f, nil
}

// schemaChangeKey is the change log's external key for a registry version,
// so a version seen on every read (or registered here and read later) is
// recorded once.
func schemaChangeKey(subject string, version int) string {
	return "schema-registry:" + subject + ":" + strconv.Itoa(version)
}

// fieldChanges turns a schema diff into the change log's field changes,
// which diagnosis matches against the fields jobs read. Differences the
// change log has no operation for are listed in the details instead.
func fieldChanges(changes []compat.Change) ([]changelog.FieldChange, []string) {
	var fields []changelog.FieldChange
	var other []string
	for _, c := range changes {
		switch c.Kind {
		case compat.Removed:
			fields = append(fields, changelog.FieldChange{Name: c.Path, How: changelog.FieldRemoved, Detail: c.Old})
		case compat.Added:
			fields = append(fields, changelog.FieldChange{Name: c.Path, How: changelog.FieldAdded, Detail: c.New})
		case compat.TypeChanged:
			fields = append(fields, changelog.FieldChange{Name: c.Path, How: changelog.FieldTypeChanged, Detail: c.Old + " -> " + c.New})
		case compat.Renamed:
			fields = append(fields, changelog.FieldChange{Name: c.OldPath, How: changelog.FieldRenamed, NewName: c.Path})
		default:
			if c.Path != "" {
				other = append(other, c.String())
			}
		}
	}
	return fields, other
}

// recordSchemaVersion writes a registry version to the change log as a
// schema_version change keyed by subject and version. actor is who made
// the change when known; when is the note on the recorded time; extra
// adds details.
func (h *handlers) recordSchemaVersion(ctx context.Context, rc *registry.Client, v *registry.SchemaVersion, f *versionFacts, actor, when string, extra map[string]string) (*RecordedChange, error) {
	log, err := h.changeLog(ctx)
	if err != nil {
		return nil, err
	}
	fields, other := fieldChanges(f.changes)
	details := map[string]string{
		"subject": v.Subject, "version": strconv.Itoa(v.Version), "schema_id": strconv.Itoa(v.ID),
		"schema_type": string(v.Kind()), "registry": rc.URL(), "registered_at": when,
	}
	if f.sha256 != "" {
		details["sha256"] = f.sha256
	}
	if f.previous > 0 {
		details["previous_version"] = strconv.Itoa(f.previous)
	}
	if len(other) > 0 {
		details["other_changes"] = strings.Join(other, "; ")
	}
	for k, val := range extra {
		details[k] = val
	}
	summary := fmt.Sprintf("%s version %d (schema id %d)", v.Subject, v.Version, v.ID)
	if d := describeFields(fields); d != "" {
		summary += ": " + d
	} else if f.previous == 0 {
		summary += ": first version"
	}
	res, err := log.RecordChange(ctx, changelog.RecordChangeParams{
		Key: schemaChangeKey(v.Subject, v.Version), At: h.d.Clock.Now(), Kind: string(changelog.ChangeSchemaVersion),
		System: "schema-registry", Assets: []string{"schema://" + v.Subject}, Fields: fields, Actor: actor,
		Source: Name, Summary: summary, Details: details,
	})
	if err != nil {
		return nil, err
	}
	note := res.Change.Details["registered_at"]
	return &RecordedChange{ID: res.Change.ID, Key: res.Change.Key, At: res.Change.At, Created: res.Created, Note: note}, nil
}

// describeFields is "removed response_bytes; added response_kib".
func describeFields(fs []changelog.FieldChange) string {
	var parts []string
	for _, op := range changelog.FieldOps {
		var names []string
		for _, f := range fs {
			if f.How != op {
				continue
			}
			if op == changelog.FieldRenamed {
				names = append(names, f.Name+" to "+f.NewName)
			} else {
				names = append(names, f.Name)
			}
		}
		if len(names) > 0 {
			verb := string(op)
			if op == changelog.FieldTypeChanged {
				verb = "changed the type of"
			}
			parts = append(parts, verb+" "+strings.Join(names, ", "))
		}
	}
	return strings.Join(parts, "; ")
}
