package agents_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/agents"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// On a PostgreSQL store a NUL in text reached SQL and the driver's error
// ("invalid byte sequence for encoding UTF8: 0x00 (SQLSTATE 22021)") came
// back as the answer; on SQLite it was stored. The argument checker now
// refuses it for every tool, naming the argument, and nothing is written.
func TestNULArgumentsAreRefusedOnPostgres(t *testing.T) {
	url := storetest.PostgresSchemaURL(t)
	t.Setenv("DW_HOME", t.TempDir())
	cfg, err := config.Parse("dw.yaml", []byte("store:\n  driver: postgres\n  url: \""+url+"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	entries := map[string]agents.Entry{}
	for _, e := range agents.All() {
		entries[e.Name] = e
	}
	const rule = "text arguments may not contain NUL"
	for _, c := range []struct {
		agent, tool string
		args        map[string]any
		want        string
		table       string
	}{
		{"dw-incidents", "record_change", map[string]any{"at": "2026-12-01T14:00:00Z", "kind": "deploy", "system": "dbt",
			"assets": []any{"duckdb://wh.sales.orders"}, "summary": "a\x00b"},
			"record_change: summary holds a NUL character (U+0000) at character 2; " + rule, "incident_changes"},
		{"dw-incidents", "record_change", map[string]any{"at": "2026-12-01T14:00:00Z", "kind": "deploy", "system": "dbt",
			"assets": []any{"duckdb://wh.sales.orders"}, "summary": "ok", "details": map[string]any{"v": "1\x00"}},
			"record_change: details.v holds a NUL character (U+0000) at character 2; " + rule, "incident_changes"},
		{"dw-context-catalog", "record_lineage", map[string]any{"assets": []any{map[string]any{"id": "duckdb://wh.sales.orders", "description": "orders\x00"}}},
			"record_lineage: assets[0].description holds a NUL character (U+0000) at character 7; " + rule, "lineage_assets"},
		{"dw-context-catalog", "record_lineage", map[string]any{"assets": []any{map[string]any{"id": "duckdb://wh.sales.orders", "owner": "\x00sam"}}},
			"record_lineage: assets[0].owner holds a NUL character (U+0000) at character 1; " + rule, "lineage_assets"},
	} {
		e := entries[c.agent]
		d := deps.New(e.Name, cfg, clock.NewFake(at), nil)
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
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s: protocol error %v", c.tool, err)
		}
		if !res.IsError || len(res.Content) != 1 {
			t.Fatalf("%s %q: not a tool error: %+v", c.tool, c.args, res)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.tool, got, c.want)
		}
		db, err := d.Store(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+c.table).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d rows in %s (%v)", c.tool, n, c.table, err)
		}
		cs.Close()
		ss.Close()
	}
}
