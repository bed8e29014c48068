package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/dataworkers/dw/internal/mcpserver/wire"
)

// FuzzDecodeLine: whatever a client writes on one line, the transport
// either hands the server a message or has an error to answer with: a
// JSON-RPC code, a message, and an id that is null, a string or a number.
func FuzzDecodeLine(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"a","result":{}}`, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "hello", "\x00", "\xff",
		`{"jsonrpc":"2.0","id":{},"method":"x"}`, `{"id":1}`, `{"jsonrpc":"2.0","id":1,"method":"x","params":[[[[]]]]}`, `  `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		msg, id, code, problem := decodeLine(line)
		if problem == "" {
			if msg == nil {
				t.Fatal("no message and no problem")
			}
			if _, err := jsonrpc.EncodeMessage(msg); err != nil {
				t.Fatalf("accepted %q but cannot encode it: %v", line, err)
			}
			return
		}
		if code == 0 {
			return // blank line, skipped
		}
		if code != jsonrpc.CodeParseError && code != jsonrpc.CodeInvalidRequest {
			t.Fatalf("code %d", code)
		}
		if id != nil {
			var v any
			if err := json.Unmarshal(id, &v); err != nil {
				t.Fatalf("id %q is not JSON", id)
			}
			switch v.(type) {
			case string, float64:
			default:
				t.Fatalf("id %s is not a string or number", id)
			}
		}
		_ = wire.TooBig(wire.Line{Prefix: line}, 1) // finding an id in any prefix never panics
	})
}
