package mcpserver

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// OutputSchemaBudget bounds, in characters of compact JSON, the output
// schema a tool advertises in tools/list.
//
// Why: the schema inferred from a Go answer type repeats every nested
// struct in full with its field descriptions (an incident inside
// get_incident, close_incident and diagnose_incident alike), which made
// dw-incidents' tools/list 116k characters. A client pays for tools/list on
// every connect, and some put it in the model's context. The model itself
// reads the answer, not the output schema (Claude Code, for one, drops
// outputSchema before the model and hands it structuredContent), while
// clients use the schema to check structuredContent. So the advertised
// schema is the answer's shape cut to a budget: whole when it fits,
// otherwise detail is dropped from the deepest level up (see outline), and
// the top-level field names and JSON types always stay. A cut schema is
// only ever looser than the full one, so every answer still conforms.
const OutputSchemaBudget = 800

// outputSchema is the schema advertised (and checked by the SDK) for a
// tool answering Out.
func outputSchema[Out any]() *jsonschema.Schema {
	full, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(fmt.Sprintf("output schema for %T: %v", *new(Out), err))
	}
	return outline(full, OutputSchemaBudget)
}

// outline returns the most detailed cut of s that fits budget: first
// nested descriptions go, deepest first, then nested structure, then the
// top-level descriptions. Keywords that only constrain (required,
// additionalProperties: false, bounds) are never advertised for an
// answer: they describe nothing a reader needs and a client that checks
// them gains nothing over the types.
//
// The cuts are tried from the least detailed up, and the last one that fits
// is kept: each cut holds everything of the next less detailed one, so its
// size only grows, and this way no cut much over the budget is copied or
// marshalled. Trying from the full schema down marshalled a deep answer's
// whole schema (116k characters) again at every level, which was most of
// an agent's start-up CPU (dw-incidents: about 85 ms of its tools/list).
func outline(s *jsonschema.Schema, budget int) *jsonschema.Schema {
	best := cut(s, 0, 1, 0) // the top-level names and types, whatever they cost
	deepest := depth(s, 0)
	for level := 1; level <= deepest; level++ {
		for _, structure := range []int{level, level + 1} {
			c := cut(s, 0, structure, level)
			if size(c) > budget {
				return best
			}
			best = c
		}
	}
	return best
}

// depth is how many levels of properties s nests (the root's own
// properties are level 1; list items and map values are at their list's
// level).
func depth(s *jsonschema.Schema, at int) int {
	if s == nil {
		return at
	}
	d := at
	for _, p := range s.Properties {
		d = max(d, depth(p, at+1))
	}
	d = max(d, depth(s.Items, at))
	if s.AdditionalProperties != nil {
		d = max(d, depth(s.AdditionalProperties, at))
	}
	return d
}

// cut copies the describing part of s at level at: properties only above
// level structure, descriptions only up to level described.
func cut(s *jsonschema.Schema, at, structure, described int) *jsonschema.Schema {
	if s == nil {
		return nil
	}
	out := &jsonschema.Schema{Type: s.Type, Types: s.Types, Enum: s.Enum}
	if at <= described {
		out.Description = s.Description
	}
	if len(s.Properties) > 0 && at < structure {
		out.Properties = make(map[string]*jsonschema.Schema, len(s.Properties))
		for name, p := range s.Properties {
			out.Properties[name] = cut(p, at+1, structure, described)
		}
		out.PropertyOrder = s.PropertyOrder
	}
	if s.Items != nil {
		if it := cut(s.Items, at, structure, described); !emptySchema(it) {
			out.Items = it
		}
	}
	// A map's values: only a schema that says something (true/false or an
	// empty schema adds nothing to a description of the answer).
	if ap := s.AdditionalProperties; ap != nil && (ap.Type != "" || len(ap.Types) > 0 || len(ap.Properties) > 0) {
		if c := cut(ap, at, structure, described); !emptySchema(c) {
			out.AdditionalProperties = c
		}
	}
	return out
}

func emptySchema(s *jsonschema.Schema) bool {
	return s.Type == "" && len(s.Types) == 0 && s.Description == "" && len(s.Enum) == 0 &&
		len(s.Properties) == 0 && s.Items == nil && s.AdditionalProperties == nil
}

// size is the length of s in compact JSON, as json.Marshal writes it,
// for the keywords cut keeps, counted without building the JSON: outline
// measures every cut of every tool's answer at start, and marshalling
// them was a fifth of an agent's registration CPU.
func size(s *jsonschema.Schema) int {
	n, fields := 0, 0
	field := func(key string, v int) { n += len(key) + 3 + v; fields++ } // "key":v
	switch {
	case s.Type != "":
		field("type", jsonLen(s.Type))
	case s.Types != nil:
		field("type", stringsLen(s.Types))
	}
	if s.Properties != nil {
		props := 2
		for name, p := range s.Properties {
			props += jsonLen(name) + 1 + size(p)
		}
		if len(s.Properties) > 1 {
			props += len(s.Properties) - 1
		}
		field("properties", props)
	}
	if s.Items != nil {
		field("items", size(s.Items))
	}
	if s.Description != "" {
		field("description", jsonLen(s.Description))
	}
	if len(s.Enum) > 0 {
		b, err := json.Marshal(s.Enum)
		if err != nil {
			return 1 << 30
		}
		field("enum", len(b))
	}
	if s.AdditionalProperties != nil {
		field("additionalProperties", size(s.AdditionalProperties))
	}
	if fields == 0 {
		return len("true") // the library writes {} as true
	}
	return n + 2 + fields - 1
}

// jsonLen is the length of v as a JSON string: json.Marshal's escaping
// (HTML characters and U+2028/9 too) is only worked out for the rare
// string that needs it.
func jsonLen(v string) int {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= 0x80 {
			b, _ := json.Marshal(v)
			return len(b)
		}
	}
	return len(v) + 2
}

func stringsLen(vs []string) int {
	n := 2
	for i, v := range vs {
		if i > 0 {
			n++
		}
		n += jsonLen(v)
	}
	return n
}
