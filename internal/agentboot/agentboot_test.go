package agentboot_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/agentboot"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
)

type sourceOut struct {
	Source string `json:"source" jsonschema:"the configuration file the tools run on"`
	Home   string `json:"home" jsonschema:"its data directory"`
	Seeds  bool   `json:"seeds" jsonschema:"the store is seeded by dw demo seed"`
	Reads  bool   `json:"reads" jsonschema:"warehouses open in a warehouse child"`
}

// childSpec is an agent whose one tool says what its dependencies were
// built from.
var childSpec = agentboot.Spec{
	Name: "dw-boot-test", Title: "boot test", Instructions: "Test agent.", ReadsWarehouses: true,
	Register: func(s *mcpserver.Server, d *deps.Deps) {
		mcpserver.Add(s, mcpserver.Tool{Name: "config_source", Description: "says which configuration the tools run on", ReadOnly: true, Idempotent: true},
			func(context.Context, struct{}) (*sourceOut, string, error) {
				return &sourceOut{Source: d.Config.Source, Home: d.Config.Home, Seeds: d.SeedStore != nil, Reads: d.OpenWarehouse != nil}, "ok", nil
			})
	},
}

// TestMain runs the test binary as the agent when asked to, so the test
// drives the real start-up path (agentboot.Main over stdio).
func TestMain(m *testing.M) {
	if os.Getenv("DW_AGENTBOOT_CHILD") == "1" {
		os.Exit(agentboot.Main(childSpec, "test"))
	}
	os.Exit(m.Run())
}

// The configuration is read once per process: DW_CONFIG names a FIFO that
// yields the file exactly once, and a second read would block forever. The
// agent still starts, says that configuration in its instructions, and
// its tools run on the same one.
func TestMainReadsTheConfigOnce(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "dw.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	home := filepath.Join(dir, "home")
	wrote := make(chan error, 1)
	go func() {
		// Opening for writing blocks until the agent opens it to read.
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			wrote <- err
			return
		}
		_, err = f.WriteString("home: " + home + "\n")
		f.Close()
		wrote <- err
	}()
	t.Cleanup(func() {
		// Unblock the writer if the agent never read.
		if f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0]) // no arguments: Main refuses them
	cmd.Env = append(os.Environ(), "DW_AGENTBOOT_CHILD=1", "DW_CONFIG="+fifo, "DW_HOME="+home, "DW_CLOCK=")
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil)
	if err != nil {
		t.Fatalf("the agent did not start: %v", err)
	}
	defer cs.Close()
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if inst := cs.InitializeResult().Instructions; !strings.Contains(inst, "Configuration: "+fifo+" (") {
		t.Errorf("instructions do not name the configuration:\n%s", inst)
	}
	// A second read of the FIFO would hang this call until the timeout.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "config_source", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("config_source: %+v, %v", res, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out sourceOut
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if out != (sourceOut{Source: fifo, Home: home, Seeds: true, Reads: true}) {
		t.Errorf("the tools run on %+v", out)
	}
}

// Wire plugs in the warehouse child only for an agent that reads
// warehouses; every agent's store is seeded by dw.
func TestWire(t *testing.T) {
	for _, reads := range []bool{true, false} {
		d := deps.New("dw-x", nil, nil, nil)
		agentboot.Spec{ReadsWarehouses: reads}.Wire(d)
		if d.SeedStore == nil || (d.OpenWarehouse != nil) != reads {
			t.Errorf("reads=%v: seed %v, open warehouse %v", reads, d.SeedStore != nil, d.OpenWarehouse != nil)
		}
	}
}
