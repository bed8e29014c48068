package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataworkers/dw/agents"
)

// asAgents makes this test binary dw-agents itself (TestMain); the name it
// is started as (argv[0]) picks the agent, as a hard link's name does.
const asAgents = "DW_TEST_AS_DW_AGENTS"

func TestMain(m *testing.M) {
	if os.Getenv(asAgents) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startAs runs this binary as dw-agents with argv[0] set to name.
func startAs(t *testing.T, name string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Args[0] = name
	cmd.Env = append(os.Environ(), asAgents+"=1", "DW_HOME="+t.TempDir(), "DW_CONFIG=", "DW_LOG_LEVEL=warn")
	return cmd
}

// TestServesTheAgentItIsStartedAs: under each agent's name, by path or
// bare, the binary answers initialize as that agent.
func TestServesTheAgentItIsStartedAs(t *testing.T) {
	for _, a := range agents.All() {
		for _, argv0 := range []string{a.Name, filepath.Join("/opt/dw/bin", a.Name)} {
			cmd := startAs(t, argv0)
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
			_, _ = in.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}` + "\n"))
			line, err := bufio.NewReader(out).ReadBytes('\n')
			in.Close()
			_ = cmd.Wait()
			if err != nil {
				t.Fatalf("%s: no answer to initialize: %v", argv0, err)
			}
			var resp struct {
				Result struct {
					ServerInfo struct {
						Name string `json:"name"`
					} `json:"serverInfo"`
				} `json:"result"`
			}
			if err := json.Unmarshal(line, &resp); err != nil {
				t.Fatalf("%s: %v in %s", argv0, err, line)
			}
			if resp.Result.ServerInfo.Name != a.Name {
				t.Fatalf("started as %s, the server says it is %q", argv0, resp.Result.ServerInfo.Name)
			}
		}
	}
}

// TestAnyOtherNameIsAUsageError: started under its own name or any name
// that is not an agent's (a near miss, an agent's name with a suffix, a
// file in a directory named like an agent, none), it serves nothing: exit
// 2, the agents' names on stderr, nothing on stdout.
func TestAnyOtherNameIsAUsageError(t *testing.T) {
	for _, argv0 := range []string{"dw-agents", "dw-qualit", "dw-quality.sh", "/bin/dw-quality.d/x", ""} {
		cmd := startAs(t, argv0)
		var stdout, stderr bytes.Buffer
		cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Fatalf("started as %q: %v; want exit status 2", argv0, err)
		}
		if stdout.Len() != 0 {
			t.Fatalf("started as %q: wrote %q to stdout", argv0, stdout.String())
		}
		for _, a := range agents.All() {
			if !strings.Contains(stderr.String(), a.Name) {
				t.Fatalf("started as %q: stderr %q does not name %s", argv0, stderr.String(), a.Name)
			}
		}
	}
}
