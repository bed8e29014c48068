package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/lineage/lineagetest"
)

// record_lineage answers in a bounded size however large the note: every
// count, the first ids within a budget (ids here are near the 512
// characters a path entry may be long), and a note over the input cap is
// refused before anything is written.
func TestRecordLineageAnswerIsBounded(t *testing.T) {
	ctx := context.Background()
	d := testDeps(t)
	cs := connect(t, d)
	long := strings.Repeat("x", 480)
	const n = 400
	path := make([]any, n)
	for i := range path {
		path[i] = fmt.Sprintf("duckdb://billing.%s_%d", long, i)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "record_lineage", Arguments: map[string]any{"path": path}})
	if err != nil || res.IsError {
		t.Fatalf("record_lineage: %v %s", err, text(res))
	}
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("answer %d characters for %d assets and %d edges of ~500-character ids", len(raw), n, n-1)
	if len(raw) > 40000 {
		t.Errorf("answer is %d characters; want well under 40,000", len(raw))
	}
	var out RecordLineageOut
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.AssetsTotal != n || out.EdgesTotal != n-1 || out.EdgesCreated != n-1 || out.AssetsCreated != n {
		t.Errorf("counts: %d assets (%d created), %d edges (%d created); want %d and %d", out.AssetsTotal, out.AssetsCreated, out.EdgesTotal, out.EdgesCreated, n, n-1)
	}
	if len(out.Assets) == 0 || len(out.Assets) >= n || len(out.Edges) == 0 || len(out.Edges) >= n-1 {
		t.Errorf("listed %d assets and %d edges; want the first few of each", len(out.Assets), len(out.Edges))
	}
	if out.Assets[0] != path[0] || out.Edges[0].From != path[0] || out.Edges[0].To != path[1] {
		t.Errorf("first listed: %s, %+v", out.Assets[0], out.Edges[0])
	}

	// Over the cap: refused by the argument checker, nothing written.
	db, err := d.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := lineagetest.Count(t, db, "lineage_edges")
	edges := make([]any, maxNoteItems+1)
	for i := range edges {
		edges[i] = map[string]any{"from": fmt.Sprintf("kafka://prod/t%d", i), "to": fmt.Sprintf("kafka://prod/t%d", i+1)}
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "record_lineage", Arguments: map[string]any{"edges": edges}})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("argument 'edges': %d items is too many; at most %d", maxNoteItems+1, maxNoteItems); !res.IsError || text(res) != want {
		t.Errorf("over the cap: %q, want %q", text(res), want)
	}
	if after := lineagetest.Count(t, db, "lineage_edges"); after != before {
		t.Errorf("a refused note wrote %d edges", after-before)
	}
}
