package agents_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/agents"
)

// schemaProps reads a tool's input properties as a client sees them.
func schemaProps(t *testing.T, tool *mcp.Tool) map[string]map[string]any {
	t.Helper()
	raw, err := json.Marshal(tool.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s.Properties
}

// TestEveryStringInputIsBounded: every string a client can send, at any
// depth, has a maxLength its description states.
func TestEveryStringInputIsBounded(t *testing.T) {
	for _, e := range agents.All() {
		for _, tool := range listTools(t, e) {
			raw, _ := json.Marshal(tool.InputSchema)
			var root map[string]any
			_ = json.Unmarshal(raw, &root)
			var walk func(path string, s map[string]any)
			walk = func(path string, s map[string]any) {
				if s == nil {
					return
				}
				if hasType(s["type"], "string") {
					if _, ok := s["maxLength"]; !ok {
						t.Errorf("%s %s: string without maxLength", tool.Name, path)
					}
					desc, _ := s["description"].(string)
					if _, enum := s["enum"]; !enum && path != "" && !strings.Contains(path, "{}") && !strings.Contains(desc, "characters") && !strings.HasSuffix(path, "[]") {
						t.Errorf("%s %s: description does not state the limit: %q", tool.Name, path, desc)
					}
				}
				if hasType(s["type"], "integer") && strings.HasSuffix(path, ".limit") {
					if s["minimum"] == nil || s["maximum"] == nil {
						t.Errorf("%s %s: limit without minimum and maximum", tool.Name, path)
					}
				}
				props, _ := s["properties"].(map[string]any)
				for k, v := range props {
					m, _ := v.(map[string]any)
					walk(path+"."+k, m)
				}
				if it, ok := s["items"].(map[string]any); ok {
					walk(path+"[]", it)
				}
				if ap, ok := s["additionalProperties"].(map[string]any); ok {
					walk(path+"{}", ap)
				}
			}
			walk("", root)
		}
	}
}

func hasType(t any, want string) bool {
	switch x := t.(type) {
	case string:
		return x == want
	case []any:
		for _, v := range x {
			if v == want {
				return true
			}
		}
	}
	return false
}

// errText is a tool error's text; a protocol error or a success fails.
func errText(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Errorf("%s %v: protocol error %v (want a tool error)", tool, brief(args), err)
		return ""
	}
	_, text := answerSize(t, res)
	if !res.IsError {
		t.Errorf("%s %v: accepted (want a tool error)", tool, brief(args))
	}
	return text
}

func brief(args map[string]any) string {
	b, _ := json.Marshal(args)
	if len(b) > 120 {
		return string(b[:120]) + "…"
	}
	return string(b)
}

// TestHostileInputs sends each tool family the mistakes a model makes:
// limits out of range or of the wrong type, a 1 MiB string, a NUL in an
// id, a tampered cursor. Each gets a tool error that names the argument,
// and the agent keeps serving.
func TestHostileInputs(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the demo packs")
	}
	home := t.TempDir()
	huge := strings.Repeat("a", 1<<20)
	leaks := []string{"sqlite", "SQLSTATE", "Go struct", "unmarshal", "panic"}
	for _, e := range agents.All() {
		cs := demoSession(t, e, home)
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools.Tools {
			props := schemaProps(t, tool)
			base := minimalArgs[tool.Name]
			with := func(k string, v any) map[string]any {
				m := map[string]any{}
				for bk, bv := range base {
					m[bk] = bv
				}
				m[k] = v
				return m
			}
			if _, ok := props["limit"]; ok {
				for _, bad := range []any{-1, 0, 1e15, 2.5, "10", 501} {
					msg := errText(t, cs, tool.Name, with("limit", bad))
					if tool.Name == "list_changes" {
						t.Logf("list_changes limit %v: %s", bad, msg)
					}
					if !strings.Contains(msg, "limit") {
						t.Errorf("%s limit %v: error does not name limit: %.300s", tool.Name, bad, msg)
					}
				}
			}
			for name, p := range props {
				if !hasType(p["type"], "string") {
					continue
				}
				if _, enum := p["enum"]; enum {
					continue
				}
				msg := errText(t, cs, tool.Name, with(name, huge))
				if tool.Name == "search_assets" {
					t.Logf("search_assets %s of 1 MiB: %s", name, msg)
				}
				if !strings.Contains(msg, name) || len(msg) > 2000 {
					t.Errorf("%s %s of 1 MiB: error does not name it briefly: %.300s", tool.Name, name, msg)
				}
				for _, leak := range leaks {
					if strings.Contains(msg, leak) {
						t.Errorf("%s %s of 1 MiB: error leaks %q: %.300s", tool.Name, name, leak, msg)
					}
				}
			}
			if _, ok := props["cursor"]; ok {
				msg := errText(t, cs, tool.Name, with("cursor", "AAAAAAAAAAAAAAAAAAAAAAAAAAAA"))
				if tool.Name == "list_changes" {
					t.Logf("list_changes tampered cursor: %s", msg)
				}
				if !strings.Contains(msg, "cursor") {
					t.Errorf("%s tampered cursor: error does not name cursor: %.300s", tool.Name, msg)
				}
			}
		}
		// The agent still answers after all of it.
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatalf("%s stopped serving: %v", e.Name, err)
		}
	}
}

// TestNULInIDs: an id with a NUL is refused or not found, with a tool
// error, never a crash or a database error.
func TestNULInIDs(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the demo packs")
	}
	home := t.TempDir()
	cases := map[string]map[string]any{
		"get_lineage":           {"asset": "duckdb://usage.usage_hourly\x00x"},
		"blast_radius_analysis": {"asset": "schema://api-usage-value\x00"},
		"search_assets":         {"query": "usage\x00hourly"},
		"get_incident":          {"incident": "INC-1\x00"},
		"get_receipt":           {"id": "INC-1\x00"},
		"list_changes":          {"asset": "duckdb://usage.usage_hourly\x00"},
		"list_schema_changes":   {"table": "usage.usage_hourly\x00"},
		"get_quality_history":   {"table": "usage.usage_hourly\x00", "metric": "row_count"},
	}
	seen := 0
	for _, e := range agents.All() {
		cs := demoSession(t, e, home)
		tools, _ := cs.ListTools(context.Background(), nil)
		for _, tool := range tools.Tools {
			args, ok := cases[tool.Name]
			if !ok {
				continue
			}
			seen++
			msg := errText(t, cs, tool.Name, args)
			for _, leak := range []string{"sqlite", "SQLSTATE", "invalid byte sequence", "panic"} {
				if strings.Contains(msg, leak) {
					t.Errorf("%s: error leaks %q: %.300s", tool.Name, leak, msg)
				}
			}
		}
	}
	if seen != len(cases) {
		t.Errorf("ran %d of %d cases", seen, len(cases))
	}
}
