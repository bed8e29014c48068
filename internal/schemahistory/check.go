package schemahistory

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/dataworkers/dw/internal/bound"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/store"
)

// RegistryVerdict is what the registry itself said.
type RegistryVerdict struct {
	Configured bool     `json:"configured" jsonschema:"a schema registry is configured"`
	Reached    bool     `json:"reached" jsonschema:"the registry answered"`
	Compatible bool     `json:"compatible" jsonschema:"the registry accepts the schema under the subject's level (only meaningful when reached)"`
	Level      string   `json:"level,omitempty" jsonschema:"the subject's level in the registry"`
	Messages   []string `json:"messages,omitempty" jsonschema:"the registry's verbose messages"`
	Note       string   `json:"note,omitempty" jsonschema:"why there is no registry verdict, when there is none"`
}

// Check is the two answers about a proposed schema: does the rule accept
// it, and is it safe for what reads the subject downstream.
type Check struct {
	Subject      string                `json:"subject" jsonschema:"the subject"`
	SchemaType   string                `json:"schema_type" jsonschema:"AVRO, JSON or PROTOBUF"`
	Level        string                `json:"level" jsonschema:"the level the verdict is judged by"`
	Compatible   bool                  `json:"compatible" jsonschema:"the local verdict under level"`
	Safe         bool                  `json:"safe" jsonschema:"no recorded reader reads a removed or changed field"`
	Verdict      string                `json:"verdict" jsonschema:"both answers in one sentence"`
	Local        *compat.Verdict       `json:"local" jsonschema:"local verdict under every level against the subject's versions"`
	Registry     RegistryVerdict       `json:"registry" jsonschema:"the registry's own verdict"`
	Disagreement string                `json:"disagreement,omitempty" jsonschema:"how the local and registry verdicts differ, when they do"`
	Against      int                   `json:"against_version" jsonschema:"the latest existing version the diff is against"`
	Changes      []compat.Change       `json:"changes" jsonschema:"field-level diff against the latest version"`
	Readers      []lineage.AssetReader `json:"readers" jsonschema:"statements, jobs, models and reports reading a removed or changed field"`
	LineageNote  string                `json:"lineage_note,omitempty" jsonschema:"what the readers answer cannot see (no lineage recorded, edges without column lineage)"`
	SHA256       string                `json:"sha256" jsonschema:"SHA-256 of the schema's canonical form; an approval to register binds to it"`
	Versions     []int                 `json:"versions" jsonschema:"the subject's existing versions compared against (the latest 100, when versions_total is larger)"`
	NoColumnInfo []lineage.EdgeRef     `json:"no_column_lineage,omitempty" jsonschema:"edges followed in full because they carry no column lineage"`
	// The totals count what the lists above name only the first (or the
	// latest) of, when they are cut.
	ChangesTotal  int `json:"changes_total,omitempty" jsonschema:"field-level changes in all, when changes lists only the first 100"`
	ReadersTotal  int `json:"readers_total,omitempty" jsonschema:"readers in all, when readers lists only the first 50 (blast_radius_analysis of schema://<subject> with columns pages every one)"`
	VersionsTotal int `json:"versions_total,omitempty" jsonschema:"existing versions in all, when versions lists only the latest 100"`
}

// What a check's answer lists of each list it counts.
const (
	listedChanges, listedReaders, listedVersions, listedMessages = 100, 50, 100, 20
	readersBudget                                                = 30_000
	readerFields, evidenceChars                                  = 20, 300
	listedReasons                                                = 20
)

// bound cuts the check's lists to their first entries (the latest
// versions), keeping the totals; the verdicts were reached on all of it.
func (c *Check) bound() {
	if n := len(c.Changes); n > listedChanges {
		c.Changes, c.ChangesTotal = c.Changes[:listedChanges:listedChanges], n
	}
	if n := len(c.Versions); n > listedVersions {
		c.Versions, c.VersionsTotal = c.Versions[n-listedVersions:], n
	}
	for i := range c.Readers {
		r := &c.Readers[i]
		r.Fields = r.Fields[:min(len(r.Fields), readerFields)]
		r.Evidence = clipText(r.Evidence, evidenceChars)
	}
	if n := len(c.Readers); n > 0 {
		if head := bound.Head(c.Readers, listedReaders, readersBudget); len(head) < n {
			c.Readers, c.ReadersTotal = head, n
		}
	}
	if len(c.Registry.Messages) > listedMessages {
		c.Registry.Messages = c.Registry.Messages[:listedMessages]
	}
	c.Local = c.Local.Bounded(listedReasons)
	c.NoColumnInfo = c.NoColumnInfo[:min(len(c.NoColumnInfo), listedReasons)]
}

// clipText cuts s to at most n bytes on a rune boundary, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// CheckParams is a proposed schema for a subject, as a person gave it.
type CheckParams struct {
	Subject string
	Schema  string
	// SchemaType is AVRO (the default), JSON or PROTOBUF.
	SchemaType string
	// Level judges the verdict; empty means the subject's level in the
	// registry, else BACKWARD.
	Level string
}

// Checker holds what a compatibility check reads: the store (remembered
// versions), the context graph (readers), the registry client (nil when
// none is configured) and the clock that dates first sightings. Source
// names the reader in the change log.
type Checker struct {
	DB         *store.DB
	Graph      *lineage.Graph
	Registry   *registry.Client
	Configured bool
	Clock      clock.Clock
	Source     string
}

// Proposed is a proposed schema once parsed: a check reads nothing for
// input that does not parse.
type Proposed struct {
	Subject string
	Kind    compat.Kind
	// Level is empty when the caller named none.
	Level  compat.Level
	Schema compat.Schema
	// SHA256 is the hash of the canonical form an approval binds to.
	SHA256 string
}

// ParseProposed checks a proposed schema before anything is read: an empty
// subject, an unknown type or level and a schema that does not parse are
// errors that say what to give instead.
func ParseProposed(in CheckParams) (*Proposed, error) {
	if strings.TrimSpace(in.Subject) == "" {
		return nil, fmt.Errorf("subject is empty; give the Schema Registry subject, e.g. api-usage-value")
	}
	kind, err := compat.ParseKind(in.SchemaType)
	if err != nil {
		return nil, err
	}
	var level compat.Level
	if in.Level != "" {
		if level, err = compat.ParseLevel(in.Level); err != nil {
			return nil, err
		}
	}
	next := compat.Schema{Text: in.Schema}
	if err := compat.Validate(kind, next); err != nil {
		return nil, err
	}
	can, err := compat.Canonicalize(kind, next)
	if err != nil {
		return nil, err
	}
	return &Proposed{Subject: in.Subject, Kind: kind, Level: level, Schema: next, SHA256: can.SHA256}, nil
}

// Check judges a proposed schema two ways before anyone registers it: the
// compatibility rule (the registry's verdict when it answers, and a local
// verdict under every level against the subject's versions, which works
// offline) and who downstream reads a field it removes or changes. A
// subject with no earlier version is compatible: the schema would be its
// first version.
func (k *Checker) Check(ctx context.Context, p *Proposed) (*Check, error) {
	kind, level, next := p.Kind, p.Level, p.Schema
	client := k.Registry
	hist, err := ReadSubjectHistory(ctx, k.DB, client, p.Subject, k.Source, k.Clock)
	if err != nil {
		return nil, err
	}
	versions := hist.Versions
	out := &Check{Subject: p.Subject, SchemaType: string(kind), SHA256: p.SHA256,
		Registry: RegistryVerdict{Configured: k.Configured, Reached: hist.Reached, Note: hist.Note}, Changes: []compat.Change{}, Readers: []lineage.AssetReader{}, Versions: []int{}}
	if hist.Reached && len(versions) > 0 {
		cfg, err := client.Config(ctx, p.Subject)
		if err == nil {
			out.Registry.Level = string(cfg.Level)
			if level == "" {
				level = cfg.Level
			}
		}
		res, err := client.CheckCompatibility(ctx, p.Subject, registry.NewSchema{Schema: next.Text, Kind: kind}, registry.AgainstConfigured)
		if err != nil {
			out.Registry.Reached = false
			out.Registry.Note = fmt.Sprintf("the registry's compatibility check failed: %v", err)
		} else {
			out.Registry.Compatible = res.IsCompatible
			out.Registry.Messages = res.Messages
		}
	}
	if level == "" {
		level = compat.Backward
	}
	prev := make([]compat.Version, 0, len(versions))
	for _, v := range versions {
		prev = append(prev, compat.Version{Version: v.Version, Schema: compat.Schema{Text: v.Schema, References: v.References}})
		out.Versions = append(out.Versions, v.Version)
	}
	verdict, err := compat.Check(kind, next, prev, level)
	if err != nil {
		return nil, err
	}
	out.Local = verdict
	out.Level = string(level)
	out.Compatible = verdict.At(level).Compatible
	if out.Registry.Reached && out.Registry.Level == string(level) {
		out.Disagreement = registry.Disagreement(verdict, &registry.Compatibility{IsCompatible: out.Registry.Compatible, Messages: out.Registry.Messages})
	}
	if n := len(versions); n > 0 {
		latest := versions[n-1]
		out.Against = latest.Version
		changes, err := compat.Diff(kind, compat.Schema{Text: latest.Schema, References: latest.References}, next)
		if err != nil {
			return nil, err
		}
		out.Changes = changes
	}
	readers, lnote, err := k.Graph.AssetReaders(ctx, "schema://"+p.Subject, BreakingFields(out.Changes))
	if err != nil {
		return nil, err
	}
	out.Readers, out.LineageNote = readers, lnote
	out.Safe = len(readers) == 0 && lnote == ""
	out.Verdict = verdictSentence(out)
	if len(versions) == 0 {
		// A first version has nothing to be incompatible with.
		out.Compatible, out.Registry.Compatible = true, out.Registry.Reached
		out.Verdict = fmt.Sprintf("compatible: no earlier version of %s (%s)", p.Subject, hist.Note)
	}
	out.bound()
	return out, nil
}

// BreakingFields are the top-level names of fields whose old readers stop
// getting what they read: removed, retyped, renamed or newly required.
func BreakingFields(changes []compat.Change) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range changes {
		switch c.Kind {
		case "removed", "type_changed", "renamed", "optional_to_required", "default_changed":
		default:
			continue
		}
		p := c.Path
		if c.Kind == "renamed" && c.OldPath != "" {
			p = c.OldPath
		}
		name := strings.FieldsFunc(p, func(r rune) bool { return r == '.' || r == '[' || r == '{' })
		if len(name) == 0 || seen[name[0]] {
			continue
		}
		seen[name[0]] = true
		out = append(out, name[0])
	}
	sort.Strings(out)
	return out
}

func verdictSentence(o *Check) string {
	rule := fmt.Sprintf("compatible under %s", o.Level)
	if !o.Compatible {
		rule = fmt.Sprintf("incompatible under %s", o.Level)
	}
	switch {
	case len(o.Readers) > 0:
		r := o.Readers[0]
		how := "reads " + strings.Join(r.Fields, ", ")
		if r.Evidence != "" {
			how = strings.TrimPrefix(r.Evidence, "recorded SQL: ")
		}
		more := ""
		if len(o.Readers) > 1 {
			more = fmt.Sprintf(" (and %d more readers)", len(o.Readers)-1)
		}
		return fmt.Sprintf("%s, but unsafe: %s %s%s", rule, r.Asset, how, more)
	case o.LineageNote != "":
		return fmt.Sprintf("%s; safety unknown: %s", rule, o.LineageNote)
	case len(BreakingFields(o.Changes)) == 0:
		return fmt.Sprintf("%s, and safe: no field readers depend on is removed or changed", rule)
	default:
		return fmt.Sprintf("%s, and no recorded reader reads %s", rule, strings.Join(BreakingFields(o.Changes), ", "))
	}
}
