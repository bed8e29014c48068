package schemahistory

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/textrule"
)

// FirstSeenNote explains the time recorded for a version read from the
// registry: the Schema Registry API keeps no registration time.
const FirstSeenNote = "the Schema Registry API gives no registration time; at is when Data Workers first saw this version, so the real registration may be earlier"

// VersionFacts is what is known about one registry version beyond the
// registry's answer: its canonical hash and how it differs from the
// version before.
type VersionFacts struct {
	Versions []int
	Previous int
	Changes  []compat.Change
	SHA256   string
	Notes    []string
}

// DescribeVersion hashes a version and diffs it against the subject's
// previous version. What cannot be worked out (a reference that does not
// resolve, a schema the local parser refuses) becomes a note, not an
// error: the registry's answer stands on its own.
func DescribeVersion(ctx context.Context, rc *registry.Client, v *registry.SchemaVersion) (*VersionFacts, error) {
	f := &VersionFacts{Versions: []int{}}
	nums, err := rc.Versions(ctx, v.Subject)
	if err != nil {
		return nil, err
	}
	f.Versions = nums
	for _, n := range nums {
		if n < v.Version && n > f.Previous {
			f.Previous = n
		}
	}
	pair := []registry.SchemaVersion{*v}
	if f.Previous > 0 {
		prev, err := rc.Version(ctx, v.Subject, f.Previous)
		if err != nil {
			return nil, err
		}
		pair = []registry.SchemaVersion{*prev, *v}
	}
	cvs, err := rc.CompatVersions(ctx, pair)
	if err != nil {
		f.Notes = append(f.Notes, "references not resolved, so no hash or diff: "+err.Error())
		return f, nil
	}
	kind := v.Kind()
	cur := cvs[len(cvs)-1].Schema
	if c, err := compat.Canonicalize(kind, cur); err == nil {
		f.SHA256 = c.SHA256
	} else {
		f.Notes = append(f.Notes, "canonical hash not computed: "+err.Error())
	}
	if len(cvs) == 2 {
		changes, err := compat.Diff(kind, cvs[0].Schema, cur)
		if err != nil {
			f.Notes = append(f.Notes, fmt.Sprintf("no diff against version %d: %v", f.Previous, err))
		} else {
			f.Changes = changes
		}
	}
	return f, nil
}

// RecordedVersion is the change-log entry written for a registry version.
// Its JSON is what tool answers and recorded execution results carry.
type RecordedVersion struct {
	ID      int64     `json:"id"`
	Key     string    `json:"key"`
	At      time.Time `json:"at"`
	Created bool      `json:"created"`
	Note    string    `json:"note"`
}

// VersionRecord says who records a registry version and how: Source is
// the agent recording it, Actor who made the change when known, When the
// note on the recorded time, Extra more details.
type VersionRecord struct {
	Source string
	Actor  string
	When   string
	Extra  map[string]string
}

// VersionChangeKey is the change log's external key for a registry
// version, so a version seen on every read (or registered by an agent and
// read later) is recorded once.
func VersionChangeKey(subject string, version int) string {
	return "schema-registry:" + subject + ":" + strconv.Itoa(version)
}

// RecordVersion writes a registry version to the change log as a
// schema_version change keyed by subject and version, dated at.
func RecordVersion(ctx context.Context, log *changelog.Log, registryURL string, v *registry.SchemaVersion, f *VersionFacts, at time.Time, rec VersionRecord) (*RecordedVersion, error) {
	fields, other := fieldChanges(f.Changes)
	details := map[string]string{
		"subject": v.Subject, "version": strconv.Itoa(v.Version), "schema_id": strconv.Itoa(v.ID),
		"schema_type": string(v.Kind()), "registry": registryURL, "registered_at": rec.When,
	}
	if f.SHA256 != "" {
		details["sha256"] = f.SHA256
	}
	if f.Previous > 0 {
		details["previous_version"] = strconv.Itoa(f.Previous)
	}
	if len(other) > 0 {
		details["other_changes"] = clipText(strings.Join(other, "; "), otherChangesChars)
	}
	// A version that rewrites thousands of fields is one change.
	fields, details = changelog.FitFields(fields, details)
	for k, val := range rec.Extra {
		details[k] = val
	}
	summary := fmt.Sprintf("%s version %d (schema id %d)", v.Subject, v.Version, v.ID)
	if d := describeFields(fields); d != "" {
		summary += ": " + d
	} else if f.Previous == 0 {
		summary += ": first version"
	}
	// Field names of JSON and Protobuf schemas may hold any character;
	// the change log takes one line of plain text.
	summary = textrule.Line(summary)
	res, err := log.RecordChange(ctx, changelog.RecordChangeParams{
		Key: VersionChangeKey(v.Subject, v.Version), At: at, Kind: string(changelog.ChangeSchemaVersion),
		System: "schema-registry", Assets: []string{"schema://" + v.Subject}, Fields: fields, Actor: rec.Actor,
		Source: rec.Source, Summary: summary, Details: details,
	})
	if err != nil {
		return nil, err
	}
	note := res.Change.Details["registered_at"]
	return &RecordedVersion{ID: res.Change.ID, Key: res.Change.Key, At: res.Change.At, Created: res.Created, Note: note}, nil
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

// What a recorded version's summary names: a change's summary is one
// line a person reads, not the whole diff.
const (
	summaryNames      = 5
	otherChangesChars = 2000
)

// describeFields is "removed response_bytes; added response_kib", naming
// the first few fields of each operation and counting the rest.
func describeFields(fs []changelog.FieldChange) string {
	var parts []string
	for _, op := range changelog.FieldOps {
		var names []string
		n := 0
		for _, f := range fs {
			if f.How != op {
				continue
			}
			if n++; n > summaryNames {
				continue
			}
			if op == changelog.FieldRenamed {
				names = append(names, f.Name+" to "+f.NewName)
			} else {
				names = append(names, f.Name)
			}
		}
		if n > summaryNames {
			names = append(names, fmt.Sprintf("%d more", n-summaryNames))
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

// LatestVersion is a subject's newest version, its compatibility level,
// how it differs from the one before, and its change-log entry.
type LatestVersion struct {
	Registry      string
	Version       *registry.SchemaVersion
	Compatibility string
	LevelSource   string
	Facts         *VersionFacts
	Change        *RecordedVersion
	// Notes say what could not be read or recorded; the registry's answer
	// stands without it.
	Notes []string
	// The totals count what the answer lists only the first (or latest)
	// of; SchemaChars is the length of a schema text left out for its
	// size (bound).
	ChangesTotal, VersionsTotal, SchemaChars int
}

// What a latest version's answer holds: a schema text past maxSchemaText
// characters is left out (the registry serves it whole), the first
// listedChanges field changes, the latest listedVersions versions.
const maxSchemaText = 20_000

// bound cuts the version's answer to its bounds; the version was hashed,
// diffed and recorded whole.
func (lv *LatestVersion) bound() {
	if f := lv.Facts; f != nil {
		cut := *f
		if n := len(f.Changes); n > listedChanges {
			cut.Changes, lv.ChangesTotal = f.Changes[:listedChanges:listedChanges], n
		}
		if n := len(f.Versions); n > listedVersions {
			cut.Versions, lv.VersionsTotal = f.Versions[n-listedVersions:], n
		}
		lv.Facts = &cut
	}
	if v := lv.Version; v != nil && len(v.Schema) > maxSchemaText {
		cut := *v
		lv.SchemaChars, cut.Schema = len(v.Schema), ""
		lv.Version = &cut
		lv.Notes = append(lv.Notes, fmt.Sprintf("the schema text (%d characters) is left out of this answer; the registry serves it whole: GET %s/subjects/%s/versions/%d/schema",
			lv.SchemaChars, strings.TrimRight(lv.Registry, "/"), url.PathEscape(v.Subject), v.Version))
	}
}

// Sources is how a registry workflow reaches what it needs, opened only
// when the call gets that far (an empty subject is refused before any
// client is built): the registry client, the change log, the clock that
// dates change-log entries, and the agent named as their source.
type Sources struct {
	Registry  func() (*registry.Client, error)
	ChangeLog func(context.Context) (*changelog.Log, error)
	Clock     clock.Clock
	Source    string
}

// Record writes a registry version to the change log through the sources,
// dated now.
func (s Sources) Record(ctx context.Context, rc *registry.Client, v *registry.SchemaVersion, f *VersionFacts, rec VersionRecord) (*RecordedVersion, error) {
	l, err := s.ChangeLog(ctx)
	if err != nil {
		return nil, err
	}
	rec.Source = s.Source
	return RecordVersion(ctx, l, rc.URL(), v, f, s.Clock.Now(), rec)
}

// ReadLatestVersion reads a subject's newest version, describes it against
// the one before and records it in the change log once (dated the first
// time it is seen). A level read or change-log write that fails becomes a
// note: the version read is still the answer.
func ReadLatestVersion(ctx context.Context, src Sources, subject string) (*LatestVersion, error) {
	subject = strings.TrimSpace(subject)
	if subject == "" {
		return nil, fmt.Errorf("subject is empty: give a subject name such as api-usage-value (list_subjects lists them)")
	}
	rc, err := src.Registry()
	if err != nil {
		return nil, err
	}
	latest, err := rc.Latest(ctx, subject)
	if err != nil {
		return nil, err
	}
	out := &LatestVersion{Registry: rc.URL(), Version: latest}
	if cfg, err := rc.Config(ctx, subject); err == nil {
		out.Compatibility, out.LevelSource = string(cfg.Level), cfg.Source
	} else {
		out.Notes = append(out.Notes, "compatibility level not read: "+err.Error())
	}
	facts, err := DescribeVersion(ctx, rc, latest)
	if err != nil {
		return nil, err
	}
	out.Facts = facts
	out.Notes = append(out.Notes, facts.Notes...)
	ch, err := src.Record(ctx, rc, latest, facts, VersionRecord{When: FirstSeenNote})
	if err != nil {
		out.Notes = append(out.Notes, "not recorded in the change log: "+err.Error())
	} else {
		out.Change = ch
	}
	out.bound()
	return out, nil
}

// Summary is the version for a person: subject, version, schema id and
// type, the compatibility level, the field changes from the version
// before, its change-log entry and any notes.
func (lv *LatestVersion) Summary() string {
	v := lv.Version
	var b strings.Builder
	fmt.Fprintf(&b, "%s version %d (schema id %d, %s)", v.Subject, v.Version, v.ID, string(v.Kind()))
	if lv.Compatibility != "" {
		fmt.Fprintf(&b, ", compatibility %s (%s)", lv.Compatibility, lv.LevelSource)
	}
	if f := lv.Facts; f != nil && f.Previous > 0 {
		if len(f.Changes) == 0 {
			fmt.Fprintf(&b, "\nno field changes from version %d", f.Previous)
		} else {
			fmt.Fprintf(&b, "\nfrom version %d:", f.Previous)
			for i, c := range f.Changes {
				if i == summaryNames*2 {
					fmt.Fprintf(&b, "\n… %d field changes in all", max(lv.ChangesTotal, len(f.Changes)))
					break
				}
				fmt.Fprintf(&b, "\n- %s", c)
			}
		}
	}
	if ch := lv.Change; ch != nil {
		if ch.Created {
			fmt.Fprintf(&b, "\nrecorded in the change log as change %d at %s (first seen; the registry gives no registration time)", ch.ID, ch.At.Format(time.RFC3339))
		} else {
			fmt.Fprintf(&b, "\nalready in the change log as change %d, first seen %s", ch.ID, ch.At.Format(time.RFC3339))
		}
	}
	for _, n := range lv.Notes {
		b.WriteString("\nnote: " + n)
	}
	return b.String()
}
