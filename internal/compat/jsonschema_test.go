package compat

import (
	"errors"
	"strings"
	"testing"
)

const (
	jsClosed = `{"type":"object","additionalProperties":false,
		"properties":{"id":{"type":"string"},"n":{"type":"integer"}},"required":["id"]}`
	jsOpen = `{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"}},"required":["id"]}`
)

func TestJSONSchemaContentModels(t *testing.T) {
	cases := []struct {
		name     string
		old, new string
		back     bool
		reason   string // expected reason type when incompatible
		path     string
	}{
		{"optional property added to closed model", jsClosed,
			`{"type":"object","additionalProperties":false,"properties":{"id":{"type":"string"},"n":{"type":"integer"},"note":{"type":"string"}},"required":["id"]}`,
			true, "", ""},
		{"property removed from closed model", jsClosed,
			`{"type":"object","additionalProperties":false,"properties":{"id":{"type":"string"}},"required":["id"]}`,
			false, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "n"},
		{"property removed from open model", jsOpen,
			`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`,
			true, "", ""},
		{"typed property added to open model", jsOpen,
			`{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"},"note":{"type":"string"}},"required":["id"]}`,
			false, "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "note"},
		{"required property without default added to closed model", jsClosed,
			`{"type":"object","additionalProperties":false,"properties":{"id":{"type":"string"},"n":{"type":"integer"},"k":{"type":"string"}},"required":["id","k"]}`,
			false, "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "k"},
		{"required property with default added to closed model", jsClosed,
			`{"type":"object","additionalProperties":false,"properties":{"id":{"type":"string"},"n":{"type":"integer"},"k":{"type":"string","default":"x"}},"required":["id","k"]}`,
			true, "", ""},
		{"existing property made required", jsClosed,
			`{"type":"object","additionalProperties":false,"properties":{"id":{"type":"string"},"n":{"type":"integer"}},"required":["id","n"]}`,
			false, "REQUIRED_ATTRIBUTE_ADDED", "n"},
		{"integer widened to number", jsClosed,
			`{"type":"object","additionalProperties":false,"properties":{"id":{"type":"string"},"n":{"type":"number"}},"required":["id"]}`,
			true, "", ""},
		{"string made nullable", jsClosed,
			`{"type":"object","additionalProperties":false,"properties":{"id":{"type":["string","null"]},"n":{"type":"integer"}},"required":["id"]}`,
			true, "", ""},
		{"type changed", jsClosed,
			`{"type":"object","additionalProperties":false,"properties":{"id":{"type":"integer"},"n":{"type":"integer"}},"required":["id"]}`,
			false, "TYPE_CHANGED", "id"},
		{"additional properties forbidden", jsOpen,
			`{"type":"object","additionalProperties":false,"properties":{"id":{"type":"string"},"n":{"type":"integer"}},"required":["id"]}`,
			false, "ADDITIONAL_PROPERTIES_REMOVED", ""},
		{"maxLength lowered", `{"type":"string","maxLength":10}`, `{"type":"string","maxLength":5}`,
			false, "MAX_LENGTH_DECREASED", ""},
		{"maxLength raised", `{"type":"string","maxLength":10}`, `{"type":"string","maxLength":50}`, true, "", ""},
		{"combinator changed is not passed silently", `{"anyOf":[{"type":"string"}]}`, `{"anyOf":[{"type":"integer"}]}`,
			false, "UNSUPPORTED_KEYWORD_CHANGED", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := mustCheck(t, JSON, c.new, Numbered(c.old), Backward)
			if v.Compatible != c.back {
				t.Fatalf("compatible=%v, want %v: %+v", v.Compatible, c.back, v.Reasons)
			}
			if !c.back && findReason(v.Reasons, c.reason, c.path) == nil {
				t.Fatalf("want %s at %q, got %+v", c.reason, c.path, v.Reasons)
			}
		})
	}
}

func TestJSONSchemaEnumAndNested(t *testing.T) {
	old := `{"type":"object","properties":{"a":{"type":"object","additionalProperties":false,"properties":{"s":{"enum":["x","y"]}}},"list":{"type":"array","items":{"type":"integer"}}}}`
	wider := `{"type":"object","properties":{"a":{"type":"object","additionalProperties":false,"properties":{"s":{"enum":["x","y","z"]}}},"list":{"type":"array","items":{"type":"number"}}}}`
	narrower := `{"type":"object","properties":{"a":{"type":"object","additionalProperties":false,"properties":{"s":{"enum":["x"]}}},"list":{"type":"array","items":{"type":"string"}}}}`
	if v := mustCheck(t, JSON, wider, Numbered(old), FullTransitive); v.At(Backward).Compatible != true || v.At(Forward).Compatible {
		t.Fatalf("enum and item widening is BACKWARD only: %+v", v.Levels)
	}
	v := mustCheck(t, JSON, narrower, Numbered(old), Backward)
	if findReason(v.Reasons, "ENUM_ARRAY_NARROWED", "a.s") == nil || findReason(v.Reasons, "TYPE_CHANGED", "list[]") == nil {
		t.Fatalf("reasons: %+v", v.Reasons)
	}
	changes, err := Diff(JSON, Schema{Text: old}, Schema{Text: narrower})
	if err != nil {
		t.Fatal(err)
	}
	if findChange(changes, TypeChanged, "a.s") == nil || findChange(changes, TypeChanged, "list") == nil {
		t.Fatalf("diff: %v", changes)
	}
}

func TestJSONSchemaLocalRefs(t *testing.T) {
	old := `{"definitions":{"P":{"type":"object","additionalProperties":false,"properties":{"x":{"type":"integer"}}}},
		"type":"object","properties":{"p":{"$ref":"#/definitions/P"}}}`
	nu := `{"definitions":{"P":{"type":"object","additionalProperties":false,"properties":{}}},
		"type":"object","properties":{"p":{"$ref":"#/definitions/P"}}}`
	v := mustCheck(t, JSON, nu, Numbered(old), Backward)
	if findReason(v.Reasons, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "p.x") == nil {
		t.Fatalf("reasons: %+v", v.Reasons)
	}
	changes, err := Diff(JSON, Schema{Text: old}, Schema{Text: nu})
	if err != nil {
		t.Fatal(err)
	}
	if findChange(changes, Removed, "p.x") == nil {
		t.Fatalf("diff: %v", changes)
	}
	_, err = Check(JSON, Schema{Text: `{"properties":{"p":{"$ref":"#/definitions/Nope"}}}`}, nil, Backward)
	if err == nil || !strings.Contains(err.Error(), "Nope") {
		t.Fatalf("dangling $ref: %v", err)
	}
	_, err = Check(JSON, Schema{Text: `{"properties":{"p":{"$ref":"other.json"}}}`}, nil, Backward)
	if err == nil || !strings.Contains(err.Error(), "local references") {
		t.Fatalf("remote $ref: %v", err)
	}
}

func TestJSONSchemaDiffRequiredAndDefaults(t *testing.T) {
	old := `{"type":"object","properties":{"a":{"type":"string","default":"x"},"b":{"type":"string"}},"required":["a"]}`
	nu := `{"type":"object","properties":{"a":{"type":"string","default":"y"},"b":{"type":"string"},"c":{"type":"integer"}},"required":["b"]}`
	changes, err := Diff(JSON, Schema{Text: old}, Schema{Text: nu})
	if err != nil {
		t.Fatal(err)
	}
	if findChange(changes, DefaultChanged, "a") == nil || findChange(changes, OptionalToRequired, "b") == nil || findChange(changes, Added, "c") == nil {
		t.Fatalf("diff: %v", changes)
	}
}

func TestJSONSchemaParseErrors(t *testing.T) {
	_, err := Check(JSON, Schema{Text: "{\n  \"type\": \"object\",\n  \"properties\": {\n    \"a\": {\"type\": \"strin\"}\n  }\n}"}, nil, Backward)
	if err == nil || !strings.Contains(err.Error(), `unknown type "strin"`) || !strings.Contains(err.Error(), "#/properties/a/type") {
		t.Fatalf("bad type: %v", err)
	}
	_, err = Check(JSON, Schema{Text: "{\n  \"type\": \"object\",\n  \"properties\": {\n}"}, nil, Backward)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line == 0 {
		t.Fatalf("truncated JSON should carry a position: %v", err)
	}
	_, err = Check(JSON, Schema{Text: "{\"type\": \"object\",, }"}, nil, Backward)
	if !errors.As(err, &pe) || pe.Line != 1 || pe.Column != 19 {
		t.Fatalf("syntax error position: %#v", pe)
	}
}

func TestJSONCanonicalIgnoresKeyOrder(t *testing.T) {
	a, err := Canonicalize(JSON, Schema{Text: `{"type":"object","properties":{"a":{"type":"string"}}}`})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Canonicalize(JSON, Schema{Text: "{\n \"properties\": {\"a\": {\"type\": \"string\"}},\n \"type\": \"object\"\n}"})
	if err != nil {
		t.Fatal(err)
	}
	if a.SHA256 != b.SHA256 || a.Form != `{"properties":{"a":{"type":"string"}},"type":"object"}` {
		t.Fatalf("%s vs %s", a.Form, b.Form)
	}
}
