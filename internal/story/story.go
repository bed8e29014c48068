// Package story drives the five agent binaries through a scenario pack's
// incident over real stdio, as an MCP client does, and returns what each
// tool answered. `dw demo run` prints it for a person; the end-to-end
// tests assert on it. Nothing here is product logic: the agents find
// everything from the data; this package only asks them, in order.
package story

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Env is where and how a story runs.
type Env struct {
	// BinDir holds the dw-* agent binaries and dw.
	BinDir string
	// Home is a fresh data directory for this run.
	Home string
	// Out receives the narration; nil discards it.
	Out io.Writer
	// Now is the wall time the pack's timeline is placed from.
	Now time.Time

	// primary is the person dw.yaml maps this terminal's login to.
	primary string
}

// Call is one tool call and its answer.
type Call struct {
	Agent   string         `json:"agent"`
	Tool    string         `json:"tool"`
	Args    map[string]any `json:"args"`
	IsError bool           `json:"is_error"`
	Text    string         `json:"text"`
	// Out is the structured content, decoded.
	Out map[string]any `json:"out"`
}

// agents are spawned once per phase; the clock differs between phases.
type agents struct {
	env      *Env
	sessions map[string]*mcp.ClientSession
	cmds     map[string]*exec.Cmd
}

func (e *Env) say(format string, args ...any) {
	if e.Out != nil {
		fmt.Fprintf(e.Out, format+"\n", args...)
	}
}

// start spawns the agents with the config and a clock reading at.
func (e *Env) start(ctx context.Context, names []string, at time.Time) (*agents, error) {
	a := &agents{env: e, sessions: map[string]*mcp.ClientSession{}, cmds: map[string]*exec.Cmd{}}
	logf, err := os.OpenFile(filepath.Join(e.Home, "agents.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		cmd := exec.Command(filepath.Join(e.BinDir, name))
		cmd.Env = append(os.Environ(), "DW_CONFIG="+filepath.Join(e.Home, "dw.yaml"), "DW_HOME="+e.Home,
			"DW_CLOCK="+at.UTC().Format(time.RFC3339))
		cmd.Stderr = logf
		client := mcp.NewClient(&mcp.Implementation{Name: "dw-demo", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			a.close()
			return nil, fmt.Errorf("start %s: %w (see %s)", name, err, logf.Name())
		}
		a.sessions[name], a.cmds[name] = cs, cmd
	}
	return a, nil
}

func (a *agents) close() {
	for _, cs := range a.sessions {
		cs.Close()
	}
}

// call asks one agent one tool and narrates the exchange in short.
func (a *agents) call(ctx context.Context, agent, tool string, args map[string]any) (*Call, error) {
	cs, ok := a.sessions[agent]
	if !ok {
		return nil, fmt.Errorf("agent %s is not running", agent)
	}
	a.env.say("\n▶ %s %s %s", agent, tool, brief(args))
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", agent, tool, err)
	}
	c := &Call{Agent: agent, Tool: tool, Args: args, IsError: res.IsError}
	for _, content := range res.Content {
		if t, ok := content.(*mcp.TextContent); ok {
			c.Text += t.Text
		}
	}
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil {
			_ = json.Unmarshal(raw, &c.Out)
		}
	}
	prefix := "◀ "
	if c.IsError {
		prefix = "◀ refused/error: "
	}
	a.env.say("%s", indent(prefix+c.Text, "  "))
	return c, nil
}

// must is call that treats a tool error as the story failing.
func (a *agents) must(ctx context.Context, agent, tool string, args map[string]any) (*Call, error) {
	c, err := a.call(ctx, agent, tool, args)
	if err != nil {
		return nil, err
	}
	if c.IsError {
		return c, fmt.Errorf("%s %s failed: %s", agent, tool, c.Text)
	}
	return c, nil
}

func brief(args map[string]any) string {
	raw, _ := json.Marshal(args)
	s := string(raw)
	if len(s) > 160 {
		s = s[:157] + "…"
	}
	return s
}

func indent(s, pad string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	const max = 14
	if len(lines) > max {
		lines = append(lines[:max], fmt.Sprintf("… (%d more lines)", len(lines)-max))
	}
	return pad + strings.Join(lines, "\n"+pad)
}

// runDW runs the human command at this terminal, as the person the
// config maps its login to, and narrates it.
func (e *Env) runDW(ctx context.Context, at time.Time, as string, args ...string) (string, error) {
	cfg := e.configFor(as, false)
	if cfg == "dw.yaml" {
		e.say("\n$ dw %s", strings.Join(args, " "))
	} else {
		e.say("\n$ DW_CONFIG=%s dw %s", cfg, strings.Join(args, " "))
	}
	cmd := exec.CommandContext(ctx, filepath.Join(e.BinDir, "dw"), args...)
	cmd.Env = append(os.Environ(), "DW_CONFIG="+filepath.Join(e.Home, cfg), "DW_HOME="+e.Home,
		"DW_CLOCK="+at.UTC().Format(time.RFC3339))
	out, err := cmd.CombinedOutput()
	e.say("%s", indent(string(out), "  "))
	if err != nil {
		return string(out), fmt.Errorf("dw %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// get walks a decoded JSON value by keys and indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

// str is get as a string.
func str(v any, path ...any) string {
	s, _ := get(v, path...).(string)
	return s
}
