package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/registry/registrytest"
)

// readCall is one read-only call each agent must answer on a small
// warehouse, and what its text must mention.
type readCall struct {
	tool string
	args map[string]any
	want string
}

var smoke = map[string]readCall{
	"dw-quality":         {"list_tables", map[string]any{}, "shop.orders: 1000 rows"},
	"dw-incidents":       {"list_changes", map[string]any{}, "No recorded change"},
	"dw-context-catalog": {"search_assets", map[string]any{"query": "orders"}, "0 assets found"},
	"dw-schema":          {"list_schema_changes", map[string]any{}, "0 schema changes detected in shop"},
	"dw-connectors":      {"list_subjects", map[string]any{}, "orders-value"},
}

// TestStdioSmoke spawns every agent: initialize, tools/list, one read-only
// call, then closing stdin ends the process cleanly.
func TestStdioSmoke(t *testing.T) {
	for name, rc := range smoke {
		t.Run(name, func(t *testing.T) {
			env := smallWarehouse(t)
			if name == "dw-connectors" {
				sr := registrytest.New(t)
				sr.Seed("orders-value", compat.Backward, `{"type":"record","name":"Order","fields":[{"name":"order_id","type":"string"}]}`)
				withRegistry(t, env, sr.URL())
			}
			p := spawn(t, name, env)
			init := p.session.InitializeResult()
			if init.ServerInfo.Name != name || init.ServerInfo.Version == "" {
				t.Errorf("serverInfo = %+v", init.ServerInfo)
			}
			tools, err := p.session.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(tools.Tools) == 0 {
				t.Fatal("no tools")
			}
			res := p.call(t, rc.tool, rc.args)
			if res.IsError {
				t.Fatalf("%s: %s", rc.tool, text(res))
			}
			if !strings.Contains(text(res), rc.want) {
				t.Errorf("%s answered %q, want it to mention %q", rc.tool, text(res), rc.want)
			}
			if res.StructuredContent == nil {
				t.Errorf("%s: no structured content", rc.tool)
			}
			assertExitsOnStdinClose(t, p)
		})
	}
}

func assertExitsOnStdinClose(t *testing.T, p *agentProc) {
	t.Helper()
	start := time.Now()
	// Closing the client session closes the process's stdin; the transport
	// would send SIGTERM only after 5 s, so a quick, clean exit proves the
	// server noticed end of input by itself.
	_ = p.session.Close()
	waited := time.Since(start)
	if p.cmd.ProcessState == nil {
		t.Fatalf("process state unknown after close")
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Errorf("%s was killed by %v instead of exiting when stdin closed", p.name, ws.Signal())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("%s exited %d; stderr:\n%s", p.name, code, p.stderr)
	}
	if waited > 3*time.Second {
		t.Errorf("%s took %s to exit after stdin closed", p.name, waited)
	}
}

// TestStdioBadInput: each bad call gets a clear error and the server still
// answers the next call.
func TestStdioBadInput(t *testing.T) {
	p := spawn(t, "dw-quality", smallWarehouse(t))
	ctx := context.Background()

	_, err := p.session.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "no_such_tool") {
		t.Errorf("unknown tool: err = %v, want one naming the tool", err)
	}
	res := p.call(t, "list_tables", map[string]any{"schema": 42})
	if !res.IsError || !strings.Contains(text(res), "schema") {
		t.Errorf("wrong type: %v %q", res.IsError, text(res))
	}
	res = p.call(t, "list_tables", map[string]any{"bogus": "x"})
	if !res.IsError {
		t.Errorf("unknown argument accepted: %q", text(res))
	}
	res = p.call(t, "list_tables", map[string]any{"schema": "shopp"})
	if !res.IsError || !strings.Contains(text(res), "shop") {
		t.Errorf("unknown schema: %v %q, want the existing schema named", res.IsError, text(res))
	}
	res = p.call(t, "list_tables", map[string]any{"schema": "x; DROP TABLE shop.orders"})
	if !res.IsError || !strings.Contains(text(res), "not a valid identifier") {
		t.Errorf("injection attempt: %v %q", res.IsError, text(res))
	}
	res = p.call(t, "list_tables", map[string]any{"warehouse": "nope"})
	if !res.IsError || !strings.Contains(text(res), "shop") {
		t.Errorf("unknown warehouse: %v %q", res.IsError, text(res))
	}
	// Still serving, and nothing changed.
	res = p.call(t, "list_tables", map[string]any{})
	if res.IsError || !strings.Contains(text(res), "shop.orders: 1000 rows") {
		t.Errorf("after bad input: %v %q", res.IsError, text(res))
	}
	assertExitsOnStdinClose(t, p)
}

// TestSIGTERM: the server exits cleanly on SIGTERM.
func TestSIGTERM(t *testing.T) {
	p := spawn(t, "dw-quality", smallWarehouse(t))
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The transport reaps the process; closing the session waits for it.
	start := time.Now()
	_ = p.session.Close()
	if time.Since(start) > 3*time.Second {
		t.Errorf("no exit within 3s of SIGTERM")
	}
	st := p.cmd.ProcessState
	if st == nil {
		t.Fatal("process state unknown")
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Errorf("killed by %v: SIGTERM should end the server cleanly", ws.Signal())
	}
	if st.ExitCode() != 0 {
		t.Errorf("exit code %d after SIGTERM; stderr:\n%s", st.ExitCode(), p.stderr)
	}
}
