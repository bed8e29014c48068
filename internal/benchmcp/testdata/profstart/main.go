// Temporary: profile of registering every agent's tools (deleted before the report).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"time"

	"github.com/dataworkers/dw/agents/catalog"
	"github.com/dataworkers/dw/agents/connectors"
	"github.com/dataworkers/dw/agents/quality"
	"github.com/dataworkers/dw/agents/schema"
	"github.com/dataworkers/dw/internal/agentboot"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	n := flag.Int("n", 50, "")
	prof := flag.String("cpu", "", "")
	flag.Parse()
	home, _ := os.MkdirTemp("", "prof")
	os.Setenv("DW_HOME", home)
	os.Chdir(home)
	specs := []agentboot.Spec{quality.Spec(), catalog.Spec(), schema.Spec(), connectors.Spec()}
	if *prof != "" {
		f, _ := os.Create(*prof)
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	for _, sp := range specs {
		d, err := deps.Load(sp.Name)
		if err != nil {
			panic(err)
		}
		sp.Wire(d)
		start := time.Now()
		for i := 0; i < *n; i++ {
			s, err := mcpserver.New(sp.Bind(d), "x", nil)
			if err != nil {
				panic(err)
			}
			ct, st := mcp.NewInMemoryTransports()
			ss, err := s.MCP.Connect(context.Background(), st, nil)
			if err != nil {
				panic(err)
			}
			c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
			cs, err := c.Connect(context.Background(), ct, nil)
			if err != nil {
				panic(err)
			}
			if _, err := cs.ListTools(context.Background(), nil); err != nil {
				panic(err)
			}
			cs.Close()
			ss.Wait()
		}
		fmt.Printf("%s: %v per server\n", sp.Name, time.Since(start)/time.Duration(*n))
	}
}
