package ingest

import (
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// Every params and result type becomes a tool's input or output schema, so
// each must turn into a JSON schema with every property described.
func TestIngestTypesHaveSchemas(t *testing.T) {
	for name, f := range map[string]func() (*jsonschema.Schema, error){
		"DBTOptions":              func() (*jsonschema.Schema, error) { return jsonschema.For[DBTOptions](nil) },
		"DBTImportResult":         func() (*jsonschema.Schema, error) { return jsonschema.For[DBTImportResult](nil) },
		"OpenLineageOptions":      func() (*jsonschema.Schema, error) { return jsonschema.For[OpenLineageOptions](nil) },
		"OpenLineageImportResult": func() (*jsonschema.Schema, error) { return jsonschema.For[OpenLineageImportResult](nil) },
		"ConnectorSpec":           func() (*jsonschema.Schema, error) { return jsonschema.For[ConnectorSpec](nil) },
		"ConnectorOptions":        func() (*jsonschema.Schema, error) { return jsonschema.For[ConnectorOptions](nil) },
		"FieldError":              func() (*jsonschema.Schema, error) { return jsonschema.For[FieldError](nil) },
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
