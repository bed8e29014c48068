package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type argsIn struct {
	At    time.Time  `json:"at" jsonschema:"when the change took effect"`
	Limit int        `json:"limit,omitempty" jsonschema:"how many"`
	Kind  string     `json:"kind,omitempty" jsonschema:"which kind"`
	Tags  []string   `json:"tags,omitempty" jsonschema:"tags"`
	Sub   *argsSub   `json:"sub,omitempty" jsonschema:"nested"`
	Count uint       `json:"count,omitempty" jsonschema:"a count"`
	Since *time.Time `json:"since,omitempty" jsonschema:"start"`
	Items []argsSub  `json:"items,omitempty" jsonschema:"items"`
	Ratio float64    `json:"ratio,omitempty" jsonschema:"a ratio"`
	On    bool       `json:"on,omitempty" jsonschema:"a switch"`
}

type argsSub struct {
	N  int       `json:"n" jsonschema:"a number"`
	At time.Time `json:"at,omitzero" jsonschema:"a time"`
}

func argsServer(t *testing.T, called *int) *mcp.ClientSession {
	t.Helper()
	s, err := New(Agent{Name: "dw-test", Register: func(s *Server) error {
		Add(s, Tool{Name: "args", Description: "takes arguments", ReadOnly: true, Idempotent: true,
			InputSchema: InputSchema[argsIn](func(sch *jsonschema.Schema) { Enum(sch, "kind", "deploy", "restore") })},
			func(ctx context.Context, in argsIn) (*echoOut, string, error) {
				*called++
				return &echoOut{Word: in.At.Format(time.RFC3339)}, "ok", nil
			})
		return nil
	}}, "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return connect(t, s)
}

// Every refusal names the argument, says what is valid, never names a Go
// type or echoes a huge value, and the handler never runs.
func TestBadArgumentsAreWordedForTheModel(t *testing.T) {
	called := 0
	cs := argsServer(t, &called)
	at := "2026-12-01T09:40:00Z"
	huge := strings.Repeat("z", 1<<20)
	cases := []struct {
		args map[string]any
		want []string
	}{
		{map[string]any{"at": 5}, []string{"argument 'at': must be text", "got the number 5"}},
		{map[string]any{"at": "yesterday"}, []string{"argument 'at': \"yesterday\" is not a valid time; use RFC 3339, e.g. 2026-12-01T09:40:00Z"}},
		{map[string]any{"at": at, "since": "last week"}, []string{"argument 'since':", "RFC 3339"}},
		{map[string]any{"at": at, "sub": map[string]any{"n": 1, "at": "soon"}}, []string{"argument 'sub':", "not a valid time"}},
		{map[string]any{"at": at, "items": []any{map[string]any{"n": "x"}}}, []string{"argument 'items[0].n': must be a whole number, got text"}},
		{map[string]any{"at": at, "limit": -1}, []string{"argument 'limit': must be from 1 to 500, got -1"}},
		{map[string]any{"at": at, "limit": 1e15}, []string{"argument 'limit': must be from 1 to 500, got 1000000000000000"}},
		{map[string]any{"at": at, "limit": 1.5}, []string{"argument 'limit': must be a whole number, got the number 1.5"}},
		{map[string]any{"at": at, "kind": "nope"}, []string{"argument 'kind': \"nope\" is not one of: deploy, restore"}},
		{map[string]any{"at": at, "tags": "x"}, []string{"argument 'tags': must be a list, got text"}},
		{map[string]any{"at": at, "tags": []any{1}}, []string{"argument 'tags[0]': must be text"}},
		{map[string]any{"at": at, "count": 1e30}, []string{"argument 'count':"}},
		{map[string]any{"at": at, "ratio": "x"}, []string{"argument 'ratio': must be a number, got text"}},
		{map[string]any{"at": at, "on": "yes"}, []string{"argument 'on': must be true or false, got text"}},
		{map[string]any{}, []string{"missing argument 'at' (when the change took effect"}},
		{map[string]any{"at": at, "nope": 1}, []string{"unknown argument 'nope'; valid: at, count, items, kind, limit, on, ratio, since, sub, tags"}},
		{map[string]any{"at": at, "kind": huge}, []string{"argument 'kind': \"zzz"}},
		{map[string]any{"at": at, "tags": []any{huge}}, []string{"argument 'tags[0]': 1048576 characters is too long; at most 512"}},
	}
	for _, c := range cases {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "args", Arguments: c.args})
		if err != nil {
			t.Fatalf("%.80v: %v", c.args, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if !res.IsError {
			t.Errorf("%.80v accepted", c.args)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(text, w) {
				t.Errorf("%.80v: %q lacks %q", c.args, text, w)
			}
		}
		for _, leak := range []string{"Go ", "struct", "unmarshal", "time.Time", "validating", "float64", "int64"} {
			if strings.Contains(text, leak) {
				t.Errorf("%.80v: %q mentions %q", c.args, text, leak)
			}
		}
		if len(text) > 600 {
			t.Errorf("%.80v: error is %d characters", c.args, len(text))
		}
	}
	if called != 0 {
		t.Errorf("handler ran %d times on bad arguments", called)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "args", Arguments: map[string]any{"at": at, "limit": 5, "kind": "deploy", "sub": map[string]any{"n": 2}}})
	if err != nil || res.IsError || called != 1 {
		t.Fatalf("valid call: %v %+v called %d", err, res, called)
	}
}

// A schema that cannot be built (a patch naming a property its type no
// longer has) refuses the call with an error instead of panicking in the
// server's request path.
func TestUnbuildableSchemaRefusesTheCall(t *testing.T) {
	c := newArgChecker[argsIn](func() *jsonschema.Schema {
		s := inferSchema[argsIn]()
		Enum(s, "no_such_property", "a")
		return s
	})
	err := c.check(json.RawMessage(`{"at":"2026-12-01T09:40:00Z"}`))
	if err == nil || !strings.Contains(err.Error(), "no property no_such_property") {
		t.Errorf("check = %v, want the build failure", err)
	}
}

type nulIn struct {
	Text    string         `json:"text,omitempty" jsonschema:"text"`
	Tags    []string       `json:"tags,omitempty" jsonschema:"tags"`
	Details map[string]any `json:"details,omitempty" jsonschema:"free-form notes"`
}

// A NUL anywhere in the arguments (a described string, a list item, deep
// in a free-form object, an object key) is refused before the handler
// runs, naming the tool, the argument's path and the position; PostgreSQL
// would answer a driver error and SQLite would store it.
func TestNULInAnyArgumentIsRefused(t *testing.T) {
	called := 0
	s, err := New(Agent{Name: "dw-test", Register: func(s *Server) error {
		Add(s, Tool{Name: "note", Description: "takes text", ReadOnly: true, Idempotent: true, InputSchema: InputSchema[nulIn](nil)},
			func(ctx context.Context, in nulIn) (*echoOut, string, error) {
				called++
				return &echoOut{Word: in.Text}, "ok", nil
			})
		return nil
	}}, "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, s)
	const rule = "text arguments may not contain NUL"
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"text": "a\x00b"}, "note: text holds a NUL character (U+0000) at character 2; " + rule},
		{map[string]any{"text": "é\x00"}, "note: text holds a NUL character (U+0000) at character 2; " + rule},
		{map[string]any{"tags": []any{"ok", "\x00"}}, "note: tags[1] holds a NUL character (U+0000) at character 1; " + rule},
		{map[string]any{"details": map[string]any{"a": []any{map[string]any{"b": "xy\x00"}}}}, "note: details.a[0].b holds a NUL character (U+0000) at character 3; " + rule},
		{map[string]any{"details": map[string]any{"k\x00": 1}}, "note: a key of details holds a NUL character (U+0000) at character 2; " + rule},
		{map[string]any{"x\x00": 1}, "note: a key of the arguments holds a NUL character (U+0000) at character 2; " + rule},
		// A long key is cut short in the path.
		{map[string]any{"details": map[string]any{strings.Repeat("k", 300): []any{0, "\x00"}}}, "note: details." + strings.Repeat("k", 80) + "…[1] holds a NUL character (U+0000) at character 1; " + rule},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "note", Arguments: c.args})
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if !res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != c.want {
			t.Errorf("%q:\n got %+v\nwant %s", c.args, res.Content[0], c.want)
		}
	}
	if called != 0 {
		t.Errorf("handler ran %d times on NUL arguments", called)
	}
	// An escaped backslash before u0000 is text, not a NUL.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "note", Arguments: json.RawMessage(`{"text":"\\u0000"}`)})
	if err != nil || res.IsError || called != 1 {
		t.Fatalf(`"\\u0000" refused: %v %+v`, err, res)
	}
}
