package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/agents"
)

// binDir holds the agent binaries built once for this test process.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dw-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := func() int {
		root, err := moduleRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// One go build for every command links them in parallel and shares
		// the compiled packages.
		cmd := exec.Command("go", "build", "-o", binDir+string(os.PathSeparator), "./cmd/...")
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build agents:", err)
			return 1
		}
		// The agents' names, as make build installs them.
		if err := agents.Install(binDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	os.RemoveAll(dir)
	os.Exit(code)
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the module")
	}
	return filepath.Dir(gomod), nil
}

// agentProc is one spawned agent with a connected client.
type agentProc struct {
	name    string
	cmd     *exec.Cmd
	session *mcp.ClientSession
	stderr  *logBuf
}

// spawn starts an agent binary with env (added to a minimal environment)
// and connects an MCP client over its stdio.
func spawn(t *testing.T, name string, env map[string]string) *agentProc {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, name))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr := &logBuf{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "test"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v\nstderr:\n%s", name, err, stderr)
	}
	p := &agentProc{name: name, cmd: cmd, session: cs, stderr: stderr}
	t.Cleanup(func() { cs.Close() })
	return p
}

// call calls a tool and fails the test on a protocol error.
func (p *agentProc) call(t *testing.T, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := p.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %s: %v\nstderr:\n%s", p.name, tool, err, p.stderr)
	}
	return res
}

// text joins a result's text content.
func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
