package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/mcpserver"
)

// TestBadLinesAreAnsweredAsTheTransportDoes: the starter and the agents'
// transport share the wire rules; here they are held to answering a table
// of bad lines with the same bytes, and to skipping a blank line.
func TestBadLinesAreAnsweredAsTheTransportDoes(t *testing.T) {
	const max = 4096
	deep := strings.Repeat("[", 1001) + strings.Repeat("]", 1001)
	lines := []string{
		`hello`, "\x00", "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"a\x00b\"}", "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"\xff\xfe\"}",
		`{"jsonrpc":"2.0","id":5,"method":"tools/li`, `{"jsonrpc":"2.0","id":6,"method":"ping"} {}`,
		`[{"jsonrpc":"2.0","id":7,"method":"ping"}]`, `[]`, `{"jsonrpc":"2.0","id":8,"method":"ping","params":{"x":` + deep + `}}`,
		strings.Repeat("[", 5000)[:max-1], `42`, `"a string"`, `{"id":9,"method":"ping"}`, `{"jsonrpc":"1.0","id":"abc","method":"ping"}`,
		`{"jsonrpc":"2.0","id":{},"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, `{"jsonrpc":"2.0","id":10,"method":7}`, `{"jsonrpc":"2.0","result":{}}`,
		`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"x","arguments":{"pad":"` + strings.Repeat("x", 2*max) + `"}}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"pad":"` + strings.Repeat("x", 2*max) + `"}}`,
	}
	srv, err := mcpserver.New(mcpserver.Agent{Name: "dw-test"}, "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		_ = srv.MCP.Run(context.Background(), &mcpserver.StdioTransport{In: inR, Out: outW, MaxMessageBytes: max})
	}()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	transport := &realAgent{t: t, in: inW, out: bufio.NewReaderSize(outR, 1<<20)}
	h := newHarness(t, "dw-quality", withMax(max))
	for _, l := range append(lines, "", "\r", `{"jsonrpc":"2.0","id":"last","method":"ping"}`) {
		transport.send(l)
		h.send(l)
		if strings.TrimSpace(l) == "" {
			continue // no answer; the ping after them shows nothing came
		}
		if got, want := h.next(), transport.next(); got != want {
			t.Errorf("%.60q\nstarter:   %s\ntransport: %s", l, got, want)
		}
	}
}

// TestToolCallDuringTheBuildCompletes drives the starter as a client
// would, with the SDK's client over a real process's stdio: it connects
// and lists tools at once, a tool call made before the agent exists gets
// progress saying it waits for the build, and it completes with the real
// agent's answer once the agent is in place.
func TestToolCallDuringTheBuildCompletes(t *testing.T) {
	bin, home := t.TempDir(), t.TempDir()
	cfg := filepath.Join(home, "dw.yaml")
	if err := os.WriteFile(cfg, []byte("store:\n  path: "+filepath.Join(home, "dw.db")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DW_STARTER_TEST_ROLE=starter", "DW_STARTER_TEST_AGENT=dw-incidents", "DW_STARTER_TEST_BIN="+bin,
		"DW_HOME="+home, "DW_CONFIG="+cfg, "DW_LOG_LEVEL=warn")
	cmd.Stderr = os.Stderr
	var mu sync.Mutex
	var progress []string
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, req.Params.Message)
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("connect and tools/list took %s", el)
	}
	if len(tools.Tools) < 10 || !strings.Contains(cs.InitializeResult().Instructions, "being built") {
		t.Fatalf("%d tools; instructions %q", len(tools.Tools), cs.InitializeResult().Instructions)
	}
	go func() {
		time.Sleep(2500 * time.Millisecond) // the build
		installAgent(t, bin, "dw-incidents", "DW_STARTER_TEST_ROLE=agent:dw-incidents")
	}()
	params := &mcp.CallToolParams{Name: "list_incidents", Arguments: map[string]any{}}
	params.SetProgressToken("first")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.StructuredContent == nil {
		t.Fatalf("list_incidents: %+v", res.Content)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) == 0 || !strings.Contains(progress[0], "waiting for the first build") {
		t.Errorf("progress: %q", progress)
	}
}
