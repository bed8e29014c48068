package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/mcpserver/wire"
)

// Tools are registered with the SDK's Server.AddTool and this handler
// rather than with mcp.AddTool, which infers and resolves both schemas of
// every tool at registration: at an agent's start that was most of its
// CPU, for tools a session mostly never calls. The handler does what
// mcp.AddTool's does, in the same order and with the same words (go-sdk
// v1.8.0, mcp/server.go toolForErr and mcp/tool.go applySchema), with the
// schemas resolved on the tool's first call instead; call_test.go holds
// the two side by side. One difference is meant: an answer whose schema
// gives no default is sent as its Go type marshalled it, not marshalled
// again from a map, so its text keeps field order and exact integers.

// resolver resolves a schema once, when first asked, with the options the
// SDK uses.
func resolver(schema func() *jsonschema.Schema) func() (*jsonschema.Resolved, error) {
	return sync.OnceValues(func() (*jsonschema.Resolved, error) {
		return schema().Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	})
}

// typedHandler decodes the arguments (defaults applied, then checked
// against the input schema), calls h, and puts its answer, checked against
// the output schema, in StructuredContent (and in the text when h left
// none).
func typedHandler[In, Out any](h RawHandler[In, Out], input, output func() (*jsonschema.Resolved, error)) mcp.ToolHandler {
	// Whether the answer's schema gives a default is known once: the
	// schema does not change after it is resolved.
	outFills := sync.OnceValue(func() bool {
		r, err := output()
		return err != nil || r == nil || hasDefault(r.Schema())
	})
	// And how deep it looks into an answer (answercheck.go).
	outDepth := sync.OnceValue(func() int {
		r, err := output()
		if err != nil || r == nil {
			return -1
		}
		return answerDepth(r.Schema())
	})
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args json.RawMessage
		if req.Params.Arguments != nil {
			args = req.Params.Arguments
		}
		inResolved, err := input()
		if err != nil {
			return nil, fmt.Errorf("input schema of %s: %w", req.Params.Name, err)
		}
		args, err = applySchema(args, inResolved, false, true)
		if err != nil {
			var errRes mcp.CallToolResult
			errRes.SetError(fmt.Errorf("validating \"arguments\": %v", err))
			return &errRes, nil
		}
		var in In
		if args != nil {
			if err := sdkUnmarshal(args, &in); err != nil {
				var errRes mcp.CallToolResult
				errRes.SetError(err)
				return &errRes, nil
			}
		}
		res, out, err := h(ctx, req, in)
		if err != nil {
			// A JSON-RPC error is the protocol's answer; any other is the
			// tool's, shown to the model.
			if wireErr, ok := err.(*jsonrpc.Error); ok {
				return nil, wireErr
			}
			var errRes mcp.CallToolResult
			errRes.SetError(err)
			return &errRes, nil
		}
		if res == nil {
			res = &mcp.CallToolResult{}
		}
		// An answer that asks for input carries no content (the
		// multi-round-trip form).
		var outval any = out
		if res.InputRequests != nil {
			outval = nil
		}
		if outval == nil {
			return res, nil
		}
		outbytes, err := json.Marshal(outval)
		if err != nil {
			return nil, fmt.Errorf("marshaling output: %w", err)
		}
		outResolved, err := output()
		if err != nil {
			return nil, fmt.Errorf("output schema of %s: %w", req.Params.Name, err)
		}
		outJSON, err := checkAnswer(outbytes, outResolved, outFills(), outDepth())
		if err != nil {
			return nil, fmt.Errorf("validating tool output: %w", err)
		}
		res.StructuredContent = outJSON
		if res.Content == nil {
			res.Content = []mcp.Content{&mcp.TextContent{Text: string(outJSON)}}
		} else if !isObjectJSON(outJSON) {
			res.Content = append(res.Content, &mcp.TextContent{Text: string(outJSON)})
		}
		return res, nil
	}
}

// applySchema fills in the schema's defaults and validates data against
// it, as the SDK does: arguments as an object (none is {}), an answer as
// any JSON value (null is {} for an object schema). fills is false when
// the schema gives no default anywhere (see hasDefault).
func applySchema(data json.RawMessage, resolved *jsonschema.Resolved, forOutput, fills bool) (json.RawMessage, error) {
	if resolved == nil {
		return data, nil
	}
	var unmarshaled any
	if !forOutput {
		v := make(map[string]any)
		if len(data) > 0 {
			if err := sdkUnmarshal(data, &v); err != nil {
				return nil, fmt.Errorf("unmarshaling arguments: %w", err)
			}
		}
		unmarshaled = v
	} else if len(data) > 0 {
		if err := sdkUnmarshal(data, &unmarshaled); err != nil {
			return nil, fmt.Errorf("unmarshaling output: %w", err)
		}
	}
	appliedDefaults := false
	if forOutput && unmarshaled != nil && !fills {
		// An answer's schema is inferred from its Go type, which carries no
		// defaults, so there is nothing to fill in: the answer is checked
		// and sent as its handler's type marshalled it, instead of being
		// marshalled again from a map (for a large answer, the biggest part
		// of the time spent between the handler and the wire).
		if err := resolved.Validate(&unmarshaled); err != nil {
			return nil, err
		}
		return data, nil
	}
	if _, ok := unmarshaled.(map[string]any); ok {
		if err := resolved.ApplyDefaults(&unmarshaled); err != nil {
			return nil, fmt.Errorf("applying schema defaults:\n%w", err)
		}
		appliedDefaults = true
	} else if forOutput && unmarshaled == nil && resolved.Schema().Type == "object" {
		unmarshaled = make(map[string]any)
		if err := resolved.ApplyDefaults(&unmarshaled); err != nil {
			return nil, fmt.Errorf("applying schema defaults:\n%w", err)
		}
		appliedDefaults = true
	}
	if err := resolved.Validate(&unmarshaled); err != nil {
		return nil, err
	}
	if !appliedDefaults {
		return data, nil
	}
	out, err := json.Marshal(unmarshaled)
	if err != nil {
		return nil, fmt.Errorf("marshalling with defaults: %v", err)
	}
	return out, nil
}

// hasDefault: s, or a schema under it, gives a default, so ApplyDefaults
// may change an instance.
func hasDefault(s *jsonschema.Schema) bool {
	if s == nil {
		return false
	}
	if s.Default != nil {
		return true
	}
	for _, p := range s.Properties {
		if hasDefault(p) {
			return true
		}
	}
	for _, group := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems} {
		for _, c := range group {
			if hasDefault(c) {
				return true
			}
		}
	}
	return hasDefault(s.Items) || hasDefault(s.AdditionalProperties)
}

// errMaxDepthExceeded is the SDK's own words for arguments nested deeper
// than its decoder allows (wire.MaxNesting, which the transport holds every
// message to as well).
var errMaxDepthExceeded = fmt.Errorf("json: exceeded maximum nesting depth of %d", wire.MaxNesting)

// sdkUnmarshal decodes as the SDK does, nesting bounded alike, but with
// encoding/json rather than the SDK's decoder (segmentio's). That one
// parses each level of an interface value (an argument such as a
// proposal's details, or a whole answer) again for every level above
// it, so its time grows with size times depth: 4 MB of arguments nested
// 990 deep took an agent 47 s of CPU, and even shallow ones took 3-8
// times encoding/json's. Where the two decoders differ (struct field
// names matched exactly or case-insensitively, a field given twice, keys
// that fold differently), nothing reaches them here: arguments reach a
// struct only as encoding/json's own marshalling of a map the schema has
// checked (applySchema), with no name repeated and none that is not
// exactly a property (every struct's schema closes its properties:
// TestInputSchemasCloseEveryObject). Do not hand it a client's raw bytes
// for a struct.
func sdkUnmarshal(data []byte, v any) error {
	if wire.Nesting(data) > wire.MaxNesting {
		return errMaxDepthExceeded
	}
	return json.Unmarshal(data, v)
}

// isObjectJSON: data is a JSON object (its first non-space byte is '{').
func isObjectJSON(data json.RawMessage) bool {
	for _, b := range data {
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return true
		default:
			return false
		}
	}
	return false
}
