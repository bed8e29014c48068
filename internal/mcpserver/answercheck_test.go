package mcpserver

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// Every answer is judged by the shallow check as by decoding it whole: on every tool's advertised output schema and on schemas using
// the keywords the check must see through (enums, closed objects, nested
// items), for random answers that conform, or break the schema at any
// depth, with any JSON type.
func TestShallowCheckJudgesAsTheWholeAnswer(t *testing.T) {
	schemas := map[string]string{
		"enum of strings":     `{"type":"object","properties":{"state":{"type":"string","enum":["open","closed"]},"n":{"type":"integer"}}}`,
		"enum with an object": `{"type":"object","properties":{"v":{"enum":[{"a":1},"x"]}}}`,
		"enum of empties":     `{"type":"object","properties":{"v":{"enum":[{},[]]}}}`,
		"closed object":       `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`,
		"nested items":        `{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"},"tags":{"type":["null","array"],"items":{"type":"string"}}}}}}}`,
		"map of ints":         `{"type":"object","properties":{"counts":{"type":"object","additionalProperties":{"type":"integer"}}}}`,
		"required":            `{"type":"object","required":["a"],"properties":{"a":{"type":"object"}}}`,
	}
	for name, e := range listed {
		schemas["tool "+name] = e.out
	}
	rng := rand.New(rand.NewPCG(18, 7))
	fast := 0
	for name, text := range schemas {
		var s jsonschema.Schema
		if err := json.Unmarshal([]byte(text), &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		resolved, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var shape any
		if err := json.Unmarshal([]byte(text), &shape); err != nil {
			t.Fatal(err)
		}
		depth := answerDepth(&s)
		if depth >= 0 {
			fast++
		}
		if _, tool := listed[name[len("tool "):]]; len(name) > 5 && name[:5] == "tool " && tool && depth < 0 {
			t.Errorf("%s: its output schema is checked by decoding the answer whole (answerDepth -1)", name)
		}
		for i := 0; i < 300; i++ {
			answer, err := json.Marshal(instance(rng, shape, 0))
			if err != nil {
				t.Fatal(err)
			}
			_, wholeErr := applySchema(answer, resolved, true, false)
			_, shallowErr := checkAnswer(answer, resolved, false, depth)
			// Which of several violations an error names follows map order,
			// so whole and shallow are compared on the verdict.
			if (wholeErr == nil) != (shallowErr == nil) {
				t.Fatalf("%s (depth %d): answer %s\nchecked whole: %v\nchecked shallow: %v", name, depth, answer, wholeErr, shallowErr)
			}
		}
	}
	if fast < len(listed) {
		t.Fatalf("only %d of %d schemas take the shallow check", fast, len(schemas))
	}
}

// instance is a random JSON value shaped by a schema (its JSON form) most
// of the time, and anything at all otherwise.
func instance(rng *rand.Rand, schema any, level int) any {
	s, _ := schema.(map[string]any)
	if s == nil || rng.IntN(8) == 0 || level > 5 {
		return anything(rng, level)
	}
	if enum, ok := s["enum"].([]any); ok && rng.IntN(3) > 0 {
		return enum[rng.IntN(len(enum))]
	}
	types := []string{}
	switch ty := s["type"].(type) {
	case string:
		types = append(types, ty)
	case []any:
		for _, x := range ty {
			types = append(types, x.(string))
		}
	}
	if len(types) == 0 {
		return anything(rng, level)
	}
	switch types[rng.IntN(len(types))] {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		for k, p := range props {
			if rng.IntN(4) > 0 {
				out[k] = instance(rng, p, level+1)
			}
		}
		if ap, ok := s["additionalProperties"]; ok || rng.IntN(5) == 0 {
			for j := rng.IntN(3); j > 0; j-- {
				out[fmt.Sprintf("extra%d", j)] = instance(rng, ap, level+1)
			}
		}
		return out
	case "array":
		out := make([]any, rng.IntN(4))
		for j := range out {
			out[j] = instance(rng, s["items"], level+1)
		}
		return out
	case "string":
		return fmt.Sprintf("s%d", rng.IntN(10))
	case "integer":
		return rng.IntN(100) - 50
	case "number":
		return rng.Float64() * 100
	case "boolean":
		return rng.IntN(2) == 0
	}
	return nil
}

func anything(rng *rand.Rand, level int) any {
	switch k := rng.IntN(8); {
	case k == 0:
		return nil
	case k == 1:
		return rng.IntN(2) == 0
	case k == 2:
		return rng.IntN(10)
	case k == 3:
		return 0.5 + float64(rng.IntN(10))
	case k == 4:
		return fmt.Sprintf("s%d", rng.IntN(10))
	case (k == 5 || k == 6) && level < 5:
		out := map[string]any{}
		for j := rng.IntN(3); j > 0; j-- {
			out[fmt.Sprintf("k%d", j)] = anything(rng, level+1)
		}
		return out
	case level < 5:
		out := make([]any, rng.IntN(3))
		for j := range out {
			out[j] = anything(rng, level+1)
		}
		return out
	}
	return "leaf"
}

// An answer nested past the SDK's bound fails its check whether or not the
// schema looks inside it.
func TestShallowCheckHoldsTheNestingBound(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 1001) + "1" + strings.Repeat("}", 1001)
	for _, text := range []string{`{"type":"object"}`, `{"type":"object","properties":{"a":{"type":"object"}}}`} {
		var s jsonschema.Schema
		if err := json.Unmarshal([]byte(text), &s); err != nil {
			t.Fatal(err)
		}
		resolved, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checkAnswer(json.RawMessage(deep), resolved, false, answerDepth(&s)); err == nil {
			t.Errorf("schema %s: an answer nested 1,001 deep passed", text)
		}
	}
}
