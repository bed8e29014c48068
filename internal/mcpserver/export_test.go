package mcpserver

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/google/jsonschema-go/jsonschema"
)

// NewLive is New listing every tool's schemas as its Go types give them
// now, not from schemas_gen.go.
func NewLive(a Agent) (*Server, error) { return newServer(a, "test", nil, true) }

// ListedTool is one tool's entry of schemas_gen.go, or what it should be.
type ListedTool struct {
	Name, InType, OutType, In, Out string
}

// LiveTools builds every registered tool's schemas from its Go types as
// compact JSON, and checks that both resolve (they are resolved only on a
// tool's first call in a session).
func LiveTools(s *Server) ([]ListedTool, error) {
	var out []ListedTool
	for name, l := range s.live {
		in, err := json.Marshal(l.in())
		if err != nil {
			return nil, err
		}
		o, err := json.Marshal(l.out())
		if err != nil {
			return nil, err
		}
		for which, sch := range map[string]*jsonschema.Schema{"input": l.in(), "output": l.out()} {
			if _, err := sch.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
				return nil, fmt.Errorf("%s: the %s schema does not resolve: %v", name, which, err)
			}
		}
		out = append(out, ListedTool{Name: name, InType: l.inType, OutType: l.outType, In: string(in), Out: string(o)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Listed is the table as built into the package.
func Listed() []ListedTool {
	var out []ListedTool
	for name, e := range listed {
		out = append(out, ListedTool{Name: name, InType: e.inType, OutType: e.outType, In: e.in, Out: e.out})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
