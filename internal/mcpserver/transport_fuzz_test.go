package mcpserver

import (
	"bytes"
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

// FuzzDecodeBatch: whatever array a client writes on one line, taking it
// apart gives either one error for the whole (not a batch: empty, too
// large) or exactly one outcome per member: a message the server can take
// (never initialize) or an Invalid Request or Parse error addressed to a
// null, string or number id.
func FuzzDecodeBatch(f *testing.F) {
	for _, s := range []string{
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`, `[]`, `[42]`, `[[]]`,
		`[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}]`, `[{"jsonrpc":"2.0","id":"a","result":{}},null,"x"]`,
		`[{"jsonrpc":"2.0","id":null,"method":"ping"},{"id":1},{"jsonrpc":"2.0","id":1.5,"method":"ping"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '[' {
			return
		}
		if wire.CheckLine(line) != nil {
			return
		}
		var raws []json.RawMessage
		if err := json.Unmarshal(line, &raws); err != nil {
			return
		}
		members, problem := decodeBatch(line)
		if problem != "" {
			if members != nil || len(raws) > 0 && len(raws) <= maxBatch {
				t.Fatalf("a batch of %d refused whole: %s", len(raws), problem)
			}
			return
		}
		if len(members) != len(raws) {
			t.Fatalf("%d members read as %d", len(raws), len(members))
		}
		for i, m := range members {
			if (m.msg == nil) == (m.problem == "") {
				t.Fatalf("member %d: message %v, problem %q: want exactly one", i, m.msg, m.problem)
			}
			if m.msg != nil {
				if req, ok := m.msg.(*jsonrpc.Request); ok && req.Method == "initialize" {
					t.Fatalf("member %d: initialize passed in a batch", i)
				}
				if _, err := jsonrpc.EncodeMessage(m.msg); err != nil {
					t.Fatalf("member %d accepted but cannot be encoded: %v", i, err)
				}
				continue
			}
			if m.code != jsonrpc.CodeParseError && m.code != jsonrpc.CodeInvalidRequest {
				t.Fatalf("member %d: code %d", i, m.code)
			}
			if m.id != nil {
				var v any
				if err := json.Unmarshal(m.id, &v); err != nil {
					t.Fatalf("member %d: id %q is not JSON", i, m.id)
				}
				switch v.(type) {
				case string, float64:
				default:
					t.Fatalf("member %d: id %s is not a string or number", i, m.id)
				}
			}
		}
	})
}
