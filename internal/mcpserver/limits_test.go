package mcpserver

import (
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

type limitsIn struct {
	Asset   string            `json:"asset" jsonschema:"asset id"`
	Query   string            `json:"query,omitempty" jsonschema:"words"`
	SQL     string            `json:"sql,omitempty" jsonschema:"a predicate"`
	Assets  []string          `json:"assets,omitempty" jsonschema:"ids"`
	Details map[string]string `json:"details,omitempty" jsonschema:"facts"`
	Nested  []struct {
		Why string `json:"why" jsonschema:"reason"`
	} `json:"nested,omitempty" jsonschema:"things"`
	Limit int    `json:"limit,omitempty" jsonschema:"page size"`
	Kind  string `json:"kind,omitempty" jsonschema:"a kind"`
	Own   string `json:"own,omitempty" jsonschema:"own bound"`
}

func TestApplyLimits(t *testing.T) {
	s := InputSchema[limitsIn](func(s *jsonschema.Schema) {
		Enum(s, "kind", "a", "b")
		MaxLength(s, "own", 7)
	}).Build()
	ApplyLimits("some_tool", s)
	p := s.Properties
	for path, want := range map[string]int{
		"asset": MaxID, "query": MaxQuery, "sql": MaxSQL, "own": 7,
	} {
		if got := p[path].MaxLength; got == nil || *got != want {
			t.Errorf("%s maxLength = %v, want %d", path, got, want)
		}
		if !strings.Contains(p[path].Description, "characters") {
			t.Errorf("%s description does not state the limit: %q", path, p[path].Description)
		}
	}
	if got := p["assets"].Items.MaxLength; got == nil || *got != MaxID {
		t.Errorf("list items unbounded: %v", got)
	}
	if got := p["details"].AdditionalProperties.MaxLength; got == nil {
		t.Errorf("map values unbounded")
	}
	if got := p["nested"].Items.Properties["why"].MaxLength; got == nil || *got != MaxText {
		t.Errorf("nested why = %v, want %d", got, MaxText)
	}
	if l := p["limit"]; l.Minimum == nil || *l.Minimum != 1 || l.Maximum == nil || *l.Maximum != 500 {
		t.Errorf("limit not range-checked: %+v", l)
	}
	if strings.Contains(p["kind"].Description, "characters") {
		t.Errorf("an enum's description need not state a length: %q", p["kind"].Description)
	}
	before := p["asset"].Description
	ApplyLimits("some_tool", s)
	if p["asset"].Description != before {
		t.Errorf("applying twice changed the description: %q", p["asset"].Description)
	}
	// The schema rejects what it promises to reject.
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]map[string]any{
		"long id":      {"asset": strings.Repeat("x", MaxID+1)},
		"long query":   {"asset": "a", "query": strings.Repeat("q", MaxQuery+1)},
		"limit -1":     {"asset": "a", "limit": -1},
		"limit 0":      {"asset": "a", "limit": 0},
		"limit 1e15":   {"asset": "a", "limit": 1e15},
		"limit 2.5":    {"asset": "a", "limit": 2.5},
		"limit \"10\"": {"asset": "a", "limit": "10"},
	} {
		if err := r.Validate(v); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := r.Validate(map[string]any{"asset": "a", "limit": 500}); err != nil {
		t.Errorf("valid input refused: %v", err)
	}
}

func TestApplyLimitsToolSpecific(t *testing.T) {
	type in struct {
		Schema string `json:"schema" jsonschema:"a name"`
	}
	a, b := InputSchema[in](nil).Build(), InputSchema[in](nil).Build()
	ApplyLimits("list_tables", a)
	ApplyLimits("check_compatibility", b)
	if *a.Properties["schema"].MaxLength != MaxID || *b.Properties["schema"].MaxLength != MaxSchemaText {
		t.Errorf("list_tables schema %d, check_compatibility schema %d", *a.Properties["schema"].MaxLength, *b.Properties["schema"].MaxLength)
	}
}
