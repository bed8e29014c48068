package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/agents"
	"github.com/dataworkers/dw/internal/bound"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/packload"
	"github.com/dataworkers/dw/internal/warehouses"
)

// maxAnswer is the most a tool answer (text plus structured output) may
// hold by default: about 20k tokens.
const maxAnswer = bound.Answer

// demoSession serves one agent in-process over the embedded default (demo
// packs seeded into the store, the demo DuckDB as its warehouse), as a
// newcomer's first session would, with home shared by every agent.
func demoSession(t *testing.T, e agents.Entry, home string) *mcp.ClientSession {
	t.Helper()
	t.Setenv("DW_HOME", home)
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	d := deps.New(e.Name, cfg, clock.System{}, nil)
	d.SeedStore = packload.SeedDefault
	d.OpenWarehouse = warehouses.Open
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

// answerSize is what a client hands the model: the text plus the
// structured output.
func answerSize(t *testing.T, res *mcp.CallToolResult) (int, string) {
	t.Helper()
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	return text.Len() + len(raw), text.String()
}

// TestLongInputListsAreRefused: a list argument over its maximum is
// refused with an error naming the argument and the bound, before any
// work; one at the maximum is answered within the size bound.
func TestLongInputListsAreRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the demo packs")
	}
	home := t.TempDir()
	for _, e := range agents.All() {
		if e.Name != "dw-context-catalog" {
			continue
		}
		cs := demoSession(t, e, home)
		many := make([]string, 10_000)
		for i := range many {
			many[i] = fmt.Sprintf("duckdb://usage.table_%05d", i)
		}
		text := errText(t, cs, "get_owners", map[string]any{"assets": many})
		if !strings.Contains(text, "assets") || !strings.Contains(text, "at most 100") {
			t.Errorf("10,000 assets: error does not name the argument and its bound: %.300s", text)
		}
		same := make([]string, 100)
		for i := range same {
			same[i] = "duckdb://usage.usage_hourly"
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_owners", Arguments: map[string]any{"assets": same}})
		if err != nil || res.IsError {
			t.Fatalf("100 assets: %v %+v", err, res)
		}
		if n, _ := answerSize(t, res); n > maxAnswer {
			t.Errorf("100 assets: answer is %d characters", n)
		}
	}
}
