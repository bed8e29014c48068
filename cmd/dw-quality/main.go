// Command dw-quality is the quality-check agent, an MCP server on stdio.
package main

import (
	"os"

	"github.com/dataworkers/dw/agents/quality"
	"github.com/dataworkers/dw/internal/agentboot"
)

// version is set by the build (-ldflags "-X main.version=…").
var version = "dev"

func main() { os.Exit(agentboot.Main(quality.Spec(), version)) }
