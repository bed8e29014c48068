package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A deep answer type, like an incident inside a tool's answer.
type deepLeaf struct {
	Name  string  `json:"name" jsonschema:"the leaf's name, described at length so the schema grows past any budget"`
	Value float64 `json:"value" jsonschema:"the leaf's value, described at length so the schema grows past any budget"`
}

type deepMid struct {
	Leaves []deepLeaf          `json:"leaves" jsonschema:"the leaves under this node, described at length"`
	ByName map[string]deepLeaf `json:"by_name,omitempty" jsonschema:"the same leaves keyed by name"`
	Note   string              `json:"note,omitempty" jsonschema:"a free-text note on the node"`
}

type deepOut struct {
	ID    string    `json:"id" jsonschema:"the answer's id"`
	Count int       `json:"count" jsonschema:"how many mids"`
	Mids  []deepMid `json:"mids" jsonschema:"the mids, in order"`
	Main  *deepMid  `json:"main,omitempty" jsonschema:"the main mid"`
}

type smallOut struct {
	Word string `json:"word" jsonschema:"the word"`
	N    int    `json:"n,omitempty" jsonschema:"how many"`
}

func schemaJSON(t *testing.T, s *jsonschema.Schema) map[string]any {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestOutlineKeepsASmallSchemaWhole(t *testing.T) {
	full, err := jsonschema.For[smallOut](nil)
	if err != nil {
		t.Fatal(err)
	}
	m := schemaJSON(t, outline(full, OutputSchemaBudget))
	props := m["properties"].(map[string]any)
	for _, name := range []string{"word", "n"} {
		p := props[name].(map[string]any)
		if p["description"] == "" || p["type"] == nil {
			t.Errorf("%s lost its type or description: %v", name, p)
		}
	}
	// Constraints on our own answer are not advertised.
	if _, ok := m["required"]; ok {
		t.Errorf("required advertised: %v", m)
	}
	if _, ok := m["additionalProperties"]; ok {
		t.Errorf("additionalProperties advertised: %v", m)
	}
}

func TestOutlineCutsDeepestDetailFirst(t *testing.T) {
	full, err := jsonschema.For[deepOut](nil)
	if err != nil {
		t.Fatal(err)
	}
	if size(full) <= 800 {
		t.Fatalf("fixture too small to be cut: %d", size(full))
	}
	for _, budget := range []int{2000, 1200, 800, 400, 100} {
		got := outline(full, budget)
		m := schemaJSON(t, got)
		props, _ := m["properties"].(map[string]any)
		// The top-level names and types always stay.
		for _, name := range []string{"id", "count", "mids", "main"} {
			p, _ := props[name].(map[string]any)
			if p == nil || p["type"] == nil {
				t.Errorf("budget %d: top-level %s lost: %v", budget, name, p)
			}
		}
		if size(got) > budget && budget >= 400 {
			t.Errorf("budget %d: outline is %d characters", budget, size(got))
		}
		// Deeper detail never survives when shallower detail was cut:
		// a nested description only while the top-level ones remain.
		topDesc := props["id"].(map[string]any)["description"] != nil
		mids := props["mids"].(map[string]any)
		items, _ := mids["items"].(map[string]any)
		if items != nil {
			if ip, _ := items["properties"].(map[string]any); ip != nil {
				if lv, _ := ip["leaves"].(map[string]any); lv != nil && lv["description"] != nil && !topDesc {
					t.Errorf("budget %d: nested description kept while top-level ones were cut", budget)
				}
			}
		}
		t.Logf("budget %5d: %4d characters, top-level descriptions %v", budget, size(got), topDesc)
	}
}

// TestEveryAnswerConformsToItsAdvertisedSchema serves a tool answering a
// deep type through the SDK (which checks each answer against the
// advertised schema) and checks a client can validate it too.
func TestEveryAnswerConformsToItsAdvertisedSchema(t *testing.T) {
	answer := &deepOut{ID: "x", Count: 1, Mids: []deepMid{{
		Leaves: []deepLeaf{{Name: "a", Value: 1}},
		ByName: map[string]deepLeaf{"a": {Name: "a", Value: 1}},
	}}}
	s, err := New(Agent{Name: "dw-test", Instructions: "test", Register: func(s *Server) error {
		Add(s, Tool{Name: "deep", Description: "answers a deep type", ReadOnly: true, Idempotent: true},
			func(ctx context.Context, in echoIn) (*deepOut, string, error) {
				if in.Word == "nil" {
					return nil, "nothing", nil
				}
				return answer, "deep", nil
			})
		return nil
	}}, "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, s)
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(tools.Tools[0].OutputSchema)
	if len(raw) > OutputSchemaBudget {
		t.Errorf("advertised output schema is %d characters, over %d", len(raw), OutputSchemaBudget)
	}
	var adv jsonschema.Schema
	if err := json.Unmarshal(raw, &adv); err != nil {
		t.Fatal(err)
	}
	resolved, err := adv.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, word := range []string{"full", "nil"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deep", Arguments: map[string]any{"word": word}})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", word, err, res)
		}
		var v any
		sc, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(sc, &v); err != nil {
			t.Fatal(err)
		}
		if err := resolved.Validate(v); err != nil {
			t.Errorf("%s: answer %s does not conform to the advertised schema: %v", word, sc, err)
		}
		if word == "full" && !strings.Contains(string(sc), `"leaves"`) {
			t.Errorf("answer lost its nested data: %s", sc)
		}
		// A nil answer is the zero value, its fields present.
		if m, _ := v.(map[string]any); word == "nil" && (m == nil || m["count"] != 0.0 || m["id"] != "") {
			t.Errorf("nil answer is %s, want the zero value", sc)
		}
	}
}

// An answer whose words need escaping, with a nullable pointer, an any
// and an enum, so every branch of size is taken.
type oddOut struct {
	Quote  string         `json:"quote" jsonschema:"says \"a<b & c>d\" with a back\\slash"`
	Uni    string         `json:"uni,omitempty" jsonschema:"naïve café — 2 lines\u2028here"`
	Ptr    *int           `json:"ptr,omitempty"`
	Any    any            `json:"any,omitempty"`
	Raw    map[string]any `json:"raw,omitempty" jsonschema:"free-form"`
	Nested []deepOut      `json:"nested"`
	Empty  struct{}       `json:"empty"`
}

// size counts what json.Marshal would write without writing it; outline
// picks the advertised cut by it, so a miscount would change what agents
// advertise. Every cut of every shape must count exactly.
func TestSizeIsTheMarshalledLength(t *testing.T) {
	fulls := []*jsonschema.Schema{}
	for _, f := range []func() (*jsonschema.Schema, error){
		func() (*jsonschema.Schema, error) { return jsonschema.For[deepOut](nil) },
		func() (*jsonschema.Schema, error) { return jsonschema.For[smallOut](nil) },
		func() (*jsonschema.Schema, error) { return jsonschema.For[oddOut](nil) },
	} {
		s, err := f()
		if err != nil {
			t.Fatal(err)
		}
		fulls = append(fulls, s)
	}
	enum := &jsonschema.Schema{Type: "string", Enum: []any{"a", "<b>", 3}}
	fulls = append(fulls, enum, &jsonschema.Schema{}, &jsonschema.Schema{Types: []string{"null", "string"}},
		&jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}})
	checked := 0
	for _, full := range fulls {
		for structure := 0; structure <= depth(full, 0)+1; structure++ {
			for described := 0; described <= structure+1; described++ {
				c := cut(full, 0, structure, described)
				b, err := json.Marshal(c)
				if err != nil {
					t.Fatal(err)
				}
				if got := size(c); got != len(b) {
					t.Errorf("size = %d, json.Marshal wrote %d: %s", got, len(b), b)
				}
				checked++
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d cuts checked", checked)
	}
}
