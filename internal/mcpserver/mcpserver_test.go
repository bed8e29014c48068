package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Boom bool   `json:"boom,omitempty" jsonschema:"panic instead of answering"`
	Word string `json:"word" jsonschema:"what to echo"`
}

type echoOut struct {
	Word string `json:"word" jsonschema:"the word"`
}

func connect(t *testing.T, s *Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.MCP.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestPanicBecomesToolErrorAndServerKeepsServing(t *testing.T) {
	s, err := New(Agent{Name: "dw-test", Instructions: "test", Register: func(s *Server) error {
		Add(s, Tool{Name: "echo", Description: "echoes", ReadOnly: true, Idempotent: true},
			func(ctx context.Context, in echoIn) (*echoOut, string, error) {
				if in.Boom {
					panic("kaboom")
				}
				return &echoOut{Word: in.Word}, "echoed " + in.Word, nil
			})
		return nil
	}}, "1.2.3", nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, s)
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"word": "x", "boom": true}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "kaboom") {
		t.Errorf("panic result: %+v", res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"word": "again"}})
	if err != nil || res.IsError {
		t.Fatalf("after panic: %v %+v", err, res)
	}
	// The text is the summary, then the key data (render.go).
	if got := res.Content[0].(*mcp.TextContent).Text; got != "echoed again\n\nword: again" {
		t.Errorf("text = %q, want the summary then the data", got)
	}
	if res.StructuredContent == nil {
		t.Error("no structured content")
	}
	if v := cs.InitializeResult().ServerInfo.Version; v != "1.2.3" {
		t.Errorf("version = %q", v)
	}
	tools, _ := cs.ListTools(ctx, nil)
	a := tools.Tools[0].Annotations
	if a.DestructiveHint == nil || *a.DestructiveHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Errorf("hints not explicit: %+v", a)
	}
}

// TestOversizedAnswersFailInTests: in a test binary an answer over
// bound.Answer characters is a protocol error naming the tool, so a test
// that makes a tool answer that much fails whatever it asserts; one just
// under is answered.
func TestOversizedAnswersFailInTests(t *testing.T) {
	type sizeIn struct {
		N int `json:"n" jsonschema:"characters to answer"`
	}
	s, err := New(Agent{Name: "dw-test", Instructions: "test", Register: func(s *Server) error {
		Add(s, Tool{Name: "grow", Description: "answers n characters", ReadOnly: true, Idempotent: true,
			InputSchema: InputSchema[sizeIn](func(s *jsonschema.Schema) { Range(s, "n", 0, 1e6) })},
			func(ctx context.Context, in sizeIn) (*echoOut, string, error) {
				return &echoOut{Word: strings.Repeat("w", in.N)}, "grew", nil
			})
		return nil
	}}, "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, s)
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "grow", Arguments: map[string]any{"n": 30_000}})
	if err != nil || res.IsError {
		t.Fatalf("an answer of about 30,000 characters: %v %+v", err, res)
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "grow", Arguments: map[string]any{"n": 90_000}})
	if err == nil || !strings.Contains(err.Error(), "tool grow answered") || !strings.Contains(err.Error(), "bound.Answer") {
		t.Fatalf("an answer of about 90,000 characters: %v, want a protocol error naming the tool", err)
	}
}

// A tool error that quotes its input at length (a refusal quoting 65,000
// control characters spelled \x01 was 260,000 characters) is cut to
// maxErrorText characters, and still matches what it wraps.
func TestToolErrorsAreBounded(t *testing.T) {
	sentinel := errors.New("bad input")
	s, err := New(Agent{Name: "dw-test", Instructions: "test", Register: func(s *Server) error {
		Add(s, Tool{Name: "refuse", Description: "refuses, quoting the word", ReadOnly: true, Idempotent: true,
			InputSchema: InputSchema[echoIn](func(s *jsonschema.Schema) { MaxLength(s, "word", 65536) })},
			func(ctx context.Context, in echoIn) (*echoOut, string, error) {
				return nil, "", fmt.Errorf("%w: found %q", sentinel, in.Word)
			})
		return nil
	}}, "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, s)
	ctx := context.Background()
	for _, c := range []struct {
		word string
		cut  bool
	}{{"short", false}, {strings.Repeat("\x01", 60_000), true}} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refuse", Arguments: map[string]any{"word": c.word}})
		if err != nil || !res.IsError || len(res.Content) != 1 {
			t.Fatalf("%.10q: %v %+v", c.word, err, res)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if n := utf8.RuneCountInString(text); n > maxErrorText+100 {
			t.Errorf("%.10q: error of %d characters", c.word, n)
		}
		if cut := strings.HasSuffix(text, " (error cut at 4,000 characters)"); cut != c.cut {
			t.Errorf("%.10q: cut %v, want %v: %.80q", c.word, cut, c.cut, text)
		}
	}
	if e := boundError(fmt.Errorf("%w: %s", sentinel, strings.Repeat("x", 5000))); !errors.Is(e, sentinel) {
		t.Errorf("a cut error no longer matches what it wraps: %v", e)
	}
}
