package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/dataworkers/dw/internal/compat"
)

// Reference is a schema reference as the registry spells it: the name the
// schema uses (an Avro full name, a .proto import path, a JSON $ref) and the
// subject version that defines it.
type Reference struct {
	Name    string `json:"name" jsonschema:"the name the schema uses for the referenced type"`
	Subject string `json:"subject" jsonschema:"the subject that defines it"`
	Version int    `json:"version" jsonschema:"the version of that subject"`
}

// SchemaVersion is one version of a subject as the registry returns it. The
// classic API gives no registration time, so there is none here.
type SchemaVersion struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
	ID      int    `json:"id"`
	// SchemaType is as on the wire: empty means AVRO.
	SchemaType string      `json:"schemaType,omitempty"`
	Schema     string      `json:"schema"`
	References []Reference `json:"references,omitempty"`
	// Metadata and RuleSet are passed through when the registry has them
	// (data contracts).
	Metadata json.RawMessage `json:"metadata,omitempty"`
	RuleSet  json.RawMessage `json:"ruleSet,omitempty"`
}

// Kind is the schema's format.
func (v *SchemaVersion) Kind() compat.Kind {
	k, err := compat.ParseKind(v.SchemaType)
	if err != nil {
		return compat.Kind(v.SchemaType)
	}
	return k
}

// NewSchema is a schema to check, register or look up.
type NewSchema struct {
	Schema     string      `json:"schema" jsonschema:"the schema text"`
	Kind       compat.Kind `json:"schema_type,omitempty" jsonschema:"AVRO (default), JSON or PROTOBUF"`
	References []Reference `json:"references,omitempty" jsonschema:"registered schemas this one refers to"`
}

// wire is the registry's request body; schemaType is omitted for AVRO, as
// older registries require.
func (s NewSchema) wire() any {
	type req struct {
		Schema     string      `json:"schema"`
		SchemaType string      `json:"schemaType,omitempty"`
		References []Reference `json:"references,omitempty"`
	}
	r := req{Schema: s.Schema, References: s.References}
	if k := s.kind(); k != compat.Avro {
		r.SchemaType = string(k)
	}
	return r
}

// kind reads Kind leniently; a kind ParseKind refuses is sent as given for
// the registry to judge.
func (s NewSchema) kind() compat.Kind {
	k, err := compat.ParseKind(string(s.Kind))
	if err != nil {
		return s.Kind
	}
	return k
}

// Subjects lists the registry's subjects, sorted.
func (c *Client) Subjects(ctx context.Context) ([]string, error) {
	var subs []string
	if err := c.do(ctx, "GET", "/subjects", nil, &subs); err != nil {
		return nil, err
	}
	sort.Strings(subs)
	return subs, nil
}

// Versions lists a subject's version numbers, oldest first. An unknown
// subject is a *SubjectNotFoundError naming the closest subjects.
func (c *Client) Versions(ctx context.Context, subject string) ([]int, error) {
	var vs []int
	if err := c.do(ctx, "GET", subjectPath(subject)+"/versions", nil, &vs); err != nil {
		return nil, c.subjectErr(ctx, subject, err)
	}
	sort.Ints(vs)
	return vs, nil
}

// Version fetches one version of a subject.
func (c *Client) Version(ctx context.Context, subject string, version int) (*SchemaVersion, error) {
	if version < 1 {
		return nil, fmt.Errorf("version %d is not a version number; versions start at 1 (use Latest for the newest)", version)
	}
	return c.version(ctx, subject, strconv.Itoa(version))
}

// Latest fetches the newest version of a subject.
func (c *Client) Latest(ctx context.Context, subject string) (*SchemaVersion, error) {
	return c.version(ctx, subject, "latest")
}

func (c *Client) version(ctx context.Context, subject, v string) (*SchemaVersion, error) {
	var out SchemaVersion
	if err := c.do(ctx, "GET", subjectPath(subject)+"/versions/"+v, nil, &out); err != nil {
		return nil, c.subjectErr(ctx, subject, err)
	}
	if out.Subject == "" {
		out.Subject = subject
	}
	return &out, nil
}

// History fetches every version of a subject, oldest first: what a local
// compatibility verdict compares against.
func (c *Client) History(ctx context.Context, subject string) ([]SchemaVersion, error) {
	nums, err := c.Versions(ctx, subject)
	if err != nil {
		return nil, err
	}
	out := make([]SchemaVersion, 0, len(nums))
	for _, n := range nums {
		v, err := c.Version(ctx, subject, n)
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, nil
}

// SubjectConfig is the compatibility level that applies to a subject and
// where it comes from.
type SubjectConfig struct {
	Subject string       `json:"subject"`
	Level   compat.Level `json:"compatibility_level"`
	// Source is "subject" when the subject has its own level, "global"
	// when the registry-wide level applies.
	Source             string `json:"source"`
	CompatibilityGroup string `json:"compatibility_group,omitempty"`
	Normalize          bool   `json:"normalize,omitempty"`
	Alias              string `json:"alias,omitempty"`
}

type configBody struct {
	CompatibilityLevel string `json:"compatibilityLevel"`
	CompatibilityGroup string `json:"compatibilityGroup"`
	Normalize          bool   `json:"normalize"`
	Alias              string `json:"alias"`
}

// Config returns the compatibility level for subject: its own when it has
// one, else the registry's global level (the registry answers 40408 for a
// subject without its own).
func (c *Client) Config(ctx context.Context, subject string) (*SubjectConfig, error) {
	var b configBody
	err := c.do(ctx, "GET", "/config/"+url.PathEscape(subject), nil, &b)
	source := "subject"
	if code := ErrorCode(err); code == CodeSubjectLevelNotSet || code == CodeSubjectNotFound {
		source = "global"
		b = configBody{}
		err = c.do(ctx, "GET", "/config", nil, &b)
	}
	if err != nil {
		return nil, err
	}
	lv, perr := compat.ParseLevel(b.CompatibilityLevel)
	if perr != nil {
		return nil, fmt.Errorf("schema registry %s gave compatibility level %q for %s: %w", c.base, b.CompatibilityLevel, subject, perr)
	}
	return &SubjectConfig{Subject: subject, Level: lv, Source: source,
		CompatibilityGroup: b.CompatibilityGroup, Normalize: b.Normalize, Alias: b.Alias}, nil
}

// Compatibility is the registry's own verdict on a schema.
type Compatibility struct {
	IsCompatible bool `json:"is_compatible"`
	// Messages are the registry's verbose messages, verbatim.
	Messages []string `json:"messages,omitempty"`
	// Issues are Messages read into fields, for comparison with a local
	// verdict.
	Issues []Message `json:"issues,omitempty"`
	// Against is what the registry compared with: "configured" (the
	// versions the subject's level names), "latest" or a version number.
	Against string `json:"against"`
}

// Against values for CheckCompatibility.
const (
	// AgainstConfigured lets the subject's level choose the versions: the
	// latest, or all of them for a _TRANSITIVE level.
	AgainstConfigured = ""
	// AgainstLatest compares with the newest version only.
	AgainstLatest = "latest"
)

// CheckCompatibility asks the registry whether s may join subject, with
// verbose messages. against is AgainstConfigured, AgainstLatest or a version
// number.
func (c *Client) CheckCompatibility(ctx context.Context, subject string, s NewSchema, against string) (*Compatibility, error) {
	path := "/compatibility" + subjectPath(subject) + "/versions"
	label := "configured"
	switch against {
	case AgainstConfigured:
	case AgainstLatest:
		path, label = path+"/latest", against
	default:
		n, err := strconv.Atoi(against)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("compare against %q: want %q, a version number, or empty for the versions the subject's level names", against, AgainstLatest)
		}
		path, label = path+"/"+against, against
	}
	var out Compatibility
	if err := c.do(ctx, "POST", path+"?verbose=true", s.wire(), &out); err != nil {
		return nil, c.subjectErr(ctx, subject, err)
	}
	out.Against = label
	out.Issues = ParseMessages(out.Messages)
	return &out, nil
}

// Register adds s to subject and returns the schema id. The registry
// answers with the existing id when the schema is already the subject's, a
// 409 APIError when it is incompatible, and 42201 when it is invalid.
func (c *Client) Register(ctx context.Context, subject string, s NewSchema) (int, error) {
	var out struct {
		ID int `json:"id"`
	}
	if err := c.do(ctx, "POST", subjectPath(subject)+"/versions", s.wire(), &out); err != nil {
		return 0, err
	}
	if out.ID == 0 {
		return 0, fmt.Errorf("schema registry %s registered a schema under %s but returned no id", c.base, subject)
	}
	return out.ID, nil
}

// Lookup says whether s is already registered under subject and, if so,
// as which version and id. An unknown subject is a *SubjectNotFoundError,
// not "not registered", so a mistyped subject is not taken for a new one.
func (c *Client) Lookup(ctx context.Context, subject string, s NewSchema) (*SchemaVersion, bool, error) {
	if _, err := compat.ParseKind(string(s.Kind)); err != nil {
		return nil, false, err
	}
	var v SchemaVersion
	if err := c.do(ctx, "POST", subjectPath(subject), s.wire(), &v); err != nil {
		if ErrorCode(err) == CodeSchemaNotFound {
			return nil, false, nil
		}
		return nil, false, c.subjectErr(ctx, subject, err)
	}
	if v.Subject == "" {
		v.Subject = subject
	}
	return &v, true, nil
}

// Resolve fetches the texts of a schema's references, in order, so the
// schema can be parsed offline (compat.Schema.References). References of
// references come first.
func (c *Client) Resolve(ctx context.Context, refs []Reference) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	var walk func(rs []Reference, depth int) error
	walk = func(rs []Reference, depth int) error {
		if depth > 16 {
			return fmt.Errorf("schema references nest deeper than 16 levels; is there a cycle?")
		}
		for _, r := range rs {
			key := r.Subject + "\x00" + strconv.Itoa(r.Version)
			if seen[key] {
				continue
			}
			seen[key] = true
			v, err := c.Version(ctx, r.Subject, r.Version)
			if err != nil {
				return fmt.Errorf("reference %s (%s version %d): %w", r.Name, r.Subject, r.Version, err)
			}
			if err := walk(v.References, depth+1); err != nil {
				return err
			}
			out = append(out, v.Schema)
		}
		return nil
	}
	return out, walk(refs, 0)
}

// Message is one of the registry's verbose compatibility messages read into
// fields. Modern registries write
// {errorType:'…', description:'…', additionalInfo:'…'} followed by
// {oldSchemaVersion: N}; 5.x and 6.x wrote Incompatibility{type:…,
// location:…, message:…}. A message in neither form keeps only Raw.
type Message struct {
	ErrorType        string `json:"error_type,omitempty"`
	Description      string `json:"description,omitempty"`
	AdditionalInfo   string `json:"additional_info,omitempty"`
	Location         string `json:"location,omitempty"`
	OldSchemaVersion int    `json:"old_schema_version,omitempty"`
	Raw              string `json:"raw"`
}

// ParseMessages reads verbose messages; context entries (oldSchemaVersion,
// oldSchema, compatibility) are folded into the issues before them.
func ParseMessages(msgs []string) []Message {
	var out []Message
	pending := 0 // issues not yet given an old schema version
	for _, raw := range msgs {
		s := strings.TrimSpace(raw)
		switch {
		case strings.HasPrefix(s, "{oldSchemaVersion:"):
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "{oldSchemaVersion:"), "}")))
			if err == nil {
				for i := len(out) - pending; i < len(out); i++ {
					out[i].OldSchemaVersion = n
				}
			}
			pending = 0
		case strings.HasPrefix(s, "{oldSchema:"), strings.HasPrefix(s, "{validateFields:"), strings.HasPrefix(s, "{compatibility:"):
		case strings.HasPrefix(s, "{errorType:"):
			m := Message{Raw: raw}
			body := strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
			m.ErrorType = between(body, "errorType:'", "'")
			if i := strings.Index(body, "description:'"); i >= 0 {
				rest := body[i+len("description:'"):]
				if j := strings.LastIndex(rest, "', additionalInfo:'"); j >= 0 {
					m.Description = rest[:j]
					m.AdditionalInfo = strings.TrimSuffix(rest[j+len("', additionalInfo:'"):], "'")
				} else {
					m.Description = strings.TrimSuffix(rest, "'")
				}
			}
			out = append(out, m)
			pending++
		case strings.HasPrefix(s, "Incompatibility{"):
			m := Message{Raw: raw}
			m.ErrorType = between(s, "type:", ",")
			m.Location = between(s, "location:", ",")
			if i := strings.Index(s, "message:"); i >= 0 {
				rest := s[i+len("message:"):]
				if j := strings.Index(rest, ", reader:"); j >= 0 {
					rest = rest[:j]
				}
				m.Description = strings.TrimSuffix(rest, "}")
			}
			out = append(out, m)
			pending++
		default:
			out = append(out, Message{Raw: raw, Description: s})
			pending++
		}
	}
	return out
}

func between(s, start, end string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	rest := s[i+len(start):]
	if j := strings.Index(rest, end); j >= 0 {
		return strings.TrimSpace(rest[:j])
	}
	return strings.TrimSpace(rest)
}

// CompatVersions turns registry versions into compat.Versions for a local
// verdict, fetching the texts their references name.
func (c *Client) CompatVersions(ctx context.Context, history []SchemaVersion) ([]compat.Version, error) {
	out := make([]compat.Version, 0, len(history))
	for _, v := range history {
		refs, err := c.Resolve(ctx, v.References)
		if err != nil {
			return nil, fmt.Errorf("%s version %d: %w", v.Subject, v.Version, err)
		}
		out = append(out, compat.Version{Version: v.Version, Schema: compat.Schema{Text: v.Schema, References: refs}})
	}
	return out, nil
}
