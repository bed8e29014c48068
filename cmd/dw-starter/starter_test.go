package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/agentboot"
	"github.com/dataworkers/dw/internal/mcpserver/wire"
)

// TestMain lets the test binary stand in for the programs around the
// starter: DW_STARTER_TEST_ROLE=agent:NAME is that agent as its binary
// runs it, echo a fake agent the tests can watch, starter the starter's
// own main.
func TestMain(m *testing.M) {
	switch role := os.Getenv("DW_STARTER_TEST_ROLE"); {
	case strings.HasPrefix(role, "agent:"):
		os.Exit(agentboot.Main(specs[strings.TrimPrefix(role, "agent:")](), testVersion))
	case role == "echo":
		os.Exit(echoAgent())
	case role == "starter":
		os.Exit(starterMain(os.Getenv("DW_STARTER_TEST_AGENT"), os.Getenv("DW_STARTER_TEST_BIN"), newLogger()))
	}
	os.Exit(m.Run())
}

// echoAgent is a fake agent: it appends every line it reads to
// $DW_STARTER_TEST_LOG, answers initialize with the client's protocol
// version (or $DW_STARTER_TEST_PROTO), answers every other request with
// its method and the line's place in its input, after arguments.sleep_ms
// and one progress notification when the call sent a token, finishes
// running calls when its input ends, and exits 7 on SIGTERM.
func echoAgent() int {
	logf, err := os.OpenFile(os.Getenv("DW_STARTER_TEST_LOG"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Fprintln(logf, "SIGTERM")
		os.Exit(7)
	}()
	var mu sync.Mutex
	write := func(v any) {
		mu.Lock()
		defer mu.Unlock()
		os.Stdout.Write(append(encode(v), '\n'))
	}
	var wg sync.WaitGroup
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		fmt.Fprintln(logf, sc.Text())
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Arguments       struct {
					SleepMS int `json:"sleep_ms"`
				} `json:"arguments"`
				Meta struct {
					Token json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil || m.Method == "" {
			continue
		}
		seen := n
		wg.Add(1)
		go func() {
			defer wg.Done()
			if m.Method == "initialize" {
				v := os.Getenv("DW_STARTER_TEST_PROTO")
				if v == "" {
					v = m.Params.ProtocolVersion
				}
				write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"protocolVersion": v, "from": "agent"}})
				return
			}
			if m.Params.Meta.Token != nil {
				write(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"progressToken": m.Params.Meta.Token, "progress": 1, "message": "agent"}})
			}
			time.Sleep(time.Duration(m.Params.Arguments.SleepMS) * time.Millisecond)
			write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"method": m.Method, "seen": seen}})
		}()
	}
	wg.Wait()
	return 0
}

// harness runs a session in this process over pipes, against a bin
// directory of its own.
type harness struct {
	t      *testing.T
	bin    string
	in     *io.PipeWriter
	lines  chan string
	sig    chan os.Signal
	done   chan struct{}
	code   int
	logs   *syncBuffer
	agentL string // the echo agent's log
}

type option func(*session)

func withVersion(v string) option          { return func(s *session) { s.version = v } }
func withDrain(d time.Duration) option     { return func(s *session) { s.drain = d } }
func withQueueCap(n int) option            { return func(s *session) { s.queueCap = n } }
func withMax(n int) option                 { return func(s *session) { s.max = n } }
func withIdleLimit(d time.Duration) option { return func(s *session) { s.build.idleLimit = d } }
func withBin(dir string) option            { return func(s *session) { s.build.bin = dir } }

func newHarness(t *testing.T, name string, opts ...option) *harness {
	t.Helper()
	data, err := loadAgent(name)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &harness{t: t, bin: t.TempDir(), in: inW, lines: make(chan string, 1000), sig: make(chan os.Signal, 1),
		done: make(chan struct{}), logs: &syncBuffer{}}
	h.agentL = filepath.Join(h.bin, ".agent.log")
	s := &session{agent: data, version: testVersion, build: newBuild(h.bin, name, time.Now()), in: inR, out: outW,
		max: wire.DefaultMaxMessageBytes, logger: slog.New(slog.NewTextHandler(h.logs, nil)), signals: h.sig,
		poll: 20 * time.Millisecond, heartbeat: 100 * time.Millisecond, drain: 5 * time.Second}
	for _, o := range opts {
		o(s)
	}
	h.bin = s.build.bin
	go func() {
		h.code = s.run()
		outW.Close()
		close(h.done)
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-h.done:
		case <-time.After(20 * time.Second):
			t.Error("the starter did not exit within 20 s of its input ending")
		}
		outR.Close()
	})
	return h
}

func (h *harness) send(line string) {
	h.t.Helper()
	if _, err := io.WriteString(h.in, line+"\n"); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) next() string {
	h.t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok {
			h.t.Fatal("the starter closed its output")
		}
		return l
	case <-time.After(20 * time.Second):
		h.t.Fatal("no line from the starter within 20 s")
	}
	return ""
}

// nextMsg is the next line, decoded.
func (h *harness) nextMsg() msg {
	h.t.Helper()
	l := h.next()
	var m msg
	if err := json.Unmarshal([]byte(l), &m); err != nil {
		h.t.Fatalf("not JSON: %q", l)
	}
	m.raw = l
	return m
}

// quiet fails if the starter writes anything within d.
func (h *harness) quiet(d time.Duration) {
	h.t.Helper()
	select {
	case l := <-h.lines:
		h.t.Fatalf("unexpected line: %.300s", l)
	case <-time.After(d):
	}
}

func (h *harness) exitCode() int {
	h.t.Helper()
	select {
	case <-h.done:
		return h.code
	case <-time.After(20 * time.Second):
		h.t.Fatal("the starter did not exit within 20 s")
	}
	return -1
}

// handshake initializes the session as a client does.
func (h *harness) handshake() {
	h.t.Helper()
	h.send(initializeLine(0, "2025-06-18"))
	if m := h.nextMsg(); string(m.ID) != "0" || m.Result == nil {
		h.t.Fatalf("initialize: %s", m.raw)
	}
	h.send(initializedLine)
}

type msg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Token    json.RawMessage `json:"progressToken"`
		Progress float64         `json:"progress"`
		Message  string          `json:"message"`
	} `json:"params"`
	Result *struct {
		Method  string `json:"method"`
		Seen    int    `json:"seen"`
		IsError bool   `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		ProtocolVersion string `json:"protocolVersion"`
		From            string `json:"from"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw string
}

// installAgent puts a fake agent at bin/NAME as the build does: written
// beside it, then renamed into place.
func (h *harness) installAgent(name string, env ...string) {
	h.t.Helper()
	installAgent(h.t, h.bin, name, append([]string{"DW_STARTER_TEST_ROLE=echo", "DW_STARTER_TEST_LOG=" + h.agentL}, env...)...)
}

func installAgent(t *testing.T, bin, name string, env ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nexec env"
	for _, e := range env {
		script += " '" + e + "'"
	}
	script += " '" + exe + "'\n"
	tmp := filepath.Join(bin, ".tmp-"+name)
	if err := os.WriteFile(tmp, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(bin, name)); err != nil {
		t.Fatal(err)
	}
}

// agentLog is what the fake agent has read, line by line.
func (h *harness) agentLog() []string {
	raw, _ := os.ReadFile(h.agentL)
	return strings.Split(strings.TrimSpace(string(raw)), "\n")
}

func call(id int, tool string, extra string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{%s}}}`, id, tool, extra)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHandshakeIsAnsweredBeforeTheBuild: initialize, ping and tools/list
// are answered at once; server/discover is refused so that a client of
// the stateless protocol falls back to initialize; nothing else is
// answered while the agent is missing.
func TestHandshakeIsAnsweredBeforeTheBuild(t *testing.T) {
	h := newHarness(t, "dw-schema", withDrain(100*time.Millisecond))
	h.send(`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	if m := h.nextMsg(); m.Error == nil || m.Error.Code != wire.CodeMethodNotFound {
		t.Fatalf("server/discover: %s", m.raw)
	}
	h.send(initializeLine(1, "2025-03-26"))
	m := h.nextMsg()
	if m.Result == nil || m.Result.ProtocolVersion != "2025-03-26" || !strings.Contains(m.raw, "being built for the first time") {
		t.Fatalf("initialize: %s", m.raw)
	}
	h.send(initializedLine)
	h.send(toolsListLine)
	if got := string(resultOf(t, h.next())); got != string(mustLoad(t, "dw-schema").Tools) {
		t.Errorf("tools/list is not the embedded one: %.300s", got)
	}
	h.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if got := h.next(); got != `{"jsonrpc":"2.0","id":3,"result":{}}` {
		t.Errorf("ping: %s", got)
	}
	h.send(call(4, "list_schema_changes", ""))
	h.quiet(300 * time.Millisecond)
}

func mustLoad(t *testing.T, name string) *agentData {
	t.Helper()
	a, err := loadAgent(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestQueueIsReplayedInOrder: once the agent is built it gets the
// client's initialize first and every held message in the order it came;
// its answer to initialize is dropped (the client has one), the rest reach
// the client, and from then on the session passes through.
func TestQueueIsReplayedInOrder(t *testing.T) {
	h := newHarness(t, "dw-quality")
	h.handshake()
	held := []string{
		call(1, "list_tables", ""),
		`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"info"}}`,
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`,
		call(3, "run_quality_check", `"table":"t"`),
	}
	for _, l := range held {
		h.send(l)
	}
	h.quiet(200 * time.Millisecond)
	h.installAgent("dw-quality")
	got := map[string]msg{}
	for range 3 {
		m := h.nextMsg()
		if m.Result == nil || m.Result.From == "agent" {
			t.Fatalf("want the answers to the held calls only: %s", m.raw)
		}
		got[string(m.ID)] = m
	}
	if got["1"].Result.Method != "tools/call" || got["2"].Result.Method != "logging/setLevel" || got["3"].Result.Method != "tools/call" {
		t.Errorf("answers: %v", got)
	}
	h.send(call(4, "list_tables", ""))
	if m := h.nextMsg(); string(m.ID) != "4" || m.Result == nil || m.Result.Seen != 7 {
		t.Errorf("after the hand-over: %s", m.raw)
	}
	want := append([]string{initializeLine(0, "2025-06-18"), initializedLine}, held...)
	want = append(want, call(4, "list_tables", ""))
	if log := h.agentLog(); strings.Join(log, "\n") != strings.Join(want, "\n") {
		t.Errorf("the agent read\n%s\nwant\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
	h.in.Close()
	if code := h.exitCode(); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// TestAnotherProtocolVersionIsLogged: if the agent negotiates otherwise
// than the starter answered, the session goes on and stderr says so.
func TestAnotherProtocolVersionIsLogged(t *testing.T) {
	h := newHarness(t, "dw-quality")
	h.handshake()
	h.send(call(1, "list_tables", ""))
	h.installAgent("dw-quality", "DW_STARTER_TEST_PROTO=2024-11-05")
	if m := h.nextMsg(); string(m.ID) != "1" || m.Result == nil {
		t.Fatalf("held call: %s", m.raw)
	}
	if !strings.Contains(h.logs.String(), "another protocol version") || !strings.Contains(h.logs.String(), "2024-11-05") {
		t.Errorf("stderr does not say the versions differ:\n%s", h.logs)
	}
}

// TestEndOfInputDrains: the client closes its input with a call held; the
// build finishes within the drain time, the call runs and is answered, and
// the starter exits with the agent's status. Without held calls it exits
// at once.
func TestEndOfInputDrains(t *testing.T) {
	h := newHarness(t, "dw-quality")
	h.handshake()
	h.send(call(1, "list_tables", `"sleep_ms":300`))
	h.in.Close()
	time.Sleep(200 * time.Millisecond)
	h.installAgent("dw-quality")
	if m := h.nextMsg(); string(m.ID) != "1" || m.Result == nil || m.Result.Method != "tools/call" {
		t.Fatalf("held call: %s", m.raw)
	}
	if code := h.exitCode(); code != 0 {
		t.Errorf("exit %d", code)
	}

	h = newHarness(t, "dw-quality")
	h.handshake()
	start := time.Now()
	h.in.Close()
	h.exitCode()
	if el := time.Since(start); el > time.Second {
		t.Errorf("with nothing held the starter took %s to exit", el)
	}
}

// TestEndOfInputWithoutTheBuild: a call still held when the drain time
// has passed is answered with why it did not run.
func TestEndOfInputWithoutTheBuild(t *testing.T) {
	h := newHarness(t, "dw-quality", withDrain(300*time.Millisecond))
	h.handshake()
	h.send(call(1, "list_tables", ""))
	h.in.Close()
	m := h.nextMsg()
	if m.Result == nil || !m.Result.IsError || !strings.Contains(m.Result.Content[0].Text, "was not run") {
		t.Fatalf("held call: %s", m.raw)
	}
	h.exitCode()
}

// TestSignalIsPassedToTheAgent: SIGTERM reaches the agent and the starter
// exits with its status, within two seconds; before the agent runs it
// exits at once.
func TestSignalIsPassedToTheAgent(t *testing.T) {
	h := newHarness(t, "dw-quality")
	h.handshake()
	h.send(call(1, "list_tables", ""))
	h.installAgent("dw-quality")
	h.nextMsg()
	start := time.Now()
	h.sig <- syscall.SIGTERM
	if code := h.exitCode(); code != 7 {
		t.Errorf("exit %d, want the agent's 7", code)
	}
	if el := time.Since(start); el > 2500*time.Millisecond {
		t.Errorf("took %s", el)
	}
	if log := h.agentLog(); log[len(log)-1] != "SIGTERM" {
		t.Errorf("the agent did not get SIGTERM: %v", log)
	}

	h = newHarness(t, "dw-quality")
	h.handshake()
	h.sig <- syscall.SIGTERM
	if code := h.exitCode(); code != 0 {
		t.Errorf("before the agent: exit %d", code)
	}
}

// TestBuildFailure: a failed build answers every held and later call with
// what failed and what to do, and the starter keeps serving; if the agent
// appears after all, it takes the session over.
func TestBuildFailure(t *testing.T) {
	h := newHarness(t, "dw-incidents")
	h.handshake()
	h.send(call(1, "list_incidents", ""))
	h.send(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"info"}}`)
	os.WriteFile(filepath.Join(h.bin, ".build.log"), []byte("go build\nagents/x.go:1:1: undefined: frobnicate\n"), 0o644)
	os.WriteFile(filepath.Join(h.bin, ".build.failed"), []byte("now\n"), 0o644)
	check := func(m msg) {
		t.Helper()
		var text string
		switch {
		case m.Result != nil && m.Result.IsError:
			text = m.Result.Content[0].Text
		case m.Error != nil && m.Error.Code == wire.CodeInternalError:
			text = m.Error.Message
		default:
			t.Fatalf("not an error: %s", m.raw)
		}
		for _, want := range []string{"undefined: frobnicate", ".build.log", "make build"} {
			if !strings.Contains(text, want) {
				t.Errorf("the error does not say %q: %s", want, text)
			}
		}
	}
	for _, id := range []string{"1", "2"} {
		m := h.nextMsg()
		if string(m.ID) != id {
			t.Fatalf("want the answer to %s: %s", id, m.raw)
		}
		check(m)
	}
	h.send(call(3, "list_incidents", ""))
	check(h.nextMsg())
	h.send(toolsListLine)
	resultOf(t, h.next())
	// make build in a terminal, with the client still connected.
	h.installAgent("dw-incidents")
	time.Sleep(200 * time.Millisecond)
	h.send(call(4, "list_incidents", ""))
	if m := h.nextMsg(); string(m.ID) != "4" || m.Result == nil || m.Result.Method != "tools/call" {
		t.Fatalf("after a later build: %s", m.raw)
	}
	if log := h.agentLog(); len(log) != 3 || log[0] != initializeLine(0, "2025-06-18") || log[1] != initializedLine {
		t.Errorf("the agent read %q", log)
	}
}

// TestNoBuildRunning: with no binary, no build holding the lock and no
// failure written, the starter stops waiting after its idle limit.
func TestNoBuildRunning(t *testing.T) {
	h := newHarness(t, "dw-quality", withIdleLimit(300*time.Millisecond))
	h.handshake()
	h.send(call(1, "list_tables", ""))
	m := h.nextMsg()
	if m.Result == nil || !m.Result.IsError || !strings.Contains(m.Result.Content[0].Text, "no build of the agents") {
		t.Fatalf("%s", m.raw)
	}
}

// TestAgentWaitsForItsHelpers: while the build holds the lock, bin/AGENT
// is not enough until every helper is there too: the agents run dw for
// their first store call and a warehouse child for their first warehouse
// call. The helpers are start-agent.sh's.
func TestAgentWaitsForItsHelpers(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "start-agent.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^helpers="([^"]*)"$`).FindSubmatch(script)
	if m == nil || !slices.Equal(strings.Fields(string(m[1])), helpers) {
		t.Fatalf("start-agent.sh builds the helpers %q; the starter waits for %q", m, helpers)
	}
	h := newHarness(t, "dw-quality")
	f, err := os.Create(filepath.Join(h.bin, ".build.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	h.handshake()
	h.send(call(1, "list_tables", ""))
	h.installAgent("dw-quality")
	for _, helper := range helpers {
		h.quiet(300 * time.Millisecond)
		installAgent(t, h.bin, helper, "DW_STARTER_TEST_ROLE=echo")
	}
	if m := h.nextMsg(); string(m.ID) != "1" || m.Result == nil {
		t.Fatalf("%s", m.raw)
	}
}

// TestCancelledHeldCallNeverRuns: a call the client cancels while it is
// held is dropped, and so is the cancellation.
func TestCancelledHeldCallNeverRuns(t *testing.T) {
	h := newHarness(t, "dw-quality")
	h.handshake()
	h.send(call(1, "run_quality_check", `"table":"t"`))
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"changed my mind"}}`)
	h.send(call(2, "list_tables", ""))
	h.installAgent("dw-quality")
	if m := h.nextMsg(); string(m.ID) != "2" {
		t.Fatalf("%s", m.raw)
	}
	if log := h.agentLog(); len(log) != 3 || !strings.Contains(log[2], `"id":2`) {
		t.Errorf("the agent read %q", log)
	}
}

// TestQueueIsBounded: past its byte cap a call is answered at once with
// why, and the calls held before it still run.
func TestQueueIsBounded(t *testing.T) {
	h := newHarness(t, "dw-quality", withQueueCap(700))
	h.handshake()
	h.send(call(1, "list_tables", `"pad":"`+strings.Repeat("x", 300)+`"`))
	h.send(call(2, "list_tables", `"pad":"`+strings.Repeat("x", 300)+`"`))
	m := h.nextMsg()
	if string(m.ID) != "2" || m.Result == nil || !m.Result.IsError || !strings.Contains(m.Result.Content[0].Text, "bytes of messages waiting") {
		t.Fatalf("%s", m.raw)
	}
	h.installAgent("dw-quality")
	if m := h.nextMsg(); string(m.ID) != "1" || m.Result == nil || m.Result.IsError {
		t.Fatalf("%s", m.raw)
	}
}

// TestProgressWhileWaiting: a held call with a progress token hears that
// it waits for the build, rising; the agent's own progress for it then
// rises above it.
func TestProgressWhileWaiting(t *testing.T) {
	h := newHarness(t, "dw-quality")
	h.handshake()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_tables","arguments":{},"_meta":{"progressToken":"tok"}}}`)
	last := 0.0
	for range 3 {
		m := h.nextMsg()
		if m.Method != "notifications/progress" || string(m.Params.Token) != `"tok"` || m.Params.Progress <= last || !strings.Contains(m.Params.Message, "waiting for the first build") {
			t.Fatalf("%s", m.raw)
		}
		last = m.Params.Progress
	}
	h.installAgent("dw-quality")
	for {
		m := h.nextMsg()
		if m.Method == "notifications/progress" {
			if m.Params.Progress <= last {
				t.Errorf("progress fell from %v to %v: %s", last, m.Params.Progress, m.raw)
			}
			last = m.Params.Progress
			continue
		}
		if string(m.ID) != "1" || m.Result == nil {
			t.Fatalf("%s", m.raw)
		}
		break
	}
}

// TestTwoClientsAtOnce: two sessions of one agent wait on one build and
// each gets an agent of its own.
func TestTwoClientsAtOnce(t *testing.T) {
	a := newHarness(t, "dw-quality")
	b := newHarness(t, "dw-quality", withBin(a.bin))
	a.handshake()
	b.handshake()
	a.send(call(1, "list_tables", ""))
	b.send(call(1, "list_tables", ""))
	a.installAgent("dw-quality")
	for _, h := range []*harness{a, b} {
		if m := h.nextMsg(); string(m.ID) != "1" || m.Result == nil || m.Result.Seen != 3 {
			t.Fatalf("%s", m.raw)
		}
	}
	if n := strings.Count(strings.Join(a.agentLog(), "\n"), `"method":"initialize"`); n != 2 {
		t.Errorf("the agents read %d initializes, want one each", n)
	}
}

// TestBatchIsHeldWholeFor20250326: in a session that negotiated the one
// revision with batches, a batch sent during the build reaches the agent
// as the line it was, after what came before it; in any other session it
// is refused as the agent's transport refuses it, and never held.
func TestBatchIsHeldWholeFor20250326(t *testing.T) {
	batch := `[` + call(1, "list_tables", "") + `,` + call(2, "list_tables", "") + `]`
	t.Run("2025-03-26", func(t *testing.T) {
		h := newHarness(t, "dw-quality")
		h.send(initializeLine(0, "2025-03-26"))
		if m := h.nextMsg(); m.Result == nil || m.Result.ProtocolVersion != "2025-03-26" {
			t.Fatalf("initialize: %s", m.raw)
		}
		h.send(initializedLine)
		h.send(call(3, "list_tables", ""))
		h.send(batch)
		h.quiet(200 * time.Millisecond)
		h.installAgent("dw-quality")
		// The fake agent answers single lines only; the real transport's
		// batches are mcpserver's tests.
		if m := h.nextMsg(); string(m.ID) != "3" || m.Result == nil || m.Result.Method != "tools/call" {
			t.Fatalf("want the agent's answer to the held call: %s", m.raw)
		}
		h.quiet(200 * time.Millisecond)
		want := []string{initializeLine(0, "2025-03-26"), initializedLine, call(3, "list_tables", ""), batch}
		if log := h.agentLog(); strings.Join(log, "\n") != strings.Join(want, "\n") {
			t.Errorf("the agent read\n%s\nwant\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("2025-06-18", func(t *testing.T) {
		h := newHarness(t, "dw-quality")
		h.handshake()
		h.send(batch)
		m := h.nextMsg()
		_, p := wire.Check([]byte(batch))
		if m.Error == nil || int64(m.Error.Code) != p.Code || m.Error.Message != p.Message || string(m.ID) != "null" {
			t.Fatalf("want the transport's refusal %+v: %s", p, m.raw)
		}
		h.installAgent("dw-quality")
		h.send(call(4, "list_tables", ""))
		if m := h.nextMsg(); string(m.ID) != "4" {
			t.Fatalf("after the hand-over: %s", m.raw)
		}
		for _, l := range h.agentLog() {
			if strings.HasPrefix(l, "[") {
				t.Errorf("a refused batch reached the agent: %s", l)
			}
		}
	})
}
