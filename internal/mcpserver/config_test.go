package mcpserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/deps"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type storeOut struct {
	OK bool `json:"ok" jsonschema:"the store opened"`
}

// agentWithStore is an agent like the real ones: its tool needs the
// store, through deps loaded the usual way (as agentboot does).
func agentWithStore(d *deps.Deps) Agent {
	return Agent{Name: "dw-test", Instructions: "Test agent.", Register: func(s *Server) error {
		Add(s, Tool{Name: "open_store", Description: "opens the store", ReadOnly: true, Idempotent: true},
			func(ctx context.Context, _ struct{}) (*storeOut, string, error) {
				if _, err := d.Store(ctx); err != nil {
					return nil, "", err
				}
				return &storeOut{OK: true}, "store open", nil
			})
		return nil
	}}
}

// start does what Main does before serving, and connects a client.
func start(t *testing.T) (*mcp.ClientSession, *mcp.InitializeResult) {
	t.Helper()
	d, err := deps.Load("dw-test")
	if err != nil {
		t.Fatalf("the agent did not start: %v", err)
	}
	b := Boot{Config: d.Config, ConfigErr: d.ConfigErr, Clock: d.Clock}
	a := withConfig(agentWithStore(d), b)
	s, err := New(a, "1", nil)
	if err != nil {
		t.Fatalf("the agent did not start: %v", err)
	}
	applyConfig(s, b.ConfigErr)
	cs := connect(t, s)
	return cs, cs.InitializeResult()
}

func toolText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// A malformed dw.yaml must not stop the agent: it answers initialize and
// tools/list, and every tool call answers with the file, line and key.
func TestMalformedConfigStartsAndEveryToolSaysWhy(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "dw.yaml")
	if err := os.WriteFile(cfg, []byte("people:\n  - id: sam\ndomains:\n  - name: billing\n    autonomy: L9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DW_CONFIG", cfg)
	t.Setenv("DW_HOME", home)

	cs, init := start(t)
	want := cfg + ":5: domains[0].autonomy"
	if !strings.Contains(init.Instructions, want) {
		t.Errorf("instructions do not carry the config error %q:\n%s", want, init.Instructions)
	}
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 {
		t.Fatalf("tools/list: %v %+v", err, tools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "open_store", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("tools/call failed at the protocol level: %v", err)
	}
	if !res.IsError || res.StructuredContent != nil {
		t.Fatalf("want a tool error, got %+v", res)
	}
	if text := toolText(t, res); !strings.Contains(text, want) || !strings.Contains(text, "unknown level") {
		t.Errorf("tool error %q does not name %s", text, want)
	}
	// Even an unknown tool name gets the config error: it is the first
	// thing to fix.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"})
	if err != nil || !res.IsError {
		t.Fatalf("unknown tool: %v %+v", err, res)
	}
	// Nothing was created in the data directory: the placeholder config
	// opened nothing.
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("DW_HOME got %d entries with a broken config", len(entries))
	}
}

// The deps layer refuses too, for callers that are not behind Main.
func TestDepsCarryConfigError(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "dw.yaml")
	if err := os.WriteFile(cfg, []byte("store: { driver: oracle }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DW_CONFIG", cfg)
	t.Setenv("DW_HOME", t.TempDir())
	d, err := deps.Load("dw-test")
	if err != nil {
		t.Fatalf("deps.Load must not fail on a bad config: %v", err)
	}
	if d.ConfigErr == nil {
		t.Fatal("ConfigErr is not set")
	}
	if _, err := d.Store(context.Background()); err == nil || !strings.Contains(err.Error(), cfg+":1: store.driver") {
		t.Errorf("Store: %v", err)
	}
	if _, err := d.Warehouse(context.Background(), ""); err == nil || !strings.Contains(err.Error(), "store.driver") {
		t.Errorf("Warehouse: %v", err)
	}
}

// With a good config the instructions say which file and store are used,
// and tools run.
func TestInstructionsNameConfigAndStore(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "dw.yaml")
	if err := os.WriteFile(cfg, []byte("people:\n  - id: sam\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DW_CONFIG", cfg)
	t.Setenv("DW_HOME", home)
	cs, init := start(t)
	for _, want := range []string{"Test agent.", "Configuration: " + cfg + " (DW_CONFIG).", "Store: SQLite at " + filepath.Join(home, "dw.db") + "."} {
		if !strings.Contains(init.Instructions, want) {
			t.Errorf("instructions lack %q:\n%s", want, init.Instructions)
		}
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "open_store", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("open_store: %v %s", err, toolText(t, res))
	}
}
