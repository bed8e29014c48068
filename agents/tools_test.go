package agents_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/agents"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/mcpserver/toolsnap"
)

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// listTools serves an agent in-process and lists its tools as a client
// sees them.
func listTools(t *testing.T, e agents.Entry) []*mcp.Tool {
	t.Helper()
	t.Setenv("DW_HOME", t.TempDir())
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	d := deps.New(e.Name, cfg, clock.System{}, nil)
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
	defer ss.Close()
	client := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cs.InitializeResult().ServerInfo.Name != e.Name {
		t.Errorf("serverInfo.name = %q, want %q", cs.InitializeResult().ServerInfo.Name, e.Name)
	}
	if strings.TrimSpace(cs.InitializeResult().Instructions) == "" {
		t.Errorf("%s has no instructions", e.Name)
	}
	return res.Tools
}

// TestEveryTool checks the invariants every tool of every agent keeps, and
// each tool's snapshot.
func TestEveryTool(t *testing.T) {
	seen := map[string]string{}
	for _, e := range agents.All() {
		tools := listTools(t, e)
		if len(tools) == 0 {
			t.Errorf("%s serves no tools", e.Name)
		}
		for _, tool := range tools {
			where := e.Name + "/" + tool.Name
			if prev, dup := seen[tool.Name]; dup {
				t.Errorf("%s: tool name also used by %s", where, prev)
			}
			seen[tool.Name] = where
			if !snakeCase.MatchString(tool.Name) {
				t.Errorf("%s: name is not snake_case", where)
			}
			if len(strings.TrimSpace(tool.Description)) < 40 {
				t.Errorf("%s: description too thin: %q", where, tool.Description)
			}
			checkAnnotations(t, where, tool)
			checkSchema(t, where, "input", tool.InputSchema, true)
			if tool.OutputSchema == nil {
				t.Errorf("%s: no output schema", where)
			} else {
				checkSchema(t, where, "output", tool.OutputSchema, false)
			}
			checkNoApproval(t, where, tool)
			if err := toolsnap.Check(filepath.Join(e.Dir, "__toolsnaps__"), tool.Name, tool); err != nil {
				t.Error(err)
			}
		}
	}
}

func checkAnnotations(t *testing.T, where string, tool *mcp.Tool) {
	t.Helper()
	if tool.Annotations == nil {
		t.Errorf("%s: no annotations", where)
		return
	}
	raw, _ := json.Marshal(tool.Annotations)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	for _, hint := range []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} {
		if _, ok := m[hint]; !ok {
			t.Errorf("%s: annotation %s not set explicitly", where, hint)
		}
	}
	if tool.Annotations.ReadOnlyHint && tool.Annotations.DestructiveHint != nil && *tool.Annotations.DestructiveHint {
		t.Errorf("%s: read-only and destructive at once", where)
	}
}

func checkSchema(t *testing.T, where, which string, schema any, describedProps bool) {
	t.Helper()
	raw, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m["type"] != "object" {
		t.Errorf("%s: %s schema type is %v, want object", where, which, m["type"])
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s: %s schema has top-level %s (clients reject it)", where, which, k)
		}
	}
	if !describedProps {
		return
	}
	props, _ := m["properties"].(map[string]any)
	for name, p := range props {
		pm, _ := p.(map[string]any)
		if d, _ := pm["description"].(string); strings.TrimSpace(d) == "" {
			t.Errorf("%s: input property %q has no description", where, name)
		}
	}
}

// checkNoApproval proves no tool offers a way to approve or reject a
// proposal: decisions come only from people, through Slack, elicitation or
// the dw command.
func checkNoApproval(t *testing.T, where string, tool *mcp.Tool) {
	t.Helper()
	for _, bad := range []string{"approve", "reject", "decide", "grant"} {
		if strings.Contains(tool.Name, bad) {
			t.Errorf("%s: a tool name suggests it can %s; decisions come only from people", where, bad)
		}
	}
	raw, _ := json.Marshal(tool.InputSchema)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	props, _ := m["properties"].(map[string]any)
	for name := range props {
		for _, bad := range []string{"approve", "approval_decision", "decision", "approved_by", "decider"} {
			if strings.Contains(name, bad) {
				t.Errorf("%s: input %q could carry a decision; decisions come only from people", where, name)
			}
		}
	}
}

// maxToolsList bounds an agent's whole tools/list answer in characters: a
// client fetches it on every connect and some put all of it in the model's
// context. Output schemas are cut to mcpserver.OutputSchemaBudget; what
// remains is descriptions and input schemas, which the model needs.
const maxToolsList = 40_000

// TestToolsListIsBounded measures each agent's tools/list as a client
// receives it.
func TestToolsListIsBounded(t *testing.T) {
	for _, e := range agents.All() {
		tools := listTools(t, e)
		raw, err := json.Marshal(&mcp.ListToolsResult{Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) > maxToolsList {
			t.Errorf("%s: tools/list is %d characters, over %d", e.Name, len(raw), maxToolsList)
		}
		for _, tool := range tools {
			// Over the budget only as the bare outline: top-level names
			// and types, nothing nested, nothing described.
			out, _ := json.Marshal(tool.OutputSchema)
			if len(out) > mcpserver.OutputSchemaBudget && !bareOutline(out) {
				t.Errorf("%s/%s: output schema is %d characters, over %d", e.Name, tool.Name, len(out), mcpserver.OutputSchemaBudget)
			}
		}
		t.Logf("%-20s %6d characters, %d tools", e.Name, len(raw), len(tools))
	}
}

// bareOutline: the schema's top-level properties carry their JSON types
// (a list's item type, a map's value type) and nothing else: no nested
// properties, no descriptions.
func bareOutline(raw []byte) bool {
	var s struct {
		Properties map[string]any `json:"properties"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return false
	}
	var bare func(v any) bool
	bare = func(v any) bool {
		m, ok := v.(map[string]any)
		if !ok {
			return true
		}
		for k, x := range m {
			if k == "description" || k == "properties" || !bare(x) {
				return false
			}
		}
		return true
	}
	for _, p := range s.Properties {
		if !bare(p) {
			return false
		}
	}
	return true
}
