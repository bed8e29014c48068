package mcpserver

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRenderDataCarriesTheKeyData: scalars as key: value, lists one record
// a line with nested records inline, empty fields left out.
func TestRenderDataCarriesTheKeyData(t *testing.T) {
	type col struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}
	type row struct {
		Table   string `json:"table"`
		Rows    int    `json:"rows"`
		Columns []col  `json:"columns"`
		Note    string `json:"note,omitempty"`
	}
	out := struct {
		Status string `json:"status"`
		Tables []row  `json:"tables"`
		Empty  []row  `json:"empty"`
	}{"ok", []row{{"s.a", 3, []col{{"id", "INTEGER"}, {"amount", "DOUBLE"}}, ""}}, nil}
	got := RenderData(&out)
	for _, want := range []string{"status: ok\n", "tables (1):\n", "- columns=[{name=id, type=INTEGER}, {name=amount, type=DOUBLE}], rows=3, table=s.a\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("rendering lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "empty") || strings.Contains(got, "note") {
		t.Errorf("empty fields rendered:\n%s", got)
	}
}

// TestRenderDataIsBounded: a huge answer is cut at a line, says where the
// rest is, and never splits a UTF-8 character.
func TestRenderDataIsBounded(t *testing.T) {
	var items []string
	for range 2000 {
		items = append(items, strings.Repeat("é", 300))
	}
	got := RenderData(map[string]any{"items": items})
	if len(got) > textBudget+200 || !strings.Contains(got, "structuredContent has everything") || !utf8.ValidString(got) {
		t.Errorf("%d bytes, valid UTF-8 %v, tail %q", len(got), utf8.ValidString(got), got[max(0, len(got)-80):])
	}
}

// TestAppendTextLeavesErrorsAlone: an error keeps its own text; a result
// without text content gets one.
func TestAppendTextLeavesErrorsAlone(t *testing.T) {
	errRes := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "bad"}}}
	appendText(errRes, "demo time: x", "k: v")
	if errRes.Content[0].(*mcp.TextContent).Text != "bad" {
		t.Errorf("error text changed: %q", errRes.Content[0].(*mcp.TextContent).Text)
	}
	res := &mcp.CallToolResult{}
	appendText(res, "demo time: 2026-03-10 15:05 UTC", "k: v")
	if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "(demo time: 2026-03-10 15:05 UTC)\n\nk: v" {
		t.Errorf("got %+v", res.Content)
	}
}
