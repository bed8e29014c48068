// Package compat judges schema evolution offline, the way Confluent Schema
// Registry does: whether a new AVRO, JSON Schema or PROTOBUF schema is
// compatible with a subject's earlier versions under every compatibility
// level, which fields a change touches, and a canonical hash that binds an
// approval to exactly one schema.
//
// Everything here is a pure function of schema text, so a verdict can be given
// when no registry is reachable and compared with the registry's own verdict
// when one is.
package compat

import (
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/suggest"
)

// Kind is a schema format, spelled as Schema Registry's schemaType.
type Kind string

// The schema formats Schema Registry knows.
const (
	Avro     Kind = "AVRO"
	JSON     Kind = "JSON"
	Protobuf Kind = "PROTOBUF"
)

// Kinds lists every supported format.
var Kinds = []Kind{Avro, JSON, Protobuf}

// ParseKind reads a schema type as a tool or the registry spells it. The
// registry omits schemaType for AVRO, so the empty string means AVRO.
func ParseKind(s string) (Kind, error) {
	if k, ok := suggest.Pick(s, Kinds, kindAliases); ok {
		return k, nil
	}
	return "", fmt.Errorf("unknown schema type %q; valid: %s", s, strings.Join(suggest.Names(Kinds), ", "))
}

// kindAliases are the other spellings ParseKind takes, lower-cased.
var kindAliases = map[string]Kind{"": Avro, "jsonschema": JSON, "json_schema": JSON, "proto": Protobuf, "proto3": Protobuf}

// Level is a Schema Registry compatibility level.
type Level string

// Compatibility levels with Confluent's semantics: BACKWARD means the new
// schema can read data written with the latest version, FORWARD that the
// latest version can read data written with the new schema, FULL both; the
// _TRANSITIVE forms check every earlier version instead of the latest only.
const (
	Backward           Level = "BACKWARD"
	BackwardTransitive Level = "BACKWARD_TRANSITIVE"
	Forward            Level = "FORWARD"
	ForwardTransitive  Level = "FORWARD_TRANSITIVE"
	Full               Level = "FULL"
	FullTransitive     Level = "FULL_TRANSITIVE"
	None               Level = "NONE"
)

// Levels lists every level in the order a verdict table shows them.
var Levels = []Level{Backward, BackwardTransitive, Forward, ForwardTransitive, Full, FullTransitive, None}

// ParseLevel reads a compatibility level case-insensitively; the empty
// string is the registry's default, BACKWARD.
func ParseLevel(s string) (Level, error) {
	if l, ok := suggest.Pick(s, Levels, map[string]Level{"": Backward}); ok {
		return l, nil
	}
	names := suggest.Names(Levels)
	return "", fmt.Errorf("unknown compatibility level %q; valid: %s; closest: %s",
		s, strings.Join(names, ", "), strings.Join(suggest.Closest(strings.TrimSpace(s), names, 2), ", "))
}

// Transitive reports whether the level checks every earlier version.
func (l Level) Transitive() bool { return strings.HasSuffix(string(l), "_TRANSITIVE") }

func (l Level) backward() bool { return strings.HasPrefix(string(l), "BACKWARD") || l.full() }
func (l Level) forward() bool  { return strings.HasPrefix(string(l), "FORWARD") || l.full() }
func (l Level) full() bool     { return strings.HasPrefix(string(l), "FULL") }

// Schema is one schema text with the named types it refers to. References
// are the texts of referenced schemas (Avro named types defined in other
// subjects, such as a record used as a field type); they are parsed first,
// in order, so the schema can use their names.
type Schema struct {
	Text       string   `json:"schema" jsonschema:"the schema text (Avro JSON, JSON Schema, or a .proto file)"`
	References []string `json:"references,omitempty" jsonschema:"texts of referenced schemas, parsed before the schema in this order"`
}

// Version is an earlier schema of a subject with its registry version number.
type Version struct {
	Version int `json:"version" jsonschema:"the subject version number"`
	Schema
}

// Numbered turns schema texts, oldest first, into versions 1..n.
func Numbered(texts ...string) []Version {
	out := make([]Version, len(texts))
	for i, t := range texts {
		out[i] = Version{Version: i + 1, Schema: Schema{Text: t}}
	}
	return out
}

// Direction says which schema reads and which wrote.
type Direction string

const (
	// ReadsOld: the new schema reads data written with an earlier version
	// (the check BACKWARD makes).
	ReadsOld Direction = "new_reads_old"
	// OldReads: an earlier version reads data written with the new schema
	// (the check FORWARD makes).
	OldReads Direction = "old_reads_new"
)

// Reason is one incompatibility: which field breaks, against which version,
// in which direction.
type Reason struct {
	Version   int       `json:"version" jsonschema:"the earlier version this reason breaks against"`
	Direction Direction `json:"direction" jsonschema:"new_reads_old (BACKWARD) or old_reads_new (FORWARD)"`
	// Type is the Confluent error type, e.g. READER_FIELD_MISSING_DEFAULT_VALUE
	// for Avro or PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL for JSON Schema.
	Type string `json:"type" jsonschema:"Confluent error type, e.g. READER_FIELD_MISSING_DEFAULT_VALUE"`
	// Path is the field path (nested records as a.b, array items as a[]);
	// empty for the schema's top-level type. Protobuf paths start with the
	// message's name (Message.field), since any message may be affected.
	Path string `json:"path,omitempty" jsonschema:"field path, nested fields as a.b; empty for the top-level type"`
	// Location points into the reading schema's JSON (e.g. /fields/3/type)
	// the way Confluent's messages do; empty where it does not apply.
	Location string `json:"location,omitempty" jsonschema:"location in the reading schema, e.g. /fields/3/type"`
	Message  string `json:"message" jsonschema:"readable explanation"`
}

// String renders the reason for a person; the message already names which
// schema reads and which wrote.
func (r Reason) String() string {
	return fmt.Sprintf("%s (%s)", r.Message, r.Type)
}

// LevelVerdict is the answer under one compatibility level.
type LevelVerdict struct {
	Level      Level    `json:"level"`
	Compatible bool     `json:"compatible"`
	Checked    []int    `json:"checked_versions" jsonschema:"the earlier versions this level compares against (the latest ones, when checked_total is larger)"`
	Reasons    []Reason `json:"reasons,omitempty"`
	// The totals are set when Bounded cut the lists.
	CheckedTotal int `json:"checked_total,omitempty" jsonschema:"earlier versions this level compares against, in all, when checked_versions lists only the latest"`
	ReasonsTotal int `json:"reasons_total,omitempty" jsonschema:"reasons in all, when reasons lists only the first"`
}

// Bounded is the verdict as an answer shows it: per level the latest
// versions checked and the first reasons, each at most n, with the
// totals when cut. A subject with hundreds of versions and a schema of
// thousands of fields gives every transitive level a reason per field
// and version.
func (v *Verdict) Bounded(n int) *Verdict {
	if v == nil {
		return nil
	}
	out := *v
	if k := len(out.Reasons); k > n {
		out.Reasons, out.ReasonsTotal = out.Reasons[:n:n], k
	}
	out.Levels = make([]LevelVerdict, len(v.Levels))
	for i, lv := range v.Levels {
		if k := len(lv.Checked); k > n {
			lv.Checked, lv.CheckedTotal = lv.Checked[k-n:], k
		}
		if k := len(lv.Reasons); k > n {
			lv.Reasons, lv.ReasonsTotal = lv.Reasons[:n:n], k
		}
		out.Levels[i] = lv
	}
	return &out
}

// Verdict is a compatibility check of a new schema against a subject's
// versions, under the requested level and, for a full table, every level.
type Verdict struct {
	Kind       Kind     `json:"schema_type"`
	Level      Level    `json:"level" jsonschema:"the level asked about"`
	Compatible bool     `json:"compatible" jsonschema:"whether the schema is compatible under level"`
	Reasons    []Reason `json:"reasons,omitempty" jsonschema:"why not, under level"`
	// ReasonsTotal is set when Bounded cut Reasons.
	ReasonsTotal int            `json:"reasons_total,omitempty" jsonschema:"reasons in all, when reasons lists only the first"`
	Latest       int            `json:"latest_version,omitempty" jsonschema:"the latest earlier version; 0 when the subject has none"`
	Levels       []LevelVerdict `json:"levels" jsonschema:"the verdict under every compatibility level"`
}

// At returns the verdict under one level.
func (v *Verdict) At(l Level) LevelVerdict {
	for _, lv := range v.Levels {
		if lv.Level == l {
			return lv
		}
	}
	return LevelVerdict{Level: l}
}

// Summary is a one-line answer for a person.
func (v *Verdict) Summary() string {
	if v.Compatible {
		if v.Latest == 0 {
			return fmt.Sprintf("%s: compatible (first version of the subject)", v.Level)
		}
		return fmt.Sprintf("%s: compatible", v.Level)
	}
	parts := make([]string, 0, len(v.Reasons))
	for _, r := range v.Reasons {
		parts = append(parts, r.String())
	}
	return fmt.Sprintf("%s: incompatible: %s", v.Level, strings.Join(parts, "; "))
}

// Check judges next against previous (oldest first) under level and, in the
// same pass, under every other level. Each earlier version is compared once
// in each direction and the levels are derived from those comparisons. An
// unparseable schema (new or earlier) is an error naming which one, with the
// parser's line and column where it gives them.
func Check(kind Kind, next Schema, previous []Version, level Level) (*Verdict, error) {
	f, kind, err := formatOf(kind)
	if err != nil {
		return nil, err
	}
	level, err = ParseLevel(string(level))
	if err != nil {
		return nil, err
	}
	n, err := f.parse(next)
	if err != nil {
		return nil, withWhich(err, "new schema")
	}
	type pair struct{ back, fwd []Reason }
	results := make([]pair, len(previous))
	for i, pv := range previous {
		p, err := f.parse(pv.Schema)
		if err != nil {
			return nil, withWhich(err, fmt.Sprintf("version %d", pv.Version))
		}
		results[i].back = stamp(f.check(n, p), pv.Version, ReadsOld)
		results[i].fwd = stamp(f.check(p, n), pv.Version, OldReads)
	}
	v := &Verdict{Kind: kind, Level: level}
	if len(previous) > 0 {
		v.Latest = previous[len(previous)-1].Version
	}
	for _, l := range Levels {
		lv := LevelVerdict{Level: l, Checked: []int{}, Compatible: true}
		if l != None && len(previous) > 0 {
			from := len(previous) - 1
			if l.Transitive() {
				from = 0
			}
			// Newest first, so the first reason is about the version a
			// person is most likely to be comparing with.
			for i := len(previous) - 1; i >= from; i-- {
				lv.Checked = append(lv.Checked, previous[i].Version)
				if l.backward() {
					lv.Reasons = append(lv.Reasons, results[i].back...)
				}
				if l.forward() {
					lv.Reasons = append(lv.Reasons, results[i].fwd...)
				}
			}
			lv.Compatible = len(lv.Reasons) == 0
		}
		v.Levels = append(v.Levels, lv)
		if l == level {
			v.Compatible, v.Reasons = lv.Compatible, lv.Reasons
		}
	}
	return v, nil
}

// Validate parses a schema and reports the parser's complaint, if any.
func Validate(kind Kind, s Schema) error {
	f, _, err := formatOf(kind)
	if err != nil {
		return err
	}
	_, err = f.parse(s)
	return err
}

// stamp fills in the version and direction and names the two schemas in
// each message: format checks say {reader} and {writer} because they do not
// know which of the two is the new one.
func stamp(rs []Reason, version int, d Direction) []Reason {
	old := fmt.Sprintf("version %d", version)
	rep := strings.NewReplacer("{reader}", "the new schema", "{writer}", old)
	if d == OldReads {
		rep = strings.NewReplacer("{reader}", old, "{writer}", "the new schema")
	}
	for i := range rs {
		rs[i].Version, rs[i].Direction = version, d
		rs[i].Message = rep.Replace(rs[i].Message)
	}
	return rs
}

// format is what each schema kind provides. check(reader, writer) lists why
// reader cannot read data written with writer: for Avro by schema
// resolution, for JSON Schema and Protobuf by Confluent's rule that every
// difference from writer (the original) to reader (the update) must be one
// of the compatible kinds.
type format interface {
	parse(s Schema) (any, error)
	check(reader, writer any) []Reason
	fields(p any) (root string, fs []field)
	canonical(p any) string
}

// formatOf reads the kind as ParseKind does (empty is AVRO, case does not
// matter) and returns its format and canonical name.
func formatOf(k Kind) (format, Kind, error) {
	k, err := ParseKind(string(k))
	if err != nil {
		return nil, "", err
	}
	switch k {
	case JSON:
		return jsonFormat{}, k, nil
	case Protobuf:
		return protoFormat{}, k, nil
	}
	return avroFormat{}, Avro, nil
}
