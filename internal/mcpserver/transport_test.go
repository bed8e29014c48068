package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/mcpserver/wire"
)

type slowIn struct {
	Spin bool `json:"spin,omitempty" jsonschema:"burn CPU until cancelled instead of sleeping"`
	MS   int  `json:"ms,omitempty" jsonschema:"how long to sleep"`
	// Stubborn sleeps the whole time even when cancelled, as a handler
	// waiting on a driver that does not watch its context does.
	Stubborn bool `json:"stubborn,omitempty" jsonschema:"sleep the whole time even when cancelled"`
}

type slowOut struct {
	Slept int `json:"slept" jsonschema:"milliseconds slept"`
}

// harness runs serve over pipes, as the process would over stdio.
type harness struct {
	t       *testing.T
	in      *io.PipeWriter
	lines   chan string
	exit    chan int
	sig     chan os.Signal
	stopped atomic.Int32 // calls of "slow" that saw their context end
}

func newHarness(t *testing.T, tr *StdioTransport) *harness {
	t.Helper()
	return newHarnessAt(t, tr, "2025-06-18")
}

// newHarnessAt is newHarness with the client asking for protocol version.
func newHarnessAt(t *testing.T, tr *StdioTransport, version string) *harness {
	t.Helper()
	h := newUninitialized(t, tr)
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if r := h.next(); r.Error != nil {
		t.Fatalf("initialize: %+v", r.Error)
	}
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return h
}

// newUninitialized starts the server and sends nothing.
func newUninitialized(t *testing.T, tr *StdioTransport) *harness {
	t.Helper()
	h := &harness{t: t, lines: make(chan string, 100), exit: make(chan int, 1), sig: make(chan os.Signal, 1)}
	s, err := New(Agent{Name: "dw-test", Instructions: "test", Register: func(s *Server) error {
		Add(s, Tool{Name: "echo", Description: "echoes", ReadOnly: true, Idempotent: true},
			func(ctx context.Context, in echoIn) (*echoOut, string, error) {
				return &echoOut{Word: in.Word}, "echoed", nil
			})
		AddRaw(s, Tool{Name: "ask", Description: "asks the person yes or no", ReadOnly: true, Idempotent: true},
			func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, *echoOut, error) {
				if len(req.Params.InputResponses) == 0 {
					return &mcp.CallToolResult{RequestState: "asked", InputRequests: mcp.InputRequestMap{"q": &mcp.ElicitParams{
						Mode: "form", Message: "yes?", RequestedSchema: map[string]any{"type": "object",
							"properties": map[string]any{"answer": map[string]any{"type": "string", "enum": []string{"yes", "no"}}},
							"required":   []string{"answer"}}}}}, nil, nil
				}
				r, _ := req.Params.InputResponses["q"].(*mcp.ElicitResult)
				if r == nil {
					return nil, nil, fmt.Errorf("no answer")
				}
				answer, _ := r.Content["answer"].(string)
				return nil, &echoOut{Word: r.Action + " " + answer}, nil
			})
		Add(s, Tool{Name: "slow", Description: "takes its time", ReadOnly: true, Idempotent: true},
			func(ctx context.Context, in slowIn) (*slowOut, string, error) {
				if in.Stubborn {
					time.Sleep(time.Duration(in.MS) * time.Millisecond)
					if ctx.Err() != nil {
						h.stopped.Add(1)
						return nil, "", ctx.Err()
					}
					return &slowOut{Slept: in.MS}, "slept", nil
				}
				if in.Spin {
					for ctx.Err() == nil {
					}
					h.stopped.Add(1)
					return nil, "", ctx.Err()
				}
				select {
				case <-time.After(time.Duration(in.MS) * time.Millisecond):
					return &slowOut{Slept: in.MS}, "slept", nil
				case <-ctx.Done():
					h.stopped.Add(1)
					return nil, "", ctx.Err()
				}
			})
		return nil
	}}, "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h.in = inW
	tr.In, tr.Out = inR, outW
	go func() { h.exit <- serve(s, tr, h.sig, s.Logger) }()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	return h
}

func (h *harness) send(line string) {
	h.t.Helper()
	if _, err := io.WriteString(h.in, line+"\n"); err != nil {
		h.t.Fatal(err)
	}
}

// response is a JSON-RPC response as a client parses it.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  *struct {
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		Content           []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (h *harness) next() response {
	h.t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok {
			h.t.Fatal("server closed its output")
		}
		// Every line must be one valid JSON-RPC 2.0 response object.
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &raw); err != nil {
			h.t.Fatalf("output line is not JSON: %v: %.200q", err, l)
		}
		if _, ok := raw["id"]; !ok {
			h.t.Fatalf("response without id: %.200s", l)
		}
		_, hasRes := raw["result"]
		_, hasErr := raw["error"]
		if hasRes == hasErr {
			h.t.Fatalf("response must have exactly one of result, error: %.200s", l)
		}
		var r response
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			h.t.Fatal(err)
		}
		if r.JSONRPC != "2.0" {
			h.t.Fatalf("jsonrpc = %q", r.JSONRPC)
		}
		return r
	case <-time.After(time.Minute): // generous: the race detector on a loaded machine is slow
		h.t.Fatal("no response within a minute")
	}
	return response{}
}

func (h *harness) echo(id int, word string) {
	h.t.Helper()
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"word":%q}}}`, id, word))
	r := h.next()
	if string(r.ID) != fmt.Sprint(id) || r.Result == nil || r.Result.IsError {
		h.t.Fatalf("echo %d: %+v %.300s", id, r, fmt.Sprint(r.Result))
	}
	var out echoOut
	if err := json.Unmarshal(r.Result.StructuredContent, &out); err != nil || out.Word != word {
		h.t.Fatalf("echo %d answered %s (%v)", id, r.Result.StructuredContent, err)
	}
}

func TestBadLinesAreAnsweredAndTheServerKeepsServing(t *testing.T) {
	h := newHarness(t, &StdioTransport{MaxMessageBytes: 1 << 20})
	deep := nest(1001)
	cases := []struct {
		name, line string
		code       int
		id         string
	}{
		{"not JSON", `hello`, -32700, "null"},
		{"NUL byte", "\x00", -32700, "null"},
		{"NUL inside a string", "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"a\x00b\"}", -32700, "null"},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"\xff\xfe\"}", -32700, "4"},
		{"truncated object", `{"jsonrpc":"2.0","id":5,"method":"tools/li`, -32700, "null"},
		{"two values on a line", `{"jsonrpc":"2.0","id":6,"method":"ping"} {}`, -32700, "null"},
		{"batch", `[{"jsonrpc":"2.0","id":7,"method":"ping"}]`, -32600, "null"},
		{"empty batch", `[]`, -32600, "null"},
		{"nesting deeper than 1000", `{"jsonrpc":"2.0","id":8,"method":"ping","params":{"x":` + deep + `}}`, -32700, "8"},
		{"nesting far deeper", strings.Repeat("[", 200000), -32700, "null"},
		// Outside a tool call's arguments, at most wire.MaxOuterNesting.
		{"_meta nested 33 deep", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":{"word":"w"},"_meta":{"x":` + nest(30) + `}}}`, -32600, "11"},
		{"params nested 33 deep", `{"jsonrpc":"2.0","id":12,"method":"ping","params":{"x":` + nest(31) + `}}`, -32600, "12"},
		{"an unknown member nested 33 deep", `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"echo","arguments":{"word":"w"}},"extra":` + nest(32) + `}`, -32600, "13"},
		{"bare number", `42`, -32600, "null"},
		{"no jsonrpc version", `{"id":9,"method":"ping"}`, -32600, "9"},
		{"string id kept", `{"jsonrpc":"1.0","id":"abc","method":"ping"}`, -32600, `"abc"`},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, -32600, "null"},
		{"over the size limit", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"echo","arguments":{"word":"` + strings.Repeat("x", 2<<20) + `"}}}`, -32600, "10"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.t = t
			h.send(c.line)
			r := h.next()
			if r.Error == nil || r.Error.Code != c.code || string(r.ID) != c.id {
				t.Fatalf("got %s %+v %+v, want code %d id %s", r.ID, r.Error, r.Result, c.code, c.id)
			}
			if strings.Contains(r.Error.Message, "Go ") || r.Error.Message == "" {
				t.Errorf("message %q", r.Error.Message)
			}
			h.echo(100+i, "still here")
		})
	}
	h.t = t
	// A blank line is not a message and gets no answer.
	h.send("")
	h.send("\r")
	h.echo(200, "after blank lines")
	h.in.Close()
	if code := <-h.exit; code != 0 {
		t.Errorf("exit code %d", code)
	}
}

// nest is n arrays, one inside the other.
func nest(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// TestOuterNestingBoundary: outside a tool call's arguments a message
// may nest wire.MaxOuterNesting levels and not one more, and hold at most
// wire.MaxOuterBytes; the arguments themselves may nest up to
// wire.MaxNesting and be larger, and a deep call still reaches its tool.
func TestOuterNestingBoundary(t *testing.T) {
	call := func(args, meta string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":` + args + `,"_meta":` + meta + `}}`
	}
	ping := func(n int) string { return `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":` + nest(n) + `}}` }
	for _, c := range []struct {
		name, line string
		ok         bool
	}{
		{"ping params at the bound", ping(wire.MaxOuterNesting - 2), true},
		{"ping params one past it", ping(wire.MaxOuterNesting - 1), false},
		{"_meta at the bound", call(`{}`, `{"x":`+nest(wire.MaxOuterNesting-3)+`}`), true},
		{"_meta one past it", call(`{}`, `{"x":`+nest(wire.MaxOuterNesting-2)+`}`), false},
		{"arguments far deeper", call(`{"x":`+nest(wire.MaxNesting-4)+`}`, `{}`), true},
		{"arguments named in another case are not arguments", strings.Replace(call(`{}`, `{}`), `"arguments":{}`, `"Arguments":`+nest(wire.MaxOuterNesting), 1), false},
		{"a response's result", `{"jsonrpc":"2.0","id":1,"result":{"content":` + nest(wire.MaxOuterNesting) + `}}`, false},
		// The method is read by its exact name, as the SDK reads it.
		{"a method named twice, the exact one a tool call", strings.Replace(call(`{"x":`+nest(40)+`}`, `{}`), `"method"`, `"Method":"ping","method"`, 1), true},
		{"a method named twice, the exact one a ping", strings.Replace(call(`{"x":`+nest(40)+`}`, `{}`), `"method":"tools/call"`, `"method":"ping","Method":"tools/call"`, 1), false},
		// And at most wire.MaxOuterBytes outside the arguments.
		{"arguments of 2 MiB", call(`{"x":"`+strings.Repeat("a", 2<<20)+`"}`, `{}`), true},
		{"_meta past the bytes bound", call(`{}`, `{"x":"`+strings.Repeat("a", wire.MaxOuterBytes)+`"}`), false},
		{"params of a ping past it", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", wire.MaxOuterBytes) + `"}}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			line := []byte(c.line)
			if p := wire.CheckLine(line); p != nil {
				t.Fatalf("CheckLine: %+v", p)
			}
			_, p := wire.CheckObject(line)
			if (p == nil) != c.ok {
				t.Fatalf("accepted %v (%+v), want %v", p == nil, p, c.ok)
			}
			if p != nil && (p.Code != wire.CodeInvalidRequest || !strings.Contains(p.Message, "at most 32 ") && !strings.Contains(p.Message, "at most 1048576 ")) {
				t.Errorf("problem %+v", p)
			}
		})
	}
	// Through the transport, a call whose arguments nest 900 deep reaches
	// the tool, which answers for itself, and the server keeps serving.
	h := newHarness(t, &StdioTransport{MaxMessageBytes: 1 << 20})
	h.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"word":` + nest(900) + `}}}`)
	if r := h.next(); r.Error != nil || string(r.ID) != "2" || r.Result == nil {
		t.Fatalf("got %s %+v %+v, want the tool's own answer", r.ID, r.Error, r.Result)
	}
	h.echo(3, "still here")
}

func echoCall(id int, word string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"word":%q}}}`, id, word)
}

// TestBatchesAreRefusedOutside20250326: JSON-RPC batches are in MCP only
// in 2025-03-26 (2024-11-05 has none, 2025-06-18 removed them). On every
// other version a batch is refused whole: one Invalid Request error with
// id null, nothing inside it run, and the server keeps serving.
func TestBatchesAreRefusedOutside20250326(t *testing.T) {
	for _, version := range []string{"2024-11-05", "2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			h := newHarnessAt(t, &StdioTransport{}, version)
			batches := []string{
				"[" + echoCall(7, "inside") + "]",
				"[" + echoCall(8, "a") + "," + echoCall(9, "b") + `,{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
				"  [" + echoCall(10, "after spaces") + "]\t",
				"[" + echoCall(11, "then junk") + ",42]",
				`[{"jsonrpc":"2.0","id":12,"method":"ping"}]`,
			}
			for i, b := range batches {
				h.send(b)
				r := h.next()
				if r.Error == nil || r.Error.Code != -32600 || string(r.ID) != "null" || r.Result != nil {
					t.Fatalf("batch %d: got id %s error %+v result %v, want one -32600 with id null", i, r.ID, r.Error, r.Result)
				}
				if !strings.Contains(r.Error.Message, "batch") || !strings.Contains(r.Error.Message, "2025-03-26") {
					t.Errorf("batch %d: message does not say why: %q", i, r.Error.Message)
				}
				// The next answer is this echo's: nothing inside the batch
				// was run and answered.
				h.echo(100+i, "after batch")
			}
			h.in.Close()
			if code := <-h.exit; code != 0 {
				t.Errorf("exit code %d", code)
			}
			// The server has stopped: any answer to a call inside a batch
			// would be waiting here.
			time.Sleep(50 * time.Millisecond) // let the output reader pass on what was written
			select {
			case l, ok := <-h.lines:
				if ok {
					t.Errorf("unexpected output after the last answer: %.200s", l)
				}
			default:
			}
		})
	}
}

// nextBatch reads one output line that must be a JSON array of JSON-RPC
// responses with distinct ids, and returns them by id.
func (h *harness) nextBatch() map[string]response {
	h.t.Helper()
	out := map[string]response{}
	for _, r := range h.nextArray() {
		if _, dup := out[string(r.ID)]; dup {
			h.t.Fatalf("two answers with id %s", r.ID)
		}
		out[string(r.ID)] = r
	}
	return out
}

// nextArray reads one output line that must be a JSON array of JSON-RPC
// responses.
func (h *harness) nextArray() []response {
	h.t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok {
			h.t.Fatal("server closed its output")
		}
		var raws []json.RawMessage
		if err := json.Unmarshal([]byte(l), &raws); err != nil {
			h.t.Fatalf("output line is not a JSON array: %v: %.300s", err, l)
		}
		var out []response
		for _, raw := range raws {
			var r response
			if err := json.Unmarshal(raw, &r); err != nil || r.JSONRPC != "2.0" || (r.Result == nil) == (r.Error == nil) {
				h.t.Fatalf("batch answer member is not a response: %s", raw)
			}
			out = append(out, r)
		}
		return out
	case <-time.After(time.Minute):
		h.t.Fatal("no response within a minute")
	}
	return nil
}

func echoed(t *testing.T, r response, word string) {
	t.Helper()
	var out echoOut
	if r.Result == nil || r.Result.IsError || json.Unmarshal(r.Result.StructuredContent, &out) != nil || out.Word != word {
		t.Fatalf("answer %s: %+v, want the echo of %q", r.ID, r, word)
	}
}

// TestBatchesOn20250326: with 2025-03-26 negotiated a batch of requests
// and notifications is answered with one array of the requests' answers
// (none for a batch of notifications only); a bad member is answered in
// the array on its own (initialize among them, which a batch may not
// hold), a batch that is not one (empty, too many members) with one
// error; and a batch is held to the per-line size and depth limits.
func TestBatchesOn20250326(t *testing.T) {
	const limit = 64 << 10
	h := newHarnessAt(t, &StdioTransport{MaxMessageBytes: limit}, "2025-03-26")

	h.send("[" + echoCall(1, "one") + "," + echoCall(2, "two") + `,{"jsonrpc":"2.0","method":"notifications/initialized"}]`)
	got := h.nextBatch()
	if len(got) != 2 {
		t.Fatalf("answers %v, want ids 1 and 2", got)
	}
	echoed(t, got["1"], "one")
	echoed(t, got["2"], "two")

	// Notifications only: no answer at all, so the next line is the echo's.
	h.send(`[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}]`)
	h.echo(3, "after notifications")

	h.send("[" + echoCall(4, "good") + `,42,{"jsonrpc":"1.0","id":"x","method":"ping"},` +
		`{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}},` +
		echoCall(6, "first") + "," + echoCall(6, "second") + "]")
	// Two members with id 6: the first runs, the second is refused; both
	// answers carry id 6, told apart by their kind.
	var sixes []response
	got = map[string]response{}
	for _, r := range h.nextArray() {
		if string(r.ID) == "6" {
			sixes = append(sixes, r)
		} else {
			got[string(r.ID)] = r
		}
	}
	echoed(t, got["4"], "good")
	for id, want := range map[string]string{"null": "object", `"x"`: `"jsonrpc" must be "2.0"`, "5": "initialize"} {
		if r := got[id]; r.Error == nil || r.Error.Code != -32600 || !strings.Contains(r.Error.Message, want) {
			t.Errorf("member with id %s: %+v, want -32600 saying %q", id, r.Error, want)
		}
	}
	if len(got) != 4 || len(sixes) != 2 {
		t.Fatalf("answers %v and %d for id 6; want ids 4, null, \"x\", 5 and two for 6", got, len(sixes))
	}
	if sixes[0].Result != nil {
		sixes[0], sixes[1] = sixes[1], sixes[0]
	}
	if sixes[0].Error == nil || sixes[0].Error.Code != -32600 || !strings.Contains(sixes[0].Error.Message, "already in use") {
		t.Errorf("duplicate id 6: %+v", sixes[0].Error)
	}
	echoed(t, sixes[1], "first")

	for name, c := range map[string]struct {
		line string
		code int
	}{
		"empty":          {`[]`, -32600},
		"too many":       {"[" + strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","method":"notifications/initialized"},`, maxBatch+1), ",") + "]", -32600},
		"over the limit": {"[" + echoCall(7, strings.Repeat("x", limit)) + "]", -32600},
		"too deep":       {"[" + `{"jsonrpc":"2.0","id":8,"method":"ping","params":{"x":` + nest(999) + "}}]", -32700},
	} {
		t.Run(name, func(t *testing.T) {
			h.t = t
			h.send(c.line)
			r := h.next() // one error object, not an array
			if r.Error == nil || r.Error.Code != c.code || string(r.ID) != "null" {
				t.Fatalf("got id %s %+v, want one %d with id null", r.ID, r.Error, c.code)
			}
			h.echo(9, "still here")
		})
	}
	h.t = t

	// A batch waits for its slowest call: a line sent after it is answered
	// first, and the batch's array holds both answers.
	h.send("[" + callSlow(10, `{"ms":300}`) + "," + echoCall(11, "fast") + "]")
	h.echo(12, "meanwhile")
	got = h.nextBatch()
	echoed(t, got["11"], "fast")
	if r := got["10"]; r.Result == nil || r.Result.IsError {
		t.Fatalf("slow call in the batch: %+v", r)
	}

	// A cancelled call is not waited for: the array holds the others.
	h.send("[" + callSlow(13, `{"ms":60000}`) + "," + echoCall(14, "kept") + "]")
	time.Sleep(100 * time.Millisecond)
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":13}}`)
	got = h.nextBatch()
	if len(got) != 1 {
		t.Fatalf("answers after a cancel %v, want only 14", got)
	}
	echoed(t, got["14"], "kept")

	// At end of input a batch still running is answered before the exit.
	h.send("[" + callSlow(15, `{"ms":200}`) + "," + echoCall(16, "last") + "]")
	h.in.Close()
	got = h.nextBatch()
	echoed(t, got["16"], "last")
	if r := got["15"]; r.Result == nil || r.Result.IsError {
		t.Fatalf("slow call at end of input: %+v", r)
	}
	if code := <-h.exit; code != 0 {
		t.Errorf("exit code %d", code)
	}
}

// A batch before initialize has negotiated a version is refused, and so is
// initialize inside it: the session is then initialized as usual.
func TestBatchBeforeInitializeIsRefused(t *testing.T) {
	h := newUninitialized(t, &StdioTransport{})
	h.send(`[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}]`)
	if r := h.next(); r.Error == nil || r.Error.Code != -32600 || string(r.ID) != "null" {
		t.Fatalf("batch before initialize: %s %+v", r.ID, r.Error)
	}
	h.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if r := h.next(); string(r.ID) != "2" || r.Error != nil {
		t.Fatalf("initialize: %s %+v", r.ID, r.Error)
	}
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	h.send("[" + echoCall(3, "now") + "]")
	echoed(t, h.nextBatch()["3"], "now")
}

// A message over the SDK's 16 MiB frame limit but under ours (a dbt
// manifest passed inline) is served: a tool call whose arguments carry it
// reaches the tool, which answers for itself.
func TestSeventeenMiBMessageIsServed(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 34 MiB through pipes")
	}
	h := newHarness(t, &StdioTransport{})
	h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"word":"` + strings.Repeat("m", 17<<20) + `"}}}`)
	if r := h.next(); string(r.ID) != "1" || r.Error != nil || r.Result == nil {
		t.Fatalf("17 MiB tool call: %s %+v", r.ID, r.Error)
	}
	h.echo(2, "small")
}

func TestMaxMessageBytesFromEnv(t *testing.T) {
	t.Setenv("DW_MAX_MESSAGE_BYTES", "")
	if n, err := MaxMessageBytesFromEnv(); err != nil || n != DefaultMaxMessageBytes {
		t.Errorf("default: %d %v", n, err)
	}
	t.Setenv("DW_MAX_MESSAGE_BYTES", "1048576")
	if n, err := MaxMessageBytesFromEnv(); err != nil || n != 1<<20 {
		t.Errorf("1 MiB: %d %v", n, err)
	}
	for _, bad := range []string{"-1", "12", "lots", "1e9"} {
		t.Setenv("DW_MAX_MESSAGE_BYTES", bad)
		if _, err := MaxMessageBytesFromEnv(); err == nil || !strings.Contains(err.Error(), "DW_MAX_MESSAGE_BYTES") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func callSlow(id int, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow","arguments":%s}}`, id, args)
}

// printf '…' | agent: closing stdin right after the requests still gets
// every answer, then a clean exit.
func TestEndOfInputDrainsRunningCalls(t *testing.T) {
	h := newHarness(t, &StdioTransport{})
	h.send(callSlow(1, `{"ms":300}`))
	h.send(callSlow(2, `{"ms":100}`))
	h.in.Close()
	got := map[string]int{}
	for range 2 {
		r := h.next()
		if r.Result == nil || r.Result.IsError {
			t.Fatalf("%s: %+v", r.ID, r)
		}
		var out slowOut
		if err := json.Unmarshal(r.Result.StructuredContent, &out); err != nil {
			t.Fatal(err)
		}
		got[string(r.ID)] = out.Slept
	}
	if got["1"] != 300 || got["2"] != 100 {
		t.Errorf("answers %v", got)
	}
	select {
	case code := <-h.exit:
		if code != 0 {
			t.Errorf("exit %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("did not exit after draining")
	}
}

// A call that outlives the drain timeout is cancelled, and the process
// exits even though the client is gone: no CPU left burning.
func TestEndOfInputCancelsCallsPastTheDrainTimeout(t *testing.T) {
	h := newHarness(t, &StdioTransport{DrainTimeout: 200 * time.Millisecond})
	h.send(callSlow(1, `{"spin":true}`))
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	h.in.Close()
	select {
	case <-h.exit:
	case <-time.After(5 * time.Second):
		t.Fatal("did not exit")
	}
	if el := time.Since(start); el > 200*time.Millisecond+exitGrace {
		t.Errorf("exit took %v", el)
	}
	deadline := time.Now().Add(time.Second)
	for h.stopped.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h.stopped.Load() != 1 {
		t.Error("the spinning call was never cancelled")
	}
	// The abandoned call is answered once, as an error the client can
	// read, and the server's own late answer after the cancel is dropped.
	var answers []response
	for {
		select {
		case l, ok := <-h.lines:
			if !ok {
				goto done
			}
			var r response
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("output line is not JSON: %v: %.200q", err, l)
			}
			answers = append(answers, r)
			continue
		case <-time.After(500 * time.Millisecond):
		}
		break
	}
done:
	if len(answers) != 1 || string(answers[0].ID) != "1" || answers[0].Error == nil || answers[0].Error.Code != -32603 {
		t.Fatalf("answers after input ended: %+v", answers)
	}
}

func TestSignalCancelsCallsAndExitsFast(t *testing.T) {
	h := newHarness(t, &StdioTransport{})
	h.send(callSlow(1, `{"ms":60000}`))
	h.send(callSlow(2, `{"spin":true}`))
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	h.sig <- os.Interrupt
	select {
	case code := <-h.exit:
		if code != 0 {
			t.Errorf("exit %d", code)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("did not exit within 3s of the signal")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("exit took %v", el)
	}
	deadline := time.Now().Add(time.Second)
	for h.stopped.Load() != 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := h.stopped.Load(); n != 2 {
		t.Errorf("%d of 2 calls saw cancellation", n)
	}
}

// A call the client cancels gets no answer, so it must not hold up the
// exit at end of input.
func TestCancelledCallDoesNotDelayExit(t *testing.T) {
	h := newHarness(t, &StdioTransport{DrainTimeout: 5 * time.Second})
	h.send(callSlow(1, `{"ms":60000}`))
	time.Sleep(50 * time.Millisecond)
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	start := time.Now()
	h.in.Close()
	select {
	case <-h.exit:
	case <-time.After(4 * time.Second):
		t.Fatal("waited for a cancelled call")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("exit took %v", el)
	}
}

// A call reusing the id of a cancelled call that has not stopped yet was
// handed to the SDK, which still held the id and dropped the new call
// unanswered; the cancelled call's late "context canceled" then went out
// under that id, so the client took it as the new call's answer and
// waited forever for its own. Now the new call is refused as a duplicate
// at once, the cancelled call's answer is dropped (MCP sends none), and
// the id is free again once the cancelled call has stopped.
func TestIDOfACancelledCallIsHeldUntilItStops(t *testing.T) {
	h := newHarness(t, &StdioTransport{})
	h.send(callSlow(1, `{"ms":400,"stubborn":true}`))
	time.Sleep(50 * time.Millisecond)
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	h.send(echoCall(1, "too soon"))
	r := h.next()
	if string(r.ID) != "1" || r.Error == nil || r.Error.Code != -32600 {
		t.Fatalf("reused id while the cancelled call runs: %s %+v %+v", r.ID, r.Error, r.Result)
	}
	// Once the cancelled call has stopped, its id is a new call's.
	deadline := time.Now().Add(30 * time.Second)
	for h.stopped.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h.stopped.Load() != 1 {
		t.Fatal("the cancelled call never stopped")
	}
	for {
		h.send(echoCall(1, "after"))
		r := h.next()
		if r.Error != nil && r.Error.Code == -32600 && time.Now().Before(deadline) {
			// The handler returned; its answer is on its way to the
			// transport, which frees the id when it drops it.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		var out echoOut
		if string(r.ID) != "1" || r.Result == nil || r.Result.IsError || json.Unmarshal(r.Result.StructuredContent, &out) != nil || out.Word != "after" {
			t.Fatalf("id 1 after the cancelled call stopped: %s %+v %+v", r.ID, r.Error, r.Result)
		}
		break
	}
	h.echo(2, "nothing stray")
}

// The limit is on the message: one of exactly MaxMessageBytes is served,
// one byte more is refused, and the next line is read as usual.
func TestMessageSizeLimitIsExact(t *testing.T) {
	const limit = 4096
	h := newHarness(t, &StdioTransport{MaxMessageBytes: limit})
	msg := func(id, size int) string {
		head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"_meta":{"pad":"`, id)
		tail := `"}}}`
		return head + strings.Repeat("p", size-len(head)-len(tail)) + tail
	}
	h.send(msg(1, limit))
	if r := h.next(); string(r.ID) != "1" || r.Error != nil {
		t.Fatalf("message of exactly the limit: %s %+v", r.ID, r.Error)
	}
	h.send(msg(2, limit+1))
	if r := h.next(); string(r.ID) != "2" || r.Error == nil || r.Error.Code != -32600 || !strings.Contains(r.Error.Message, "DW_MAX_MESSAGE_BYTES") {
		t.Fatalf("one byte over: %s %+v", r.ID, r.Error)
	}
	h.echo(3, "after")
}

// goTypeRE matches Go type names that must never reach a client.
var goTypeRE = regexp.MustCompile(`interface \{|map\[|\[\]|float64|int64|Go (struct|value)`)

// Requests the SDK would leave unanswered (id null read as a notification,
// an id already in flight dropped) or answer in Go terms are answered here:
// each gets one Invalid Request error the client can match, and the server
// keeps serving.
func TestRequestsTheSDKWouldLeaveUnansweredAreAnswered(t *testing.T) {
	h := newHarness(t, &StdioTransport{})
	echoLine := func(id, word string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"echo","arguments":{"word":%q}}}`, id, word)
	}
	cases := []struct {
		name, line, id, want string // want: the whole message, when pinned
	}{
		{"id null on a call", echoLine("null", "x"), "null", ""},
		{"id null on ping", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, "null", ""},
		{"id array", echoLine("[1,2]", "x"), "null", "id must be a string or a number"},
		{"id object", echoLine(`{"a":1}`, "x"), "null", "id must be a string or a number"},
		{"id boolean", echoLine("true", "x"), "null", "id must be a string or a number"},
		{"fractional id", echoLine("1.5", "x"), "1.5", ""},
		{"id past 2^53", echoLine("9007199254740993", "x"), "9007199254740993", ""},
		{"method a number", `{"jsonrpc":"2.0","id":41,"method":5}`, "41", "method must be a string"},
		{"method null", `{"jsonrpc":"2.0","id":42,"method":null}`, "42", "method must be a string"},
		{"jsonrpc a number", `{"jsonrpc":2,"id":43,"method":"ping"}`, "43", ""},
		{"response without id", `{"jsonrpc":"2.0","result":{}}`, "null", ""},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.t = t
			h.send(c.line)
			r := h.next()
			if r.Error == nil || r.Error.Code != -32600 || string(r.ID) != c.id || r.Result != nil {
				t.Fatalf("got id %s error %+v result %v; want -32600 with id %s", r.ID, r.Error, r.Result, c.id)
			}
			if goTypeRE.MatchString(r.Error.Message) || r.Error.Message == "" {
				t.Errorf("message names a Go type or nothing: %q", r.Error.Message)
			}
			if c.want != "" && r.Error.Message != c.want {
				t.Errorf("message %q, want %q", r.Error.Message, c.want)
			}
			h.echo(100+i, "still here")
		})
	}
	h.t = t
	// An MCP notification sent with id null is still the notification it
	// names: no answer, and the next answer is the echo's.
	h.send(`{"jsonrpc":"2.0","id":null,"method":"notifications/initialized"}`)
	h.echo(200, "after a notification with id null")
	h.in.Close()
	if code := <-h.exit; code != 0 {
		t.Errorf("exit code %d", code)
	}
}

// A call reusing the id of a call still running is answered with an error
// under that id, and the running call still completes with its own answer;
// once it has, the id is free again.
func TestDuplicateInFlightIDIsRefusedWithoutDisturbingTheFirstCall(t *testing.T) {
	h := newHarness(t, &StdioTransport{})
	h.send(callSlow(5, `{"ms":1500}`))
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"word":%q}}}`, "dup"))
	h.send(`{"jsonrpc":"2.0","id":"5","method":"ping"}`) // a string id "5" is another id
	var dupErr, slow, ping *response
	for range 3 {
		r := h.next()
		switch {
		case string(r.ID) == "5" && r.Error != nil:
			if dupErr != nil || slow != nil {
				t.Fatalf("second error for id 5, or the error after the call's answer: %+v", r.Error)
			}
			dupErr = &r
		case string(r.ID) == "5" && r.Result != nil:
			slow = &r
		case string(r.ID) == `"5"` && r.Error == nil:
			ping = &r
		default:
			t.Fatalf("unexpected answer: id %s error %+v result %+v", r.ID, r.Error, r.Result)
		}
	}
	if dupErr == nil || dupErr.Error.Code != -32600 || dupErr.Error.Message != "id 5 is already in use by a call still running; give each call a new id" {
		t.Fatalf("duplicate answered %+v", dupErr)
	}
	if slow == nil || slow.Result.IsError || ping == nil {
		t.Fatalf("first call %+v, ping %+v", slow, ping)
	}
	var out slowOut
	if err := json.Unmarshal(slow.Result.StructuredContent, &out); err != nil || out.Slept != 1500 {
		t.Fatalf("the first call's answer %s (%v)", slow.Result.StructuredContent, err)
	}
	h.echo(5, "id 5 is free again")
}

// Params the SDK cannot decode were answered in its words, naming Go types
// and quoting the params whole ("unmarshaling \"{…}\" into a
// *mcp.CallToolParamsRaw: json: cannot unmarshal … Go struct field
// mcp.CallToolParamsRaw.name of type string"), so one wrong member of a
// 10 MiB request got a 10 MiB answer. Now each is answered in the
// protocol's words, naming the member and what is valid, and the server
// keeps serving.
func TestBadParamsAreAnsweredInWordsAndBounded(t *testing.T) {
	h := newHarness(t, &StdioTransport{MaxMessageBytes: 16 << 20})
	// Under the bound outside a tool call's arguments (wire.MaxOuterBytes).
	pad := strings.Repeat("p", wire.MaxOuterBytes-100)
	for i, c := range []struct{ params, want string }{
		{`{"name":5}`, "params of tools/call: member 'name' must be text (a JSON string), got a number"},
		{`{"pad":"` + pad + `","name":5}`, "params of tools/call: member 'name' must be text (a JSON string), got a number"},
		{`[1]`, "params of tools/call must be a JSON object, got a list"},
		{`"x"`, "params of tools/call must be a JSON object, got text"},
		{`{"name":"echo","arguments":{},"_meta":5}`, "params of tools/call: member '_meta' must be an object, got a number"},
	} {
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, 100+i, c.params))
		r := h.next()
		if string(r.ID) != fmt.Sprint(100+i) || r.Error == nil || r.Error.Code != -32602 || r.Error.Message != c.want {
			t.Errorf("params %.60s: got id %s %+v, want -32602 %q", c.params, r.ID, r.Error, c.want)
		}
	}
	for i, c := range []struct{ method, params, want string }{
		{"tools/list", `{"cursor":5}`, "params of tools/list: member 'cursor' must be text (a JSON string), got a number"},
		{"ping", `[1]`, "params of ping must be a JSON object, got a list"},
		{"logging/setLevel", `{"level":5}`, "params of logging/setLevel: member 'level' must be text (a JSON string), got a number"},
	} {
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, 200+i, c.method, c.params))
		r := h.next()
		if string(r.ID) != fmt.Sprint(200+i) || r.Error == nil || r.Error.Code != -32602 || r.Error.Message != c.want {
			t.Errorf("%s %s: got id %s %+v, want -32602 %q", c.method, c.params, r.ID, r.Error, c.want)
		}
	}
	h.echo(300, "still serving")
}

// An error the SDK words itself may quote the request: a tool name of
// 2 MiB came back whole in "unknown tool …". Every error answer is cut to
// a bounded size, keeping its id and code.
func TestErrorAnswersAreBounded(t *testing.T) {
	h := newHarness(t, &StdioTransport{MaxMessageBytes: 16 << 20})
	name := strings.Repeat("n", wire.MaxOuterBytes-200)
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, name))
	select {
	case l := <-h.lines:
		if len(l) > maxErrorAnswer {
			t.Fatalf("error answer of %d bytes, want at most %d", len(l), maxErrorAnswer)
		}
		var r response
		if err := json.Unmarshal([]byte(l), &r); err != nil || string(r.ID) != "7" || r.Error == nil || r.Error.Code != -32602 {
			t.Fatalf("answer %.300s (%v)", l, err)
		}
	case <-time.After(time.Minute):
		t.Fatal("no answer")
	}
	h.echo(8, "still serving")
}

// On a session whose client answers no input requests itself (2025-06-18)
// the SDK asks the client and, when that failed, answered the tool call
// with its own error: a client refusing the form read `method not found:
// "tools/call"`, one whose answer did not fit the form read Go type names.
// Each is now the tool's error, saying nothing was done; an answer that
// fits reaches the tool.
func TestFailedFormAnswersAreToolErrors(t *testing.T) {
	const notFit = "ask: the client could not be asked, or its answer did not fit the form (a client must declare the elicitation capability, and each field's answer must be one of the values it offers, as text); nothing was done or recorded, so the call can be made again"
	// A client that never said it can show a form is not asked.
	h := newHarness(t, &StdioTransport{})
	h.send(`{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"ask","arguments":{"word":"w"}}}`)
	if r := h.next(); r.Error != nil || r.Result == nil || !r.Result.IsError || r.Result.Content[0].Text != notFit {
		t.Fatalf("no elicitation capability: %+v %+v", r.Error, r.Result)
	}
	h = newUninitialized(t, &StdioTransport{})
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	if r := h.next(); r.Error != nil {
		t.Fatalf("initialize: %+v", r.Error)
	}
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	raw := func() map[string]json.RawMessage {
		t.Helper()
		select {
		case l := <-h.lines:
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("not JSON: %.200s", l)
			}
			return m
		case <-time.After(time.Minute):
			t.Fatal("nothing written within a minute")
		}
		return nil
	}
	for i, c := range []struct {
		name, answer string // the client's answer to elicitation/create, after its id
		want         string
	}{
		{"refused", `"error":{"code":-32601,"message":"Method not found"}`,
			"ask: the client could not ask the person (it answered the form request with error -32601: Method not found); nothing was done or recorded, so the call can be made again"},
		{"not an object", `"result":"yes"`,
			notFit},
		{"outside the enum", `"result":{"action":"accept","content":{"answer":"YES"}}`,
			notFit},
		{"fits", `"result":{"action":"accept","content":{"answer":"yes"}}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := 50 + i
			h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ask","arguments":{"word":"w"}}}`, id))
			ask := raw()
			var method string
			if json.Unmarshal(ask["method"], &method) != nil || method != "elicitation/create" {
				t.Fatalf("server asked %s, want elicitation/create: %s %s", ask["method"], ask["error"], ask["result"])
			}
			h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,%s}`, ask["id"], c.answer))
			h.t = t
			r := h.next()
			if string(r.ID) != fmt.Sprint(id) || r.Error != nil || r.Result == nil {
				t.Fatalf("answer %s %+v %+v, want a tool result", r.ID, r.Error, r.Result)
			}
			if c.want == "" {
				var out echoOut
				if r.Result.IsError || json.Unmarshal(r.Result.StructuredContent, &out) != nil || out.Word != "accept yes" {
					t.Fatalf("a fitting answer: %+v", r.Result)
				}
				return
			}
			if !r.Result.IsError || len(r.Result.Content) != 1 || r.Result.Content[0].Text != c.want {
				t.Fatalf("got %+v\nwant %q", r.Result, c.want)
			}
		})
	}
}
