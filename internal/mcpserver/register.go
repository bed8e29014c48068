package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

//go:generate env UPDATE_LISTED_SCHEMAS=true go test -run TestListedSchemasAreCurrent .

// What tools/list carries for each tool's schemas is worked out when the
// module is built, not when an agent starts: schemas_gen.go holds, for
// every tool of every agent, its input schema (patched, limits applied)
// and its advertised output schema (outschema.go) as compact JSON, and a
// tool found there is listed with those bytes. Inferring, patching and
// cutting the schemas was most of what was left of an agent's start-up
// once resolving them had moved to the first call (call.go).
//
// The table is held to the Go types twice: TestListedSchemasAreCurrent
// compares every agent's tools with it, and in any test binary a server
// built from a stale entry panics (mustBeCurrent; "testing" is linked for
// testing.Testing, a few kilobytes and no start-up cost), so changing a
// tool's types fails that agent's own tests until `go generate
// ./internal/mcpserver` rewrites the table.

// listedTool is one entry of the table: the tool's input and answer types
// (so a tool of the same name over other types, as in a test, is never
// given another tool's schemas) and its schemas as compact JSON.
type listedTool struct {
	inType, outType string
	in, out         string
}

// listedTools are the SDK's tools/list entries of tools registered from
// the table, by name, as the answer carries them.
type listedTools struct {
	mu sync.RWMutex
	m  map[string]listedTool
}

// standIn is the input schema the SDK holds for a tool registered from the
// table: the SDK's Server.AddTool decodes any schema that is not a
// *jsonschema.Schema (twice for the input: to check its type, and for
// HTTP header annotations, which only the streamable HTTP transport uses)
// and re-encodes a *jsonschema.Schema for the header check, which cost
// about a millisecond of every agent's start. It holds this instead, and
// listMiddleware puts the table's bytes in its tools/list answer, so a
// client receives exactly what the SDK would have sent
// (TestListedIsWhatIsServed).
var standIn = &jsonschema.Schema{Type: "object"}

// listMiddleware gives each tools/list entry of a tool registered from the
// table its schemas; the SDK keeps its own work (paging, order, the other
// fields).
func (s *Server) listMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/list" || err != nil {
			return res, err
		}
		list, ok := res.(*mcp.ListToolsResult)
		if !ok {
			return res, err
		}
		s.fromTable.mu.RLock()
		defer s.fromTable.mu.RUnlock()
		for i, t := range list.Tools {
			if e, ok := s.fromTable.m[t.Name]; ok && t.InputSchema == any(standIn) {
				c := *t // the SDK's own entry is shared; the answer gets a copy
				c.InputSchema, c.OutputSchema = json.RawMessage(e.in), json.RawMessage(e.out)
				list.Tools[i] = &c
			}
		}
		return list, nil
	}
}

// liveSchemas are a tool's schemas as its Go types give them now.
type liveSchemas struct {
	inType, outType string
	in, out         func() *jsonschema.Schema
}

// listedSchemas returns the input and output schemas the SDK is to hold
// for a tool: the stand-in when the table has the tool over these types
// (listMiddleware lists the table's bytes), else the schemas built now.
func (s *Server) listedSchemas(name string, in, out func() *jsonschema.Schema, inType, outType reflect.Type) (inSchema, outSchema any) {
	live := liveSchemas{inType: typeKey(inType), outType: typeKey(outType), in: in, out: out}
	if s.live == nil {
		s.live = map[string]liveSchemas{}
	}
	s.live[name] = live
	e, ok := listed[name]
	if ok && !s.ignoreListed && testing.Testing() {
		mustBeCurrent(name, e, live)
	}
	if ok && !s.ignoreListed && e.inType == live.inType && e.outType == live.outType {
		s.fromTable.mu.Lock()
		defer s.fromTable.mu.Unlock()
		if s.fromTable.m == nil {
			s.fromTable.m = map[string]listedTool{}
		}
		s.fromTable.m[name] = e
		return standIn, nil
	}
	return in(), out()
}

// mustBeCurrent panics, in a test binary, when the table's entry for a
// tool differs from what its Go types give now: whoever changed the types
// learns it from their own package's tests, not from a client listing a
// stale schema. An agent never pays for the check.
func mustBeCurrent(name string, e listedTool, live liveSchemas) {
	in, err := json.Marshal(live.in())
	if err != nil {
		panic(err)
	}
	out, err := json.Marshal(live.out())
	if err != nil {
		panic(err)
	}
	if e.inType != live.inType || e.outType != live.outType || e.in != string(in) || e.out != string(out) {
		panic(fmt.Sprintf("tool %s: its schemas in internal/mcpserver/schemas_gen.go are out of date with its Go types; run go generate ./internal/mcpserver", name))
	}
}

// typeKey names a type by its package path and name.
func typeKey(t reflect.Type) string {
	if t.Name() == "" {
		return t.String()
	}
	return t.PkgPath() + "." + t.Name()
}
