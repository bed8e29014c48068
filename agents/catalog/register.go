package catalog

import (
	"context"

	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// Register adds the tools with the given dependencies.
func Register(s *mcpserver.Server, d *deps.Deps) {
	h := &handlers{d: d}
	mcpserver.Add(s, blastRadiusTool, h.blastRadius)
	mcpserver.Add(s, traceTool, h.trace)
	mcpserver.Add(s, getLineageTool, h.getLineage)
	mcpserver.Add(s, searchAssetsTool, h.searchAssets)
	mcpserver.Add(s, getOwnersTool, h.getOwners)
	mcpserver.Add(s, recordLineageTool, h.recordLineage)
	mcpserver.Add(s, importDBTTool, h.importDBT)
	mcpserver.Add(s, importOpenLineageTool, h.importOpenLineage)
}

// graph is the shared context graph, held by deps so its index is loaded
// once and refreshed only when the store's graph changes.
func (h *handlers) graph(ctx context.Context) (*lineage.Graph, error) {
	return h.d.Graph(ctx)
}
