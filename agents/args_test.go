package agents_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/agents"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// wrongValue is a value of the wrong JSON type for a property.
func wrongValue(p *jsonschema.Schema) any {
	types := append([]string{p.Type}, p.Types...)
	for _, t := range types {
		switch t {
		case "string":
			return 12345
		case "integer", "number", "boolean", "array", "object":
			return "not-a-" + t
		}
	}
	return nil
}

// Every argument of every tool, given the wrong type, is refused with an
// error naming it, in words a model can act on; a bad time names RFC 3339.
func TestEveryToolWordsWrongArgumentTypes(t *testing.T) {
	for _, e := range agents.All() {
		t.Run(e.Name, func(t *testing.T) {
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
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			calls := 0
			check := func(tool string, args map[string]any, want string) {
				t.Helper()
				calls++
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
				if err != nil {
					t.Fatalf("%s %v: protocol error %v", tool, args, err)
				}
				text := res.Content[0].(*mcp.TextContent).Text
				if !res.IsError || !strings.Contains(text, want) {
					t.Errorf("%s %v: %q, want a tool error containing %q", tool, args, text, want)
				}
				for _, leak := range []string{"Go struct", "unmarshal", "of type", "validating", "time.Time"} {
					if strings.Contains(text, leak) {
						t.Errorf("%s %v: %q mentions %q", tool, args, text, leak)
					}
				}
			}
			for _, tool := range tools.Tools {
				raw, _ := tool.InputSchema.(map[string]any)
				sch := new(jsonschema.Schema)
				if err := remarshal(raw, sch); err != nil {
					t.Fatal(err)
				}
				for name, p := range sch.Properties {
					if v := wrongValue(p); v != nil {
						check(tool.Name, map[string]any{name: v}, "argument '"+name+"': must be")
					}
				}
			}
			if e.Name == "dw-incidents" {
				check("list_changes", map[string]any{"since": "last week"}, "argument 'since': \"last week\" is not a valid time; use RFC 3339")
				check("record_change", map[string]any{"at": "yesterday", "kind": "deploy", "system": "dbt", "assets": []any{"x"}, "summary": "s"},
					"argument 'at': \"yesterday\" is not a valid time; use RFC 3339, e.g. 2026-12-01T09:40:00Z")
			}
			if calls < 3 {
				t.Errorf("only %d calls checked", calls)
			}
		})
	}
}

func remarshal(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, to)
}
