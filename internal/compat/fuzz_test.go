package compat

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fuzzSchema checks the properties every format must keep on any text: no
// panic; a schema that parses has a canonical form, is compatible with
// itself under every level, and differs from itself in nothing.
func fuzzSchema(t *testing.T, kind Kind, text string) {
	// A slow input crashes the worker so the fuzzer keeps it: Go's fuzzer
	// has no per-input timeout of its own.
	defer time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("%s schema took over 5s: %q", kind, text)) }).Stop()
	s := Schema{Text: text}
	if err := Validate(kind, s); err != nil {
		if err.Error() == "" {
			t.Fatal("empty error")
		}
		return
	}
	c, err := Canonicalize(kind, s)
	if err != nil {
		t.Fatalf("parses but has no canonical form: %v", err)
	}
	if len(c.SHA256) != 64 {
		t.Fatalf("hash %q", c.SHA256)
	}
	v, err := Check(kind, s, Numbered(text, text), FullTransitive)
	if err != nil {
		t.Fatalf("parses but cannot be checked against itself: %v", err)
	}
	for _, lv := range v.Levels {
		if !lv.Compatible {
			t.Fatalf("%q is not %s-compatible with itself: %v", text, lv.Level, lv.Reasons)
		}
	}
	changes, err := Diff(kind, s, s)
	if err != nil {
		t.Fatalf("parses but cannot be diffed: %v", err)
	}
	if len(changes) != 0 {
		t.Fatalf("%q differs from itself: %v", text, changes)
	}
}

func FuzzAvroSchema(f *testing.F) {
	files, _ := filepath.Glob("testdata/avro/*.avsc")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
	for _, s := range []string{
		`"string"`, `{"type":"array","items":"long"}`, `["null","string"]`,
		`{"type":"record","name":"R","fields":[{"name":"a","type":["null","int"],"default":null},{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}}]}`,
		`{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}`,
		`{"type":"fixed","name":"F","size":16,"logicalType":"decimal","precision":4}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { fuzzSchema(t, Avro, s) })
}

func FuzzJSONSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","additionalProperties":false,"properties":{"id":{"type":"string"},"n":{"type":"integer"}},"required":["id"]}`,
		`{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"}},"required":["id"]}`,
		`{"type":["string","null"],"enum":["a",null],"maxLength":3}`,
		`{"$defs":{"a":{"type":"number","minimum":0}},"type":"array","items":{"$ref":"#/$defs/a"}}`,
		`{"oneOf":[{"type":"string"},{"type":"object","patternProperties":{"^x":{}}}]}`,
		`true`, `{}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { fuzzSchema(t, JSON, s) })
}

func FuzzProtobufSchema(f *testing.F) {
	for _, s := range []string{
		protoV1,
		"syntax = \"proto2\";\nmessage M { optional string a = 1; required int32 b = 2; reserved 3 to 5, \"x\"; }",
		"syntax = \"proto3\";\nmessage M { oneof o { string a = 1; int64 b = 2; } map<string, M> m = 3; }\nenum E { option allow_alias = true; Z = 0; }",
		"syntax = \"proto3\";\nservice S { rpc Get (M) returns (M) {} }\nmessage M { string a = 1 [deprecated = true]; /* c */ }",
		"syntax = \"proto3\";\nmessage M {\n  string a = 1\n}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { fuzzSchema(t, Protobuf, s) })
}
