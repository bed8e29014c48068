package mcpserver

import (
	"fmt"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// Limits on string inputs, enforced by the input schema so the SDK rejects
// an oversized argument before any handler (or SQLite, or a suggestion
// search) sees it. Every string property of every tool gets a maximum:
// its own if the tool set one, else the one its name implies here, else
// MaxID. The limit is also written into the property's description, so a
// model knows it before it hits it.
const (
	// MaxID bounds ids, names, enums, timestamps and durations.
	MaxID = 512
	// MaxText bounds free text: summaries, notes, descriptions, paths.
	MaxText = 4096
	// MaxQuery bounds a search query: a few words.
	MaxQuery = 256
	// MaxSQL bounds a SQL statement or predicate.
	MaxSQL = 64 << 10
	// MaxSchemaText bounds an Avro, JSON Schema or Protobuf schema text.
	MaxSchemaText = 1 << 20
	// MaxDocument bounds a whole document passed inline (a dbt manifest,
	// OpenLineage events); larger ones are read from a file path.
	MaxDocument = 16 << 20
)

// Limits on list and map inputs, enforced the same way: a list without
// its own maximum gets MaxListItems, a map (an object of free keys: a
// run's conf, a connector config) MaxMapEntries, and the description says
// so. A tool whose domain caps a list lower states that cap (Items).
const (
	MaxListItems  = 1000
	MaxMapEntries = 1000
)

// maxLengthByName gives the maximum for a property by its name; a key
// "tool.property" applies to one tool only and wins over the bare name.
var maxLengthByName = map[string]int{
	"query":       MaxQuery,
	"sql":         MaxSQL,
	"description": MaxText,
	"detail":      MaxText,
	"summary":     MaxText,
	"note":        MaxText,
	"why":         MaxText,
	"what":        MaxText,
	"how":         MaxText,
	"undo":        MaxText,
	"title":       MaxText,
	"url":         MaxText,
	"path":        MaxText,
	"cursor":      1024,
	"schema":      MaxSchemaText,
	"manifest":    MaxDocument,
	"events":      MaxDocument,
	// list_tables' schema is a warehouse schema's name, not schema text.
	"list_tables.schema": MaxID,
}

// ApplyLimits gives every string property of an input schema (nested
// objects, list items and map values included) a maximum length and says
// it in the description; a "limit" property gets the paging range 1..500.
// Bounds already set are kept, so a tool can set its own before this runs.
func ApplyLimits(tool string, s *jsonschema.Schema) {
	walkLimits(tool, "", s)
}

func walkLimits(tool, name string, s *jsonschema.Schema) {
	if s == nil {
		return
	}
	switch {
	case hasType(s, "string"):
		if s.MaxLength == nil {
			n := MaxID
			if v, ok := maxLengthByName[name]; ok {
				n = v
			}
			if v, ok := maxLengthByName[tool+"."+name]; ok {
				n = v
			}
			s.MaxLength = &n
		}
		if len(s.Enum) == 0 && !strings.Contains(s.Description, "characters") {
			s.Description = addSentence(s.Description, fmt.Sprintf("at most %s characters", count(*s.MaxLength)))
		}
	case hasType(s, "integer") && name == "limit":
		if s.Minimum == nil {
			s.Minimum = ptr(1.0)
		}
		if s.Maximum == nil {
			s.Maximum = ptr(500.0)
		}
	case hasType(s, "array"):
		if s.MaxItems == nil {
			s.MaxItems = ptr(MaxListItems)
		}
		if !strings.Contains(s.Description, "at most") {
			s.Description = addSentence(s.Description, fmt.Sprintf("at most %d items", *s.MaxItems))
		}
	case hasType(s, "object") && isMap(s):
		if s.MaxProperties == nil {
			s.MaxProperties = ptr(MaxMapEntries)
		}
		if !strings.Contains(s.Description, "at most") {
			s.Description = addSentence(s.Description, fmt.Sprintf("at most %d entries", *s.MaxProperties))
		}
	}
	for prop, p := range s.Properties {
		walkLimits(tool, prop, p)
	}
	// List items and map values take the list's or map's name, so
	// "assets": [string] is bounded like "asset".
	walkLimits(tool, strings.TrimSuffix(name, "s"), s.Items)
	if s.AdditionalProperties != nil {
		walkLimits(tool, name, s.AdditionalProperties)
	}
}

// isMap: s is an object whose keys are free (additionalProperties is a
// schema, not false), as a run's conf or a connector config is.
func isMap(s *jsonschema.Schema) bool {
	return s.AdditionalProperties != nil && s.AdditionalProperties.Not == nil
}

func hasType(s *jsonschema.Schema, t string) bool {
	if s.Type == t {
		return true
	}
	for _, x := range s.Types {
		if x == t {
			return true
		}
	}
	return false
}

// count writes a length the way a person reads it: 512, 4096, 64K, 16M.
func count(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 8<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprint(n)
}

func addSentence(desc, s string) string {
	desc = strings.TrimSpace(desc)
	if desc == "" {
		return s
	}
	return desc + "; " + s
}

func ptr[T any](v T) *T { return &v }

// MaxLength sets one property's maximum length (prop may be a dotted path
// into nested objects and list items, e.g. "proposals.why"). Use it in an
// InputSchema patch for a bound the name table does not imply.
func MaxLength(s *jsonschema.Schema, prop string, n int) {
	lookup(s, prop).MaxLength = &n
}

// Range sets the inclusive bounds of a numeric property, so an out-of-range
// number is rejected with the property named before the handler runs.
func Range(s *jsonschema.Schema, prop string, min, max float64) {
	p := lookup(s, prop)
	p.Minimum, p.Maximum = &min, &max
}

// Items sets the bounds of a list property (prop as for MaxLength): at
// least min items (when min > 0) and at most max, so a longer list is
// refused with the argument named before the handler runs. Use it to
// advertise the cap a domain enforces.
func Items(s *jsonschema.Schema, prop string, min, max int) {
	p := lookup(s, prop)
	if min > 0 {
		p.MinItems = &min
	}
	p.MaxItems = &max
}

// Entries sets the most entries a map property may have.
func Entries(s *jsonschema.Schema, prop string, max int) {
	lookup(s, prop).MaxProperties = &max
}

func lookup(s *jsonschema.Schema, path string) *jsonschema.Schema {
	cur := s
	for _, part := range strings.Split(path, ".") {
		if cur.Items != nil && cur.Properties == nil {
			cur = cur.Items
		}
		p := cur.Properties[part]
		if p == nil {
			panic("no property " + path)
		}
		cur = p
	}
	return cur
}

// lazyInput is the schema a tool is registered with: its own patched
// schema, or the one inferred from In, with ApplyLimits applied, built
// once on first need (the tool's first call, or registration when the
// schema is not in schemas_gen.go).
func lazyInput[In any](tool string, stated *Schema) func() *jsonschema.Schema {
	return sync.OnceValue(func() *jsonschema.Schema {
		var s *jsonschema.Schema
		if stated == nil {
			s = inferSchema[In]()
		} else {
			// Built afresh: registering a tool twice (as tests do) never
			// shares a schema between servers.
			s = stated.Build()
		}
		ApplyLimits(tool, s)
		return s
	})
}
