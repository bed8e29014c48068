package registrytest

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/compat"
)

const fixtures = "testdata/"

func call(t *testing.T, method, url, body string) (int, map[string]any, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, raw
}

func keys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

func fixtureKeys(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(fixtures + name)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return keys(m)
}

const rec = `{"type":"record","name":"R","namespace":"x","fields":[{"name":"id","type":"string"}]}`

func TestResponseShapesMatchRealCaptures(t *testing.T) {
	s := New(t)
	s.Seed("ref-value", "", `{"type":"record","name":"Inner","namespace":"x","fields":[{"name":"a","type":"int"}]}`)
	if _, err := s.SeedVersions("outer-value", "", Seeded{
		Schema:     `{"type":"record","name":"Outer","namespace":"x","fields":[{"name":"in","type":"x.Inner"}]}`,
		References: []Reference{{Name: "x.Inner", Subject: "ref-value", Version: 1}},
	}); err != nil {
		t.Fatal(err)
	}

	code, m, _ := call(t, "GET", s.URL()+"/subjects/outer-value/versions/latest", "")
	if code != 200 || keys(m) != fixtureKeys(t, "tf-confluent__schema_registry_schema__read_latest_schema.json") {
		t.Fatalf("version body keys %s, want the captured %s", keys(m), fixtureKeys(t, "tf-confluent__schema_registry_schema__read_latest_schema.json"))
	}
	ref := m["references"].([]any)[0].(map[string]any)
	if keys(ref) != "name,subject,version" || ref["subject"] != "ref-value" {
		t.Fatalf("reference %v", ref)
	}
	if _, hasType := m["schemaType"]; hasType {
		t.Fatal("schemaType must be omitted for AVRO")
	}

	code, m, _ = call(t, "POST", s.URL()+"/subjects/ref-value/versions", `{"schema":"{\"type\":\"record\",\"name\":\"Inner\",\"namespace\":\"x\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"},{\"name\":\"b\",\"type\":\"int\",\"default\":0}]}"}`)
	if code != 200 || keys(m) != fixtureKeys(t, "tf-confluent__schema_registry_schema__create_schema.json") {
		t.Fatalf("register: %d %v", code, m)
	}
	code, m, _ = call(t, "POST", s.URL()+"/compatibility/subjects/ref-value/versions/latest", `{"schema":"{\"type\":\"record\",\"name\":\"Inner\",\"namespace\":\"x\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"}]}"}`)
	if code != 200 || keys(m) != fixtureKeys(t, "tf-confluent__schema_registry_schema__validate_schema.json") || m["is_compatible"] != true {
		t.Fatalf("compatibility: %d %v", code, m)
	}
	if err := s.SetLevel("ref-value", compat.Full); err != nil {
		t.Fatal(err)
	}
	code, m, _ = call(t, "GET", s.URL()+"/config/ref-value", "")
	if code != 200 || m["compatibilityLevel"] != "FULL" {
		t.Fatalf("config: %d %v", code, m)
	}
	code, m, _ = call(t, "GET", s.URL()+"/schemas/ids/2", "")
	if code != 200 || keys(m) != "references,schema" {
		t.Fatalf("schema by id: %d %v", code, m)
	}
}

func TestErrorCodes(t *testing.T) {
	s := New(t)
	s.Seed("a-value", compat.Backward, rec)
	cases := []struct {
		method, path, body string
		status, code       int
		msg                string
	}{
		{"GET", "/subjects/nope/versions", "", 404, 40401, "Subject 'nope' not found."},
		{"GET", "/subjects/a-value/versions/9", "", 404, 40402, "Version 9 not found."},
		{"GET", "/subjects/a-value/versions/zero", "", 422, 42202, "not a valid version id"},
		{"POST", "/subjects/a-value", `{"schema":"{\"type\":\"string\"}"}`, 404, 40403, "Schema not found"},
		{"GET", "/schemas/ids/77", "", 404, 40403, "Schema 77 not found"},
		{"POST", "/subjects/a-value/versions", `{"schema":"{\"type\":\"recrd\"}"}`, 422, 42201, "Invalid schema"},
		{"POST", "/subjects/a-value/versions", `{"schema":"{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"x\",\"fields\":[{\"name\":\"id\",\"type\":\"string\"},{\"name\":\"n\",\"type\":\"int\"}]}"}`,
			409, 409, "Schema being registered is incompatible with an earlier schema for subject \"a-value\", details: [{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE'"},
		{"GET", "/config/b-value", "", 404, 40408, "Subject 'b-value' does not have subject-level compatibility configured"},
		{"PUT", "/config/a-value", `{"compatibility":"SIDEWAYS"}`, 422, 42203, "Invalid compatibility level"},
		{"GET", "/nothing/here", "", 404, 404, "HTTP 404 Not Found"},
	}
	for _, c := range cases {
		status, m, raw := call(t, c.method, s.URL()+c.path, c.body)
		if status != c.status || int(m["error_code"].(float64)) != c.code || !strings.Contains(m["message"].(string), c.msg) {
			t.Errorf("%s %s: %d %s", c.method, c.path, status, raw)
		}
		if keys(m) != "error_code,message" {
			t.Errorf("%s %s: error body keys %s", c.method, c.path, keys(m))
		}
	}
	if got := s.Versions("a-value"); len(got) != 1 {
		t.Fatalf("a refused registration changed the subject: %v", got)
	}
}

func TestConfigAndProtobufSubjects(t *testing.T) {
	s := New(t)
	if _, err := s.SeedVersions("p-value", compat.Full, Seeded{Kind: compat.Protobuf, Schema: "syntax = \"proto3\";\nmessage M { string a = 1; }"}); err != nil {
		t.Fatal(err)
	}
	code, m, _ := call(t, "GET", s.URL()+"/subjects/p-value/versions/1", "")
	if code != 200 || m["schemaType"] != "PROTOBUF" {
		t.Fatalf("protobuf version: %v", m)
	}
	code, m, _ = call(t, "POST", s.URL()+"/compatibility/subjects/p-value/versions?verbose=true",
		`{"schemaType":"PROTOBUF","schema":"syntax = \"proto3\";\nmessage M { int64 a = 1; }"}`)
	if code != 200 || m["is_compatible"] != false || len(m["messages"].([]any)) == 0 {
		t.Fatalf("string -> int64: %v", m)
	}
	code, m, _ = call(t, "PUT", s.URL()+"/config/p-value", `{"compatibility":"none"}`)
	if code != 200 || m["compatibility"] != "NONE" {
		t.Fatalf("put config: %v", m)
	}
	code, m, _ = call(t, "POST", s.URL()+"/subjects/p-value/versions",
		`{"schemaType":"PROTOBUF","schema":"syntax = \"proto3\";\nmessage M { int64 a = 1; }"}`)
	if code != 200 || m["id"] == nil {
		t.Fatalf("NONE accepts anything: %v", m)
	}
	code, m, _ = call(t, "GET", s.URL()+"/config/other?defaultToGlobal=true", "")
	if code != 200 || m["compatibilityLevel"] != "BACKWARD" {
		t.Fatalf("defaultToGlobal: %v", m)
	}
}

func TestSeedRefusesBadInput(t *testing.T) {
	s := New(t)
	if _, err := s.SeedVersions("x", "", Seeded{Schema: `{"type":"nope"}`}); err == nil {
		t.Fatal("unparseable seed accepted")
	}
	if _, err := s.SeedVersions("x", "", Seeded{Schema: rec, Version: 5}, Seeded{Schema: rec, Version: 3}); err == nil ||
		!strings.Contains(err.Error(), "not after the latest version 5") {
		t.Fatalf("out-of-order version: %v", err)
	}
	srv := NewServer()
	defer srv.Close()
	defer func() {
		if recover() == nil {
			t.Fatal("Seed outside a test must panic on a bad schema")
		}
	}()
	srv.Seed("y", "", `{"type":"nope"}`)
}
