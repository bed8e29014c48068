package catalog

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/mcpserver"
)

func testDeps(t *testing.T) *deps.Deps {
	t.Helper()
	cfg, err := config.Parse("dw.yaml", []byte("home: "+t.TempDir()+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := deps.New(Name, cfg, clock.NewFake(time.Date(2026, 3, 10, 15, 10, 0, 0, time.UTC)), nil)
	t.Cleanup(func() { d.Close() })
	return d
}

// connect serves the agent in-process and returns a client session.
func connect(t *testing.T, d *deps.Deps) *mcp.ClientSession {
	t.Helper()
	s, err := mcpserver.New(mcpserver.Agent{Name: Name, Instructions: "test", Register: func(s *mcpserver.Server) error { Register(s, d); return nil }}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.MCP.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestImportManifestTwiceAndBlastRadius(t *testing.T) {
	d := testDeps(t)
	cs := connect(t, d)
	ctx := context.Background()
	path, _ := filepath.Abs("../../internal/lineage/ingest/testdata/dbt/whyline-denver__manifest.json")
	for i, want := range []string{"assets created", "already held everything"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "import_dbt_manifest", Arguments: map[string]any{"path": path}})
		if err != nil || res.IsError {
			t.Fatalf("import %d: %v %s", i, err, text(res))
		}
		if !strings.Contains(text(res), want) {
			t.Errorf("import %d: %q, want %q", i, text(res), want)
		}
	}
	// A source of the project reaches its models and the exposure.
	h := &handlers{d: d}
	search, _, err := h.searchAssets(ctx, lineage.SearchParams{Kinds: []string{"source"}, Limit: 1})
	if err != nil || len(search.Assets) == 0 {
		t.Fatalf("search: %v %+v", err, search)
	}
	br, _, err := h.blastRadius(ctx, lineage.BlastParams{Asset: search.Assets[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	if br.Total == 0 {
		t.Errorf("a source reaches nothing: %+v", br)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "blast_radius_analysis", Arguments: map[string]any{"asset": "no_such_model_xyz"}})
	if err != nil || !res.IsError {
		t.Fatalf("unknown asset: %v %v", err, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "import_dbt_manifest", Arguments: map[string]any{"manifest": `{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v4.json"}}`}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "v12") {
		t.Errorf("unsupported manifest: %v %q", err, text(res))
	}
}
