package schema

import (
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// Register adds the tools with the given dependencies.
func Register(s *mcpserver.Server, d *deps.Deps) {
	h := &handlers{d: d}
	mcpserver.Add(s, checkCompatibilityTool, h.checkCompatibility)
	mcpserver.Add(s, assessImpactTool, h.assessImpact)
	mcpserver.Add(s, detectSchemaChangeTool, h.detectSchemaChange)
	mcpserver.Add(s, listSchemaChangesTool, h.listSchemaChanges)
	mcpserver.Add(s, getSchemaSnapshotTool, h.getSchemaSnapshot)
}
