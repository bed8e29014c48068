package lineage

import (
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// Every params and result type becomes a tool's input or output schema, so
// each must turn into a JSON schema with every property described.
func TestToolTypesHaveSchemas(t *testing.T) {
	for name, f := range map[string]func() (*jsonschema.Schema, error){
		"BlastParams":   func() (*jsonschema.Schema, error) { return jsonschema.For[BlastParams](nil) },
		"BlastResult":   func() (*jsonschema.Schema, error) { return jsonschema.For[BlastResult](nil) },
		"TraceParams":   func() (*jsonschema.Schema, error) { return jsonschema.For[TraceParams](nil) },
		"TraceResult":   func() (*jsonschema.Schema, error) { return jsonschema.For[TraceResult](nil) },
		"LineageParams": func() (*jsonschema.Schema, error) { return jsonschema.For[LineageParams](nil) },
		"LineageResult": func() (*jsonschema.Schema, error) { return jsonschema.For[LineageResult](nil) },
		"SearchParams":  func() (*jsonschema.Schema, error) { return jsonschema.For[SearchParams](nil) },
		"SearchResult":  func() (*jsonschema.Schema, error) { return jsonschema.For[SearchResult](nil) },
		"OwnersParams":  func() (*jsonschema.Schema, error) { return jsonschema.For[OwnersParams](nil) },
		"OwnersResult":  func() (*jsonschema.Schema, error) { return jsonschema.For[OwnersResult](nil) },
		"Note":          func() (*jsonschema.Schema, error) { return jsonschema.For[Note](nil) },
		"NoteResult":    func() (*jsonschema.Schema, error) { return jsonschema.For[NoteResult](nil) },
		"ImportStats":   func() (*jsonschema.Schema, error) { return jsonschema.For[ImportStats](nil) },
	} {
		s, err := f()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(s.Properties) == 0 {
			t.Errorf("%s has no properties", name)
		}
		for prop, p := range s.Properties {
			if p.Description == "" && p.Ref == "" {
				t.Errorf("%s.%s has no description", name, prop)
			}
		}
	}
}
