package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime/debug"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/bound"
)

// Tool describes one tool. Every hint is stated, never left to the spec's
// defaults.
type Tool struct {
	Name        string
	Title       string
	Description string
	// ReadOnly: the tool changes nothing anywhere.
	ReadOnly bool
	// Destructive: the tool may overwrite or delete (only meaningful when
	// not ReadOnly).
	Destructive bool
	// Idempotent: calling again with the same arguments has no further effect.
	Idempotent bool
	// OpenWorld: the tool reaches systems outside Data Workers' own store
	// (a warehouse, Kafka, a registry).
	OpenWorld bool
	// InputSchema overrides the schema inferred from the input type, for
	// enums, defaults and bounds (see InputSchema).
	InputSchema *Schema
	// Text renders the key data of the tool's output for the text content,
	// after the summary (render.go); nil means RenderData. It receives the
	// handler's *Out.
	Text func(out any) string
}

func (t Tool) mcpTool() *mcp.Tool {
	destructive, open := t.Destructive, t.OpenWorld
	mt := &mcp.Tool{
		Name:        t.Name,
		Title:       t.Title,
		Description: t.Description,
		Annotations: &mcp.ToolAnnotations{
			Title:           t.Title,
			ReadOnlyHint:    t.ReadOnly,
			DestructiveHint: &destructive,
			IdempotentHint:  t.Idempotent,
			OpenWorldHint:   &open,
		},
	}
	return mt
}

// Handler is a tool's logic: plain input in, structured output and a short
// summary for a person out. A returned error is shown to the model as a
// tool error; make it say what was wrong and what is valid.
type Handler[In, Out any] func(ctx context.Context, in In) (out *Out, summary string, err error)

// Add registers a tool with a plain handler.
func Add[In, Out any](s *Server, t Tool, h Handler[In, Out]) {
	AddRaw(s, t, func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, *Out, error) {
		out, summary, err := h(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: summary}}}, out, nil
	})
}

// RawHandler sees the whole request, for tools that use the multi-round-trip
// form (input requests and their responses).
type RawHandler[In, Out any] func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, *Out, error)

// AddRaw registers a tool whose handler sees the request and builds the
// result itself. Panics become tool errors.
func AddRaw[In, Out any](s *Server, t Tool, h RawHandler[In, Out]) {
	logger := s.Logger
	name := t.Name
	render := RenderData
	if t.Text != nil {
		render = t.Text
	}
	wrapped := func(ctx context.Context, req *mcp.CallToolRequest, in In) (res *mcp.CallToolResult, out *Out, err error) {
		defer func() {
			if p := recover(); p != nil {
				logger.Error("tool panicked", "tool", name, "panic", p, "stack", string(debug.Stack()))
				res, out, err = nil, nil, boundError(fmt.Errorf("internal error in %s: %v (the server keeps running; please report this)", name, p))
			}
		}()
		ctx, end := begin(ctx, name, req) // progress.go: heartbeat, Progress and Log
		defer end()
		start := time.Now()
		res, out, err = h(ctx, req, in)
		if err != nil {
			err = boundError(err)
			logger.Debug("tool error", "tool", name, "err", err)
			Log(ctx, "warning", fmt.Sprintf("%s failed after %s: %v", name, time.Since(start).Round(time.Millisecond), err))
			return res, out, err
		}
		Log(ctx, "info", fmt.Sprintf("%s answered in %s", name, time.Since(start).Round(time.Millisecond)))
		if out != nil { // render.go: the text carries the summary and the key data
			appendText(res, s.demoNote(), render(out))
		} else if res == nil || res.InputRequests == nil {
			// A nil answer is sent as the zero value with its fields, as
			// the SDK does only for a schema it inferred itself (for ours
			// it would send {}).
			out = new(Out)
		}
		return res, out, err
	}

	// Nothing about the schemas is worked out here that tools/list does
	// not need (register.go): the input schema is built and resolved on the
	// tool's first call, the output schema resolved on its first answer.
	in := lazyInput[In](t.Name, t.InputSchema)
	out := sync.OnceValue(outputSchema[Out]) // outschema.go: the answer's shape within a budget
	// args.go: bad arguments are worded before the SDK sees them.
	checker := newArgChecker[In](in)
	s.checkers.add(name, checker)
	mt := t.mcpTool()
	mt.InputSchema, mt.OutputSchema = s.listedSchemas(t.Name, in, out, reflect.TypeFor[In](), reflect.TypeFor[Out]())
	handler := typedHandler(wrapped, checker.resolved, resolver(out))
	if testing.Testing() {
		handler = answerBackstop(handler)
	}
	s.MCP.AddTool(mt, handler)
	s.tools = append(s.tools, name)
}

// maxErrorText bounds, in characters, a tool error's text (and the log
// message that repeats it). Answers are bounded in each domain result, but
// an error is worded wherever it arises and often quotes the input: a
// quoted control character is four characters, so an argument of 65,536
// came back as 260,000 (the metric SQL refusal). No error needs more
// than a few lines to say what was wrong and what is valid.
const maxErrorText = 4000

// boundError cuts an error's text to maxErrorText characters, keeping it
// matchable (errors.Is and As see the original). A JSON-RPC error is the
// transport's to bound (clipErrorAnswer).
func boundError(err error) error {
	if _, ok := err.(*jsonrpc.Error); ok {
		return err
	}
	msg := err.Error()
	if utf8.RuneCountInString(msg) <= maxErrorText {
		return err
	}
	return &cutError{err: err, msg: clip(msg, maxErrorText) + " (error cut at 4,000 characters)"}
}

type cutError struct {
	err error
	msg string
}

func (e *cutError) Error() string { return e.msg }
func (e *cutError) Unwrap() error { return e.err }

// answerBackstop fails, in a test binary, any answer over bound.Answer
// characters (text and structured output), with a protocol error the
// test cannot mistake for a tool's answer: each tool bounds its answer
// in its domain result, and this catches one that forgot, in whichever
// test first makes it answer that much. An agent never pays for it.
func answerBackstop(h mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := h(ctx, req)
		if err != nil || res == nil {
			return res, err
		}
		if n := answerLen(res); n > bound.Answer {
			return nil, fmt.Errorf("tool %s answered %d characters, over the %d an answer may hold (bound.Answer): bound the list that grew in the tool's domain result", req.Params.Name, n, bound.Answer)
		}
		return res, nil
	}
}

// answerLen is what a client hands the model: the text and the
// structured output.
func answerLen(res *mcp.CallToolResult) int {
	n := 0
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			n += len(tc.Text)
		}
	}
	if res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		n += len(raw)
	}
	return n
}

// Schema is a tool's input schema as its agent states it: the schema
// inferred from a Go type with the agent's patch (enums, defaults,
// bounds) applied. It is only a recipe: tools are declared as package
// variables, and building every schema when the package loads was a good
// part of an agent's start-up, for schemas the tools/list answer already
// carries (schemas_gen.go) and most of which no call of a session needs.
type Schema struct {
	build func() *jsonschema.Schema
}

// Build builds the schema afresh, as stated (without ApplyLimits).
func (p *Schema) Build() *jsonschema.Schema { return p.build() }

// InputSchema infers the schema of In and lets the caller patch it (enums,
// defaults, bounds) before it is used. Both happen when the schema is first
// needed; a patch that names no property panics then (the tests list every
// tool, so that is in a test, not in a session).
func InputSchema[In any](patch func(s *jsonschema.Schema)) *Schema {
	return &Schema{build: func() *jsonschema.Schema {
		sch := inferSchema[In]()
		if patch != nil {
			patch(sch)
		}
		return sch
	}}
}

func inferSchema[In any]() *jsonschema.Schema {
	sch, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("input schema for %T: %v", *new(In), err))
	}
	return sch
}

// Enum sets a property's allowed values, so a tool's schema can list a
// domain's own list of kinds (changelog.ChangeKinds) rather than a copy.
// They are stored as plain strings: the validator compares them with the
// decoded argument, a string.
func Enum[T ~string](s *jsonschema.Schema, prop string, values ...T) {
	p := s.Properties[prop]
	if p == nil {
		panic("no property " + prop)
	}
	p.Enum = make([]any, len(values))
	for i, v := range values {
		p.Enum[i] = string(v)
	}
}
