// Package agentboot is the one start-up path of the five agents: load the
// configuration and the clock once, build the agent's dependencies from
// them, and serve its tools over stdio. Each agent states only what
// differs (a Spec); cmd/dw-agents picks the Spec by the name it is started
// as.
package agentboot

import (
	"context"

	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/warehouseproc"
)

// Spec is what one agent states about itself.
type Spec struct {
	// Name is the binary's and the server's name (dw-quality, …).
	Name string
	// Title is a human-readable name.
	Title string
	// Instructions tell a model client what the agent is for and how its
	// tools fit together.
	Instructions string
	// ReadsWarehouses is true for an agent whose tools query warehouses;
	// it reaches them through a warehouse child (warehouseproc), so the
	// drivers are not linked into the agent.
	ReadsWarehouses bool
	// Register adds the tools over the dependencies. It must not open
	// databases or networks (deps opens them on first use), so tools/list
	// answers in milliseconds.
	Register func(s *mcpserver.Server, d *deps.Deps)
}

// Agent is the server's description with no tools bound, for callers
// that register the tools over dependencies of their own (tests).
func (sp Spec) Agent() mcpserver.Agent {
	return mcpserver.Agent{Name: sp.Name, Title: sp.Title, Instructions: sp.Instructions}
}

// Wire sets what every production agent plugs into its dependencies: the
// embedded default's store is seeded by `dw demo seed` (so no agent links
// the demo packs), and warehouses are opened in a warehouse child
// (warehouseproc) when the agent reads them.
func (sp Spec) Wire(d *deps.Deps) {
	d.SeedStore = deps.SeedWithDW
	if sp.ReadsWarehouses {
		d.OpenWarehouse = warehouseproc.Open
	}
}

// Bind is the server with its tools registered over d.
func (sp Spec) Bind(d *deps.Deps) mcpserver.Agent {
	a := sp.Agent()
	a.Register = func(s *mcpserver.Server) error { sp.Register(s, d); return nil }
	return a
}

// Main is the whole body of an agent's process: the configuration and the
// clock are loaded once (deps.Load) when mcpserver.Main asks for them,
// and the same values reach the instructions, the tools and every
// dependency. It returns the process exit code.
func Main(sp Spec, version string) int {
	var d *deps.Deps
	a := sp.Agent()
	// d is set by the boot function below, which mcpserver.Main calls
	// before it registers the tools.
	a.Register = func(s *mcpserver.Server) error { sp.Register(s, d); return nil }
	return mcpserver.Main(a, version, func() (mcpserver.Boot, error) {
		var err error
		if d, err = deps.Load(sp.Name); err != nil {
			return mcpserver.Boot{}, err
		}
		sp.Wire(d)
		// Cursors are signed with the store's own key, read when the first
		// list is paged (which opens the store, as that call needs it).
		page.SetKeySource(func() ([]byte, error) {
			ctx := context.Background()
			db, err := d.Store(ctx)
			if err != nil {
				return nil, err
			}
			return page.StoreKey(ctx, db)
		})
		return mcpserver.Boot{Config: d.Config, ConfigErr: d.ConfigErr, Clock: d.Clock}, nil
	})
}
