package incidents

import (
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// Register adds the tools with the given dependencies. No tool approves or
// rejects: decisions come only from people, through approvals.
func Register(s *mcpserver.Server, d *deps.Deps) {
	h := &handlers{d: d}
	mcpserver.Add(s, defineMetricTool, h.defineMetric)
	mcpserver.Add(s, listMetricsTool, h.listMetrics)
	mcpserver.Add(s, monitorMetricsTool, h.monitorMetrics)
	mcpserver.Add(s, recordChangeTool, h.recordChange)
	mcpserver.Add(s, listChangesTool, h.listChanges)
	mcpserver.Add(s, listIncidentsTool, h.listIncidents)
	mcpserver.Add(s, getIncidentTool, h.getIncident)
	mcpserver.Add(s, diagnoseTool, h.diagnose)
	mcpserver.Add(s, historyTool, h.history)
	mcpserver.Add(s, proposeTool, h.propose)
	mcpserver.Add(s, remediateTool, h.remediate)
	mcpserver.Add(s, getReceiptTool, h.getReceipt)
	mcpserver.Add(s, closeIncidentTool, h.closeIncident)
	mcpserver.Add(s, listRoutineRunsTool, h.listRoutineRuns)
	mcpserver.AddRaw(s, askApproverTool, h.askApprover)
}
