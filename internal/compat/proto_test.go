package compat

import (
	"errors"
	"strings"
	"testing"
)

const protoV1 = `syntax = "proto3";
package com.example.usage;

import "google/protobuf/timestamp.proto";

// ApiUsage is one metered API call.
message ApiUsage {
  string usage_id = 1;
  string account_id = 2;
  google.protobuf.Timestamp event_time = 3;
  int32 status = 4;
  optional int64 response_bytes = 5;
  Client client = 6;
  repeated string tags = 7;
  map<string, int64> counters = 8;
  Kind kind = 9;

  message Client {
    string name = 1;
    string version = 2;
  }
  enum Kind {
    KIND_UNSPECIFIED = 0;
    KIND_READ = 1;
  }
}
`

func protoEdit(old, new string) string { return strings.Replace(protoV1, old, new, 1) }

func TestProtobufRules(t *testing.T) {
	cases := []struct {
		name   string
		next   string
		ok     bool
		reason string
		path   string
	}{
		{"field added", protoEdit("Kind kind = 9;", "Kind kind = 9;\n  int64 response_kib = 10;"), true, "", ""},
		{"field removed", protoEdit("optional int64 response_bytes = 5;", "reserved 5;"), true, "", ""},
		{"field renamed keeps its number", protoEdit("int32 status = 4;", "int32 http_status = 4;"), true, "", ""},
		{"int32 to int64 same wire group", protoEdit("int32 status = 4;", "int64 status = 4;"), true, "", ""},
		{"enum field to int32", protoEdit("Kind kind = 9;", "int32 kind = 9;"), true, "", ""},
		{"int32 to string", protoEdit("int32 status = 4;", "string status = 4;"), false, "FIELD_SCALAR_KIND_CHANGED", "ApiUsage.status"},
		{"int32 to sint32", protoEdit("int32 status = 4;", "sint32 status = 4;"), false, "FIELD_SCALAR_KIND_CHANGED", "ApiUsage.status"},
		{"scalar to message", protoEdit("int32 status = 4;", "Client status = 4;"), false, "FIELD_KIND_CHANGED", "ApiUsage.status"},
		{"message type changed", protoEdit("Client client = 6;", "google.protobuf.Timestamp client = 6;"), false, "FIELD_NAMED_TYPE_CHANGED", "ApiUsage.client"},
		{"numeric repeated", protoEdit("int32 status = 4;", "repeated int32 status = 4;"), false, "FIELD_NUMERIC_LABEL_CHANGED", "ApiUsage.status"},
		{"string repeated", protoEdit("repeated string tags = 7;", "string tags = 7;"), true, "", ""},
		{"nested message removed", protoEdit("message Client {\n    string name = 1;\n    string version = 2;\n  }", ""), false, "MESSAGE_REMOVED", "ApiUsage.Client"},
		{"nested field type changed", protoEdit("string version = 2;", "int32 version = 2;"), false, "FIELD_SCALAR_KIND_CHANGED", "ApiUsage.Client.version"},
		{"map value changed", protoEdit("map<string, int64> counters = 8;", "map<string, string> counters = 8;"), false, "FIELD_SCALAR_KIND_CHANGED", "ApiUsage.counters"},
		{"package changed", protoEdit("package com.example.usage;", "package com.example.billing;"), false, "PACKAGE_CHANGED", ""},
		{"two fields moved into a oneof", protoEdit("string usage_id = 1;\n  string account_id = 2;", "oneof id {\n    string usage_id = 1;\n    string account_id = 2;\n  }"), false, "MULTIPLE_FIELDS_MOVED_TO_ONEOF", "ApiUsage.id"},
		{"one field moved into a new oneof", protoEdit("string usage_id = 1;", "oneof id {\n    string usage_id = 1;\n  }"), true, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := mustCheck(t, Protobuf, c.next, Numbered(protoV1), Full)
			if v.Compatible != c.ok {
				t.Fatalf("compatible=%v want %v: %+v", v.Compatible, c.ok, v.Reasons)
			}
			if !c.ok && findReason(v.Reasons, c.reason, c.path) == nil {
				t.Fatalf("want %s at %s, got %+v", c.reason, c.path, v.Reasons)
			}
		})
	}
}

func TestProtobufRequiredFields(t *testing.T) {
	old := "syntax = \"proto2\";\nmessage M { optional string a = 1; }"
	nu := "syntax = \"proto2\";\nmessage M { optional string a = 1; required int32 b = 2; }"
	v := mustCheck(t, Protobuf, nu, Numbered(old), Backward)
	if v.Compatible || findReason(v.Reasons, "REQUIRED_FIELD_ADDED", "M.b") == nil {
		t.Fatalf("%+v", v.Reasons)
	}
	if _, err := Check(Protobuf, Schema{Text: "syntax = \"proto3\";\nmessage M { required int32 b = 2; }"}, nil, Backward); err == nil ||
		!strings.Contains(err.Error(), "not allowed in proto3") {
		t.Fatalf("proto3 required: %v", err)
	}
}

func TestProtobufDiff(t *testing.T) {
	nu := protoEdit("int32 status = 4;", "int32 http_status = 4;")
	nu = strings.Replace(nu, "optional int64 response_bytes = 5;", "reserved 5;", 1)
	nu = strings.Replace(nu, "string version = 2;", "string version = 2;\n    string os = 3;", 1)
	changes, err := Diff(Protobuf, Schema{Text: protoV1}, Schema{Text: nu})
	if err != nil {
		t.Fatal(err)
	}
	if c := findChange(changes, Renamed, "http_status"); c == nil || c.OldPath != "status" {
		t.Fatalf("rename by number: %v", changes)
	}
	if findChange(changes, Removed, "response_bytes") == nil || findChange(changes, Added, "client.os") == nil {
		t.Fatalf("diff: %v", changes)
	}
	if len(changes) != 3 {
		t.Fatalf("extra changes: %v", changes)
	}
}

func TestProtobufParseErrors(t *testing.T) {
	cases := []struct {
		src       string
		line, col int
		msg       string
	}{
		{"syntax = \"proto3\";\nmessage M {\n  string a = 1\n  string b = 2;\n}", 4, 3, `expected ";"`},
		{"syntax = \"proto3\";\nmessage M {\n  string a = 1;\n  int32 b = 1;\n}", 4, 3, "reuses number 1"},
		{"syntax = \"proto3\";\nmessage M {\n  reserved 2 to 4;\n  int32 b = 3;\n}", 4, 3, "reserved number 3"},
		{"syntax = \"proto3\";\nmessage M {\n  string a = 0;\n}", 3, 14, "out of range"},
		{"syntax = \"proto3\";\nmessage M {\n  string a = 1;\n", 3, 16, "unexpected end of file"},
		{"syntax = \"proto3\";\nmesage M {}", 2, 1, `unexpected "mesage"`},
	}
	for _, c := range cases {
		_, err := Check(Protobuf, Schema{Text: c.src}, nil, Backward)
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Line != c.line || pe.Column != c.col || !strings.Contains(pe.Message, c.msg) {
			t.Errorf("%q: got %v (%#v), want %d:%d %s", c.src, err, pe, c.line, c.col, c.msg)
		}
	}
}

func TestProtobufCanonicalIgnoresCommentsAndLayout(t *testing.T) {
	a, err := Canonicalize(Protobuf, Schema{Text: protoV1})
	if err != nil {
		t.Fatal(err)
	}
	squashed := strings.ReplaceAll(strings.ReplaceAll(protoV1, "// ApiUsage is one metered API call.\n", ""), "\n", " /* x */ ")
	b, err := Canonicalize(Protobuf, Schema{Text: squashed})
	if err != nil {
		t.Fatal(err)
	}
	if a.SHA256 != b.SHA256 {
		t.Fatalf("%s\n%s", a.Form, b.Form)
	}
	c, err := Canonicalize(Protobuf, Schema{Text: protoEdit("int32 status = 4;", "int32 status = 11;")})
	if err != nil {
		t.Fatal(err)
	}
	if c.SHA256 == a.SHA256 {
		t.Fatal("a changed field number kept the hash")
	}
}
