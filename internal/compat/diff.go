package compat

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// field is one field of a flattened schema, the same shape for every kind.
type field struct {
	Path, Parent, Name string
	Type               string
	Default            string // JSON text of the default
	HasDefault         bool
	Optional           bool // a reader can do without it (default, or not required)
	Aliases            []string
	Number             int // Protobuf field number; 0 elsewhere
	Pos                int
}

// ChangeKind classifies one field-level difference.
type ChangeKind string

// The field-level differences Diff reports.
const (
	Removed            ChangeKind = "removed"
	Added              ChangeKind = "added"
	TypeChanged        ChangeKind = "type_changed"
	DefaultChanged     ChangeKind = "default_changed"
	OptionalToRequired ChangeKind = "optional_to_required"
	RequiredToOptional ChangeKind = "required_to_optional"
	// Renamed is a rename the schema itself declares: an Avro field alias
	// naming the old field, or a Protobuf field keeping its number.
	Renamed ChangeKind = "renamed"
	// TypeNameChanged is a change of the top-level record or message name.
	TypeNameChanged ChangeKind = "type_name_changed"
)

// Change is one field-level difference between two versions of a schema.
type Change struct {
	Kind ChangeKind `json:"kind" jsonschema:"removed, added, type_changed, default_changed, optional_to_required, required_to_optional, renamed or type_name_changed"`
	// Path is the field path in the new schema (in the old one for a
	// removed field): nested fields as a.b, array items as a[], map values
	// as a{}. Empty for the top-level type.
	Path string `json:"path" jsonschema:"field path (a.b for nested fields); for removed fields, the path in the old schema"`
	// OldPath is the field's path in the old schema, for renamed fields.
	OldPath string `json:"old_path,omitempty" jsonschema:"the old path of a renamed field"`
	Old     string `json:"old,omitempty" jsonschema:"old type, default or name"`
	New     string `json:"new,omitempty" jsonschema:"new type, default or name"`
	// Hint is a guess, never a finding: a removed and an added field with
	// the same type under the same parent may be one field renamed without
	// an alias, which readers of the old name do not follow.
	Hint string `json:"hint,omitempty" jsonschema:"a guess such as a likely rename; not a finding"`
}

// String renders the change for a person.
func (c Change) String() string {
	var s string
	switch c.Kind {
	case Renamed:
		s = fmt.Sprintf("renamed %s -> %s", c.OldPath, c.Path)
	case Removed, Added:
		s = fmt.Sprintf("%s %s (%s)", c.Kind, c.Path, nonEmpty(c.Old, c.New))
	default:
		s = fmt.Sprintf("%s %s: %s -> %s", c.Kind, nonEmpty(c.Path, "(top level)"), c.Old, c.New)
	}
	if c.Hint != "" {
		s += "; hint: " + c.Hint
	}
	return s
}

// Diff lists the field-level differences from old to new, in schema order:
// changes to old fields first, then added fields. A removed or added
// record reports its own path only, not each of its fields.
func Diff(kind Kind, old, new Schema) ([]Change, error) {
	f, _, err := formatOf(kind)
	if err != nil {
		return nil, err
	}
	po, err := f.parse(old)
	if err != nil {
		return nil, withWhich(err, "old schema")
	}
	pn, err := f.parse(new)
	if err != nil {
		return nil, withWhich(err, "new schema")
	}
	oroot, ofs := f.fields(po)
	nroot, nfs := f.fields(pn)
	return diffFields(oroot, nroot, dedupe(ofs), dedupe(nfs)), nil
}

func dedupe(fs []field) []field {
	seen := map[string]bool{}
	out := fs[:0:0]
	for _, f := range fs {
		if !seen[f.Path] {
			seen[f.Path] = true
			out = append(out, f)
		}
	}
	return out
}

// under reports whether path lies inside one of the given paths.
func under(path string, parents map[string]bool) bool {
	for p := range parents {
		if strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[]") || strings.HasPrefix(path, p+"{}") {
			return true
		}
	}
	return false
}

func diffFields(oroot, nroot string, ofs, nfs []field) []Change {
	var out []Change
	if oroot != nroot {
		out = append(out, Change{Kind: TypeNameChanged, Old: oroot, New: nroot})
	}
	newBy := map[string]field{}
	for _, f := range nfs {
		newBy[f.Path] = f
	}
	oldBy := map[string]bool{}
	for _, f := range ofs {
		oldBy[f.Path] = true
	}
	// renames maps an old path to its new path, for fields whose rename the
	// schema declares; descendants follow their renamed parent.
	renames := map[string]string{}
	translate := func(p string) string {
		best := ""
		for o := range renames {
			if (p == o || strings.HasPrefix(p, o+".") || strings.HasPrefix(p, o+"[]") || strings.HasPrefix(p, o+"{}")) && len(o) > len(best) {
				best = o
			}
		}
		if best == "" {
			return p
		}
		return renames[best] + strings.TrimPrefix(p, best)
	}
	matchedNew := map[string]bool{}
	removed, added := map[string]bool{}, map[string]bool{}
	var removedIdx []int
	for _, of := range ofs {
		np := translate(of.Path)
		nf, ok := newBy[np]
		if !ok {
			parent := translate(of.Parent)
			for _, cand := range nfs {
				if cand.Parent != parent || oldBy[cand.Path] || matchedNew[cand.Path] {
					continue
				}
				if slices.Contains(cand.Aliases, of.Name) || (of.Number > 0 && cand.Number == of.Number) {
					nf, ok = cand, true
					renames[of.Path] = cand.Path
					out = append(out, Change{Kind: Renamed, Path: cand.Path, OldPath: of.Path, Old: of.Name, New: cand.Name})
					break
				}
			}
		}
		if !ok {
			removed[of.Path] = true
			if !under(of.Path, removed) {
				out = append(out, Change{Kind: Removed, Path: of.Path, Old: of.Type})
				removedIdx = append(removedIdx, len(out)-1)
			}
			continue
		}
		matchedNew[nf.Path] = true
		if of.Type != nf.Type {
			out = append(out, Change{Kind: TypeChanged, Path: nf.Path, Old: of.Type, New: nf.Type})
		}
		if of.HasDefault && nf.HasDefault && of.Default != nf.Default {
			out = append(out, Change{Kind: DefaultChanged, Path: nf.Path, Old: of.Default, New: nf.Default})
		}
		if of.Optional && !nf.Optional {
			out = append(out, Change{Kind: OptionalToRequired, Path: nf.Path, Old: describeOptional(of), New: describeOptional(nf)})
		}
		if !of.Optional && nf.Optional {
			out = append(out, Change{Kind: RequiredToOptional, Path: nf.Path, Old: describeOptional(of), New: describeOptional(nf)})
		}
	}
	var addedIdx []int
	var addedFields []field
	for _, nf := range nfs {
		if matchedNew[nf.Path] {
			continue
		}
		added[nf.Path] = true
		if under(nf.Path, added) {
			continue
		}
		out = append(out, Change{Kind: Added, Path: nf.Path, New: nf.Type})
		addedIdx = append(addedIdx, len(out)-1)
		addedFields = append(addedFields, nf)
	}
	hintRenames(out, ofs, removedIdx, addedIdx, addedFields, translate)
	return out
}

func describeOptional(f field) string {
	switch {
	case f.HasDefault:
		return "default " + f.Default
	case f.Optional:
		return "optional"
	}
	return "required"
}

// hintRenames pairs a removed field with an added one of the same type
// under the same parent, preferring the same position, when the pairing is
// unambiguous.
func hintRenames(out []Change, ofs []field, removedIdx, addedIdx []int, addedFields []field, translate func(string) string) {
	oldField := map[string]field{}
	for _, f := range ofs {
		oldField[f.Path] = f
	}
	taken := map[int]bool{}
	for _, ri := range removedIdx {
		of := oldField[out[ri].Path]
		var cands []int
		for k, af := range addedFields {
			if !taken[k] && af.Parent == translate(of.Parent) && af.Type == of.Type {
				cands = append(cands, k)
			}
		}
		if len(cands) > 1 {
			var same []int
			for _, k := range cands {
				if addedFields[k].Pos == of.Pos {
					same = append(same, k)
				}
			}
			cands = same
		}
		if len(cands) != 1 {
			continue
		}
		k := cands[0]
		taken[k] = true
		af := addedFields[k]
		out[ri].Hint = fmt.Sprintf("likely renamed to %s (same type %s), but nothing in the schema links the two names, so readers of %s no longer get its values", af.Path, af.Type, of.Path)
		out[addedIdx[k]].Hint = fmt.Sprintf("likely the new name of %s (same type %s); readers must switch to it explicitly", of.Path, of.Type)
	}
}

// Canonical is a schema's canonical text and its SHA-256, so an approval can
// name exactly one schema however it was spelled.
type Canonical struct {
	Kind Kind `json:"schema_type"`
	// Form is Avro's parsing canonical form as hamba/avro writes it
	// (referenced named types inlined, logical types kept), JSON Schema as
	// JSON with sorted keys and no whitespace, or Protobuf as its token
	// stream without comments or layout.
	Form   string `json:"canonical"`
	SHA256 string `json:"sha256" jsonschema:"hex SHA-256 of the canonical form"`
}

// Canonicalize parses the schema and returns its canonical form and hash.
// For Avro the hash equals hamba's Fingerprint of the parsed schema.
func Canonicalize(kind Kind, s Schema) (*Canonical, error) {
	f, kind, err := formatOf(kind)
	if err != nil {
		return nil, err
	}
	p, err := f.parse(s)
	if err != nil {
		return nil, err
	}
	form := f.canonical(p)
	sum := sha256.Sum256([]byte(form))
	return &Canonical{Kind: kind, Form: form, SHA256: hex.EncodeToString(sum[:])}, nil
}
