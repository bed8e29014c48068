package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/agents"
	"github.com/dataworkers/dw/agents/catalog"
	"github.com/dataworkers/dw/agents/connectors"
	"github.com/dataworkers/dw/agents/incidents"
	"github.com/dataworkers/dw/agents/quality"
	"github.com/dataworkers/dw/agents/schema"
	"github.com/dataworkers/dw/internal/agentboot"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// The tests here hold the starter to the real agents: each agent runs as
// its binary does (agentboot.Main, in this test binary re-executed), over
// real stdio, and the starter must answer initialize and tools/list as it
// does, to the byte.

// specs are the agents' specs as their binary starts them (cmd/dw-agents).
var specs = map[string]func() agentboot.Spec{
	quality.Name:    quality.Spec,
	incidents.Name:  incidents.Spec,
	catalog.Name:    catalog.Spec,
	schema.Name:     schema.Spec,
	connectors.Name: connectors.Spec,
}

const testVersion = "v1.2.3-test"

// realAgent is an agent process answering over stdio.
type realAgent struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
	cmd *exec.Cmd
}

// startReal runs the agent as its binary would, in a data directory of
// its own with no configuration (the embedded default), plus env.
func startReal(t *testing.T, name string, env ...string) *realAgent {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DW_STARTER_TEST_ROLE=agent:"+name, "DW_HOME="+t.TempDir(), "DW_CONFIG=", "DW_LOG_LEVEL=warn")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	return &realAgent{t: t, in: in, out: bufio.NewReaderSize(out, 1<<20), cmd: cmd}
}

func (a *realAgent) send(line string) {
	a.t.Helper()
	if _, err := io.WriteString(a.in, line+"\n"); err != nil {
		a.t.Fatal(err)
	}
}

func (a *realAgent) next() string {
	a.t.Helper()
	got := make(chan string, 1)
	go func() {
		l, _ := a.out.ReadString('\n')
		got <- strings.TrimSuffix(l, "\n")
	}()
	select {
	case l := <-got:
		if l == "" {
			a.t.Fatal("the agent closed its output")
		}
		return l
	case <-time.After(30 * time.Second):
		a.t.Fatal("the agent did not answer within 30 s")
	}
	return ""
}

func initializeLine(id int, version string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`, id, version)
}

const (
	initializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	toolsListLine   = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
)

// resultOf is a response line's result.
func resultOf(t *testing.T, line string) json.RawMessage {
	t.Helper()
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil || r.Result == nil {
		t.Fatalf("not a result: %.300s (%v)", line, err)
	}
	return r.Result
}

// generated is an agent's data file as the real agent gives it now.
func generated(t *testing.T, name string) []byte {
	t.Helper()
	a := startReal(t, name)
	a.send(initializeLine(1, "2025-11-25"))
	var init struct {
		Capabilities json.RawMessage `json:"capabilities"`
		Instructions string          `json:"instructions"`
		ServerInfo   struct {
			Name, Title string
		} `json:"serverInfo"`
	}
	if err := json.Unmarshal(resultOf(t, a.next()), &init); err != nil {
		t.Fatal(err)
	}
	a.send(initializedLine)
	a.send(toolsListLine)
	tools := resultOf(t, a.next())
	static := specs[name]().Instructions
	if !strings.HasPrefix(init.Instructions, static) {
		t.Fatalf("%s: its instructions do not begin with its Spec's: the starter's static part would be wrong", name)
	}
	if init.ServerInfo.Name != name {
		t.Fatalf("serverInfo.name %q, want %q", init.ServerInfo.Name, name)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(agentData{Name: name, Title: init.ServerInfo.Title, Instructions: static, Capabilities: init.Capabilities, Tools: tools}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestEmbeddedDataIsCurrent: each file in data/ is what its agent answers
// now, and there is one per agent. UPDATE_STARTER_DATA=true (go generate
// ./cmd/dw-starter) rewrites them.
func TestEmbeddedDataIsCurrent(t *testing.T) {
	var names []string
	for _, e := range agents.All() {
		names = append(names, e.Name)
		if specs[e.Name] == nil {
			t.Fatalf("%s has no Spec in this test's specs", e.Name)
		}
	}
	slices.Sort(names)
	update := os.Getenv("UPDATE_STARTER_DATA") == "true"
	for _, name := range names {
		want := generated(t, name)
		path := filepath.Join("data", name+".json")
		if update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from what %s answers now (%v); run go generate ./cmd/dw-starter", path, name, err)
		}
	}
	if have := agentNames(); !update && !slices.Equal(have, names) {
		t.Errorf("data/ holds %v, want one file per agent: %v; run go generate ./cmd/dw-starter", have, names)
	}
}

// TestStarterAnswersAsTheAgentDoes: for every agent and every protocol
// version a client may ask for, the starter's answers to initialize and
// tools/list are the agent's, byte for byte; only the instructions differ,
// by the part only the running agent knows.
func TestStarterAnswersAsTheAgentDoes(t *testing.T) {
	versions := append(mcp.SupportedProtocolVersions(), "", "1999-01-01", "2099-01-01")
	for _, name := range agentNames() {
		for _, v := range versions {
			if name != quality.Name && v != "2025-06-18" {
				continue // every version on one agent; one version on the others
			}
			t.Run(name+"/"+v, func(t *testing.T) {
				real := startReal(t, name)
				h := newHarness(t, name, withVersion(testVersion))
				for _, line := range []string{initializeLine(1, v), initializedLine, toolsListLine, `{"jsonrpc":"2.0","id":"p","method":"ping"}`} {
					real.send(line)
					h.send(line)
					if line == initializedLine {
						continue
					}
					want, got := real.next(), h.next()
					if line == initializeLine(1, v) {
						got = sameInstructions(t, got, want)
					}
					if got != want {
						t.Errorf("%.60s…\nstarter: %.400s\n  agent: %.400s", line, got, want)
					}
				}
			})
		}
	}
}

// sameInstructions is the starter's initialize answer with the agent's
// instructions in place of its own, after checking its own are the
// agent's static part and the note.
func sameInstructions(t *testing.T, starter, agent string) string {
	t.Helper()
	instr := func(line string) string {
		var r struct {
			Result struct{ Instructions string }
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		return r.Result.Instructions
	}
	mine, theirs := instr(starter), instr(agent)
	static, _, _ := strings.Cut(mine, "\n\n"+firstSessionNote)
	if !strings.HasSuffix(mine, firstSessionNote) || !strings.HasPrefix(theirs, static) || static == "" {
		t.Errorf("starter instructions are not the agent's static part and the note:\n%s", mine)
	}
	return strings.Replace(starter, string(encode(mine)), string(encode(theirs)), 1)
}

// TestProtocolVersionsAreTheSDKs: the starter negotiates from the list of
// the SDK the agents are built with.
func TestProtocolVersionsAreTheSDKs(t *testing.T) {
	if got := mcp.SupportedProtocolVersions(); !slices.Equal(got, protocolVersions) {
		t.Errorf("the SDK supports %v; the starter's protocolVersions are %v", got, protocolVersions)
	}
}

// TestVersionIsTheAgents: the starter's serverInfo.version is worked out
// as the agents' is.
func TestVersionIsTheAgents(t *testing.T) {
	for _, linked := range []string{"", "dev", "v1.0.0", "4df4305-dirty"} {
		if got, want := agentVersion(linked), mcpserver.Version(linked); got != want {
			t.Errorf("agentVersion(%q) = %q, mcpserver.Version gives %q", linked, got, want)
		}
	}
}

// TestStarterLinksOnlyTheStandardLibrary: the starter must build in
// seconds on a cold cache, so it imports the standard library and, of this
// module, only the stdlib-only wire rules it shares with the agents'
// transport.
func TestStarterLinksOnlyTheStandardLibrary(t *testing.T) {
	const module = "github.com/dataworkers/dw/"
	allowed := map[string]bool{module + "cmd/dw-starter": true, module + "internal/mcpserver/wire": true}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+"cmd/dw-starter").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, p := range deps {
		if !allowed[p] {
			t.Errorf("dw-starter links %s: it may link only the standard library and %v", p, allowed)
		}
	}
	if len(deps) != len(allowed) {
		t.Errorf("go list found %v; want exactly %v", deps, allowed)
	}
}
