// Package agents lists the five Data Workers agents, for the tests that
// check every tool of every agent and for tooling that needs them all.
// Each binary imports only its own agent package.
package agents

import (
	"github.com/dataworkers/dw/agents/catalog"
	"github.com/dataworkers/dw/agents/connectors"
	"github.com/dataworkers/dw/agents/incidents"
	"github.com/dataworkers/dw/agents/quality"
	"github.com/dataworkers/dw/agents/schema"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// Entry is one agent: its server description and a way to register its
// tools with given dependencies.
type Entry struct {
	Name     string
	Agent    func() mcpserver.Agent
	Register func(s *mcpserver.Server, d *deps.Deps)
	// Dir is the agent's package directory, relative to agents/.
	Dir string
}

// All lists the agents.
func All() []Entry {
	return []Entry{
		{Name: quality.Name, Agent: quality.Spec().Agent, Register: quality.Register, Dir: "quality"},
		{Name: incidents.Name, Agent: incidents.Spec().Agent, Register: incidents.Register, Dir: "incidents"},
		{Name: catalog.Name, Agent: catalog.Spec().Agent, Register: catalog.Register, Dir: "catalog"},
		{Name: schema.Name, Agent: schema.Spec().Agent, Register: schema.Register, Dir: "schema"},
		{Name: connectors.Name, Agent: connectors.Spec().Agent, Register: connectors.Register, Dir: "connectors"},
	}
}
