// Package agents lists the five Data Workers agents: for their one binary
// (cmd/dw-agents, installed under each agent's name), for the tests that
// check every tool of every agent and for tooling that needs them all.
package agents

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dataworkers/dw/agents/catalog"
	"github.com/dataworkers/dw/agents/connectors"
	"github.com/dataworkers/dw/agents/incidents"
	"github.com/dataworkers/dw/agents/quality"
	"github.com/dataworkers/dw/agents/schema"
	"github.com/dataworkers/dw/internal/agentboot"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// Entry is one agent: its server description and a way to register its
// tools with given dependencies.
type Entry struct {
	Name string
	// Spec is what the agent's binary serves (agentboot.Main).
	Spec     func() agentboot.Spec
	Agent    func() mcpserver.Agent
	Register func(s *mcpserver.Server, d *deps.Deps)
	// Dir is the agent's package directory, relative to agents/.
	Dir string
}

// All lists the agents.
func All() []Entry {
	return []Entry{
		{Name: quality.Name, Spec: quality.Spec, Agent: quality.Spec().Agent, Register: quality.Register, Dir: "quality"},
		{Name: incidents.Name, Spec: incidents.Spec, Agent: incidents.Spec().Agent, Register: incidents.Register, Dir: "incidents"},
		{Name: catalog.Name, Spec: catalog.Spec, Agent: catalog.Spec().Agent, Register: catalog.Register, Dir: "catalog"},
		{Name: schema.Name, Spec: schema.Spec, Agent: schema.Spec().Agent, Register: schema.Register, Dir: "schema"},
		{Name: connectors.Name, Spec: connectors.Spec, Agent: connectors.Spec().Agent, Register: connectors.Register, Dir: "connectors"},
	}
}

// Binary is the file the five agents are built into; each agent's name is
// a hard link to it (Install). One file, because a process maps the pages
// of its binary as it runs and fault-around maps their neighbours too, so
// each agent held most of its own 19-26 MB binary: five binaries were 76
// MiB of the five quiet agents' 107 MiB (PSS) after 100 calls each; one
// shared file is 21 MiB of 52 (README, "The warehouse child").
const Binary = "dw-agents"

// Install gives Binary in dir each agent's name, as hard links (what
// start-agent.sh does after a build), replacing what had the name.
func Install(dir string) error {
	bin := filepath.Join(dir, Binary)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("install the agents: %w", err)
	}
	for _, a := range All() {
		tmp := filepath.Join(dir, "."+a.Name+".link")
		_ = os.Remove(tmp)
		if err := os.Link(bin, tmp); err != nil {
			return fmt.Errorf("install %s: %w", a.Name, err)
		}
		err := os.Rename(tmp, filepath.Join(dir, a.Name))
		// A rename onto a link to the same file does nothing and succeeds
		// (POSIX), leaving tmp: remove it either way.
		_ = os.Remove(tmp)
		if err != nil {
			return fmt.Errorf("install %s: %w", a.Name, err)
		}
	}
	return nil
}
