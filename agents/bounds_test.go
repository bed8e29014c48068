package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/agents"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
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

// bareSession serves one agent over an empty home: enough for calls the
// argument checker refuses before any handler runs.
func bareSession(t *testing.T, e agents.Entry) *mcp.ClientSession {
	t.Helper()
	t.Setenv("DW_HOME", t.TempDir())
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	d := deps.New(e.Name, cfg, clock.System{}, nil)
	t.Cleanup(func() { d.Close() })
	a := e.Agent()
	a.Register = func(s *mcpserver.Server) error { e.Register(s, d); return nil }
	s, err := mcpserver.New(a, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.MCP.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// A bound is one limit of an input: where it is (segments: a property
// name, "[]" for a list's items, "{}" for a map's values), and a value
// past it.
type inputBound struct {
	path []string
	past any
	what string // "items", "entries", "above" or "below"
}

// boundName is the argument as the checker names it (args.go).
func boundName(path []string) string {
	var b strings.Builder
	for _, p := range path {
		switch p {
		case "[]":
			b.WriteString("[0]")
		case "{}":
			b.WriteString(".k")
		default:
			if b.Len() > 0 {
				b.WriteString(".")
			}
			b.WriteString(p)
		}
	}
	return b.String()
}

// sample is the smallest value s accepts: required properties only, the
// fewest items, the lowest number.
func sample(s map[string]any) any {
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	switch {
	case hasType(s["type"], "object"):
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			p, _ := props[r.(string)].(map[string]any)
			out[r.(string)] = sample(p)
		}
		return out
	case hasType(s["type"], "array"):
		n, _ := s["minItems"].(float64)
		it, _ := s["items"].(map[string]any)
		out := []any{}
		for range int(n) {
			out = append(out, sample(it))
		}
		return out
	case hasType(s["type"], "integer"), hasType(s["type"], "number"):
		if m, ok := s["minimum"].(float64); ok {
			return m
		}
		return 0.0
	case hasType(s["type"], "boolean"):
		return false
	}
	return "x"
}

// withValue is sample(s) with the value at path replaced by v, every
// object and list on the way there.
func withValue(s map[string]any, path []string, v any) any {
	if len(path) == 0 {
		return v
	}
	switch seg := path[0]; seg {
	case "[]":
		it, _ := s["items"].(map[string]any)
		return []any{withValue(it, path[1:], v)}
	case "{}":
		ap, _ := s["additionalProperties"].(map[string]any)
		return map[string]any{"k": withValue(ap, path[1:], v)}
	default:
		out, _ := sample(s).(map[string]any)
		props, _ := s["properties"].(map[string]any)
		p, _ := props[seg].(map[string]any)
		out[seg] = withValue(p, path[1:], v)
		return out
	}
}

// inputBounds walks a tool's input schema for every list, map and number,
// reporting one without a bound and returning the bounds found.
func inputBounds(t *testing.T, tool string, root map[string]any) []inputBound {
	var out []inputBound
	var walk func(path []string, s map[string]any)
	walk = func(path []string, s map[string]any) {
		if s == nil {
			return
		}
		where := tool + " " + boundName(path)
		switch {
		case hasType(s["type"], "array"):
			max, ok := s["maxItems"].(float64)
			if !ok {
				t.Errorf("%s: list without maxItems", where)
				break
			}
			it, _ := s["items"].(map[string]any)
			over := make([]any, int(max)+1)
			for i := range over {
				over[i] = sample(it)
			}
			out = append(out, inputBound{path: path, past: over, what: "items"})
		case hasType(s["type"], "object") && s["additionalProperties"] != nil && s["additionalProperties"] != false:
			max, ok := s["maxProperties"].(float64)
			if !ok {
				t.Errorf("%s: map without maxProperties", where)
				break
			}
			ap, _ := s["additionalProperties"].(map[string]any)
			over := map[string]any{}
			for i := range int(max) + 1 {
				over[fmt.Sprintf("k%d", i)] = sample(ap)
			}
			out = append(out, inputBound{path: path, past: over, what: "entries"})
		case hasType(s["type"], "integer"), hasType(s["type"], "number"):
			lo, okLo := s["minimum"].(float64)
			hi, okHi := s["maximum"].(float64)
			if desc, _ := s["description"].(string); !okLo || !okHi {
				// A measured value (a metric's point, a range's end) may be
				// any number JSON carries, and says so.
				if !strings.Contains(desc, "any finite number") {
					t.Errorf("%s: number without minimum and maximum (or a description saying any finite number): %q", where, desc)
				}
				break
			}
			// One past, where float64 still tells it from the bound.
			above, below := hi+1, lo-1
			if above == hi {
				above = hi * 2
			}
			out = append(out, inputBound{path: path, past: above, what: "above"}, inputBound{path: path, past: below, what: "below"})
		}
		props, _ := s["properties"].(map[string]any)
		for k, v := range props {
			m, _ := v.(map[string]any)
			walk(append(slices.Clone(path), k), m)
		}
		if it, ok := s["items"].(map[string]any); ok {
			walk(append(slices.Clone(path), "[]"), it)
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			walk(append(slices.Clone(path), "{}"), ap)
		}
	}
	walk(nil, root)
	return out
}

// TestEveryListAndNumberInputIsBounded: every list a client can send, at
// any depth, has a maxItems, every map a maxProperties, and every number a
// minimum and maximum (or says it takes any finite number); one item,
// entry or unit past each is refused with an error naming the argument
// and the bound, before any handler runs.
func TestEveryListAndNumberInputIsBounded(t *testing.T) {
	checked := 0
	for _, e := range agents.All() {
		cs := bareSession(t, e)
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools.Tools {
			raw, _ := json.Marshal(tool.InputSchema)
			var root map[string]any
			_ = json.Unmarshal(raw, &root)
			for _, b := range inputBounds(t, tool.Name, root) {
				checked++
				args, _ := withValue(root, b.path, b.past).(map[string]any)
				msg := errText(t, cs, tool.Name, args)
				name := "argument '" + boundName(b.path) + "'"
				want := map[string]string{"items": "items is too many; at most", "entries": "entries is too many; at most",
					"above": "must be from", "below": "must be from"}[b.what]
				if !strings.Contains(msg, name) || !strings.Contains(msg, want) {
					t.Errorf("%s %s %s its bound: %.300s", tool.Name, boundName(b.path), b.what, msg)
				}
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d bounds checked", checked)
	}
}
