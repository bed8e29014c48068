package mcpserver

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A result is written as EncodeMessage writes it, byte for byte: ids of
// both kinds (HTML characters, quotes, controls and non-ASCII in a string
// one), results as the SDK marshals them; errors, requests and
// notifications go through EncodeMessage itself.
func TestEncodeMessageAsTheSDKDoes(t *testing.T) {
	results := []any{
		map[string]any{},
		map[string]any{"text": "a <b> & \"c\" \u2028 é \x01", "n": 1.5, "list": []any{1, "x", nil, true}},
		&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "line\nbreak <tag> & more"}}, StructuredContent: map[string]any{"k": "v<>"}},
	}
	ids := []any{0.0, 1.0, -7.0, float64(1 << 53), "", "abc", "<&>", "quote\"back\\slash", "tab\tnl\n", "ü€😀"}
	var msgs []jsonrpc.Message
	for _, raw := range ids {
		id, err := jsonrpc.MakeID(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			// As the SDK's jsonrpc2 marshals a result: an encoder that
			// leaves HTML characters alone.
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(r); err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, &jsonrpc.Response{ID: id, Result: bytes.TrimRight(b.Bytes(), "\n")})
		}
		msgs = append(msgs, &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: -32602, Message: "bad <params>"}})
		msgs = append(msgs, &jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"x"}`)})
	}
	msgs = append(msgs, &jsonrpc.Request{Method: "notifications/progress", Params: json.RawMessage(`{}`)})
	// A result with a line break in it (never from the SDK) would break
	// the line: it goes through EncodeMessage, which compacts it.
	one, _ := jsonrpc.MakeID(1.0)
	msgs = append(msgs, &jsonrpc.Response{ID: one, Result: json.RawMessage("{\n \"a\": 1\n}")})
	for _, m := range msgs {
		want, err := jsonrpc.EncodeMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeMessage(m)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%#v:\n got %s (%v)\nwant %s", m, got, err, want)
		}
	}
}
