package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/mcpserver/wire"
)

type parityIn struct {
	Name  string   `json:"name" jsonschema:"a name"`
	Limit int      `json:"limit,omitempty" jsonschema:"how many"`
	Tags  []string `json:"tags,omitempty" jsonschema:"tags"`
	Mode  string   `json:"mode,omitempty" jsonschema:"how"`
	Deep  any      `json:"deep,omitempty" jsonschema:"anything"`
}

type parityItem struct {
	N int `json:"n" jsonschema:"a number"`
}

type parityOut struct {
	Name  string       `json:"name" jsonschema:"the name"`
	Limit int          `json:"limit" jsonschema:"the limit"`
	Items []parityItem `json:"items" jsonschema:"items"`
	Big   int64        `json:"big" jsonschema:"a large number"`
}

// parityHandler answers by its input's mode, to cover each way a handler
// can end.
func parityHandler(_ context.Context, _ *mcp.CallToolRequest, in parityIn) (*mcp.CallToolResult, *parityOut, error) {
	switch in.Mode {
	case "error":
		return nil, nil, errors.New("the tool failed")
	case "rpc":
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "refused"}
	case "nil":
		return nil, nil, nil
	case "content":
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "summary"}}}, &parityOut{Name: in.Name}, nil
	case "input":
		return &mcp.CallToolResult{InputRequests: map[string]mcp.InputRequest{}}, &parityOut{Name: in.Name}, nil
	}
	return nil, &parityOut{Name: in.Name, Limit: in.Limit, Items: []parityItem{{N: len(in.Tags)}}, Big: 1<<62 + 1}, nil
}

// TestTypedHandlerAnswersAsTheSDKWould registers one tool both ways (the
// SDK's mcp.AddTool, and Server.AddTool with typedHandler, as AddRaw does)
// over the same schemas, without the argument checker in front, and holds
// every answer to be the same.
func TestTypedHandlerAnswersAsTheSDKWould(t *testing.T) {
	in := func() *jsonschema.Schema {
		s := inferSchema[parityIn]()
		s.Properties["limit"].Default = json.RawMessage("10")
		s.Properties["limit"].Maximum = ptr(100.0)
		Enum(s, "mode", "ok", "error", "rpc", "nil", "content", "input")
		ApplyLimits("parity", s)
		return s
	}
	out := outputSchema[parityOut]
	tool := func() *mcp.Tool {
		return &mcp.Tool{Name: "parity", Description: "parity", InputSchema: in(), OutputSchema: out()}
	}
	sdk := mcp.NewServer(&mcp.Implementation{Name: "parity"}, nil)
	mcp.AddTool(sdk, tool(), parityHandler)
	ours := mcp.NewServer(&mcp.Implementation{Name: "parity"}, nil)
	ours.AddTool(tool(), typedHandler(parityHandler, resolver(in), resolver(out)))
	sdkSession, oursSession := connectPlain(t, sdk), connectPlain(t, ours)

	deep := any("bottom")
	for range 1001 {
		deep = []any{deep}
	}
	cases := []any{
		map[string]any{"name": "x"},                                 // the default limit filled in
		map[string]any{"name": "x", "limit": 7, "tags": []any{"a"}}, // as given
		map[string]any{"Name": "x"},                                 // field names match exactly
		map[string]any{"name": 5},                                   // wrong type
		map[string]any{"name": "x", "limit": 1000},                  // out of range
		map[string]any{"name": "x", "mode": "sideways"},             // not in the enum
		map[string]any{"name": "x", "deep": deep},                   // nested too deeply
		nil, // no arguments at all
		map[string]any{"name": "x", "mode": "error"},   // a tool error
		map[string]any{"name": "x", "mode": "rpc"},     // a protocol error
		map[string]any{"name": "x", "mode": "nil"},     // no answer
		map[string]any{"name": "x", "mode": "content"}, // the handler's own text
		map[string]any{"name": "x", "mode": "input"},   // an answer asking for input
	}
	for i, args := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			// Ours sends an answer's text as its Go type marshalled it (field
			// order, integers exact) where the SDK marshals it again from a
			// map, so texts are compared as JSON values.
			want, wantErr := callJSON(sdkSession, args)
			got, gotErr := callJSON(oursSession, args)
			if got != want || gotErr != wantErr {
				t.Errorf("arguments %s:\n got %s (error %q)\nwant %s (error %q)", clip(fmt.Sprint(args), 200), got, gotErr, want, wantErr)
			}
		})
	}
}

func connectPlain(t *testing.T, s *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
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

// callJSON is a call's answer as JSON, or its error's text.
func callJSON(cs *mcp.ClientSession, args any) (answer, errText string) {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "parity", Arguments: args})
	if err != nil {
		return "", err.Error()
	}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			var v map[string]any
			if json.Unmarshal([]byte(tc.Text), &v) == nil {
				b, _ := json.Marshal(v)
				tc.Text = string(b)
			}
		}
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return "", err.Error()
	}
	return string(raw), ""
}

// An answer's text is its Go value as marshalled: a 63-bit integer stays
// exact (a map of float64 would round it) and fields keep their order.
func TestAnswerTextKeepsTheTypedValue(t *testing.T) {
	in := func() *jsonschema.Schema { return inferSchema[parityIn]() }
	s := mcp.NewServer(&mcp.Implementation{Name: "parity"}, nil)
	s.AddTool(&mcp.Tool{Name: "parity", Description: "parity", InputSchema: in(), OutputSchema: outputSchema[parityOut]()},
		typedHandler(parityHandler, resolver(in), resolver(outputSchema[parityOut])))
	res, err := connectPlain(t, s).CallTool(context.Background(), &mcp.CallToolParams{Name: "parity", Arguments: map[string]any{"name": "x"}})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("call: %v %+v", err, res)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var got struct {
		Big json.Number `json:"big"`
	}
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Big.String() != "4611686018427387905" {
		t.Errorf("big is %s in the text, want 4611686018427387905 exactly", got.Big)
	}
	want, _ := json.Marshal(parityOut{Name: "x", Items: []parityItem{{N: 0}}, Big: 1<<62 + 1})
	if text != string(want) {
		t.Errorf("text is %s, want the typed value %s", text, want)
	}
}

// Arguments are held to the SDK's nesting bound, the same one the
// transport holds each message to; brackets inside strings do not count.
func TestSDKUnmarshalNesting(t *testing.T) {
	deep := func(n int) []byte {
		return []byte(strings.Repeat("[", n) + `"[[[{{{"` + strings.Repeat("]", n))
	}
	var v any
	if err := sdkUnmarshal(deep(wire.MaxNesting), &v); err != nil {
		t.Fatalf("%d levels: %v", wire.MaxNesting, err)
	}
	if err := sdkUnmarshal(deep(wire.MaxNesting+1), &v); !errors.Is(err, errMaxDepthExceeded) {
		t.Fatalf("%d levels: %v, want %v", wire.MaxNesting+1, err, errMaxDepthExceeded)
	}
}

// An answer is re-marshalled only when its schema could fill something
// in: a default anywhere under it, however deep.
func TestHasDefault(t *testing.T) {
	withDefault := func() *jsonschema.Schema {
		return &jsonschema.Schema{Type: "integer", Default: json.RawMessage("3")}
	}
	cases := map[string]struct {
		s    *jsonschema.Schema
		want bool
	}{
		"inferred answer": {outputSchema[parityOut](), false},
		"top property":    {&jsonschema.Schema{Properties: map[string]*jsonschema.Schema{"n": withDefault()}}, true},
		"list item property": {&jsonschema.Schema{Properties: map[string]*jsonschema.Schema{"xs": {Type: "array",
			Items: &jsonschema.Schema{Properties: map[string]*jsonschema.Schema{"n": withDefault()}}}}}, true},
		"map value": {&jsonschema.Schema{AdditionalProperties: withDefault()}, true},
		"one of":    {&jsonschema.Schema{OneOf: []*jsonschema.Schema{{Type: "string"}, withDefault()}}, true},
	}
	for name, c := range cases {
		if got := hasDefault(c.s); got != c.want {
			t.Errorf("%s: hasDefault is %v, want %v", name, got, c.want)
		}
	}
}
