// Command dw-agents is the five Data Workers agents in one binary, each an
// MCP server on stdio. It is installed under each agent's name (bin/dw-quality,
// bin/dw-incidents, … are hard links to it: start-agent.sh, agents.Install)
// and serves the agent whose name it was started by. One binary and not
// five, because five processes of one file share its pages and five files
// do not (README, "The warehouse child": 107 → 52 MiB for the five, quiet).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dataworkers/dw/agents"
	"github.com/dataworkers/dw/internal/agentboot"
)

// version is set by the build (-ldflags "-X main.version=…").
var version = "dev"

func main() {
	name := strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe")
	var names []string
	for _, a := range agents.All() {
		if a.Name == name {
			os.Exit(agentboot.Main(a.Spec(), version))
		}
		names = append(names, a.Name)
	}
	fmt.Fprintf(os.Stderr, "dw-agents serves the agent it is started as, and was started as %q: run one of %s (hard links to this binary that make build installs in bin/), e.g. start-agent.sh dw-quality\n", name, strings.Join(names, ", "))
	os.Exit(2)
}
