package schema

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/schemahistory"
)

// CheckIn is a proposed schema for a subject.
type CheckIn struct {
	Subject    string `json:"subject" jsonschema:"Schema Registry subject, e.g. api-usage-value"`
	Schema     string `json:"schema" jsonschema:"the proposed schema text"`
	SchemaType string `json:"schema_type,omitempty" jsonschema:"AVRO (default), JSON or PROTOBUF"`
	Level      string `json:"level,omitempty" jsonschema:"compatibility level to judge by (BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE, NONE); default: the subject's level in the registry, else BACKWARD"`
}

// RegistryVerdict and Reader are the domain's.
type (
	RegistryVerdict = schemahistory.RegistryVerdict
	Reader          = lineage.AssetReader
)

// CheckOut is schemahistory's check, answered as is. It is a type of the
// agent's own (not an alias) because the tool's listed schemas are keyed
// by its output type's name.
type CheckOut schemahistory.Check

var checkCompatibilityTool = mcpserver.Tool{
	Name:  "check_compatibility",
	Title: "Check a schema change: registry rule and every reader",
	Description: "Checks a proposed schema version for a Schema Registry subject two ways before anyone registers it: " +
		"whether the compatibility rule accepts it (the registry's own verdict when configured, and a local verdict under every level against the subject's versions, which works offline), " +
		"and who downstream reads a field it removes or changes (from column lineage and recorded readers in the context graph), with owners. " +
		"Compatible is not safe: the answer gives both verdicts, the field-level diff, and the canonical SHA-256 an approval to register binds to. " +
		"A subject with no earlier version is compatible: the schema would be its first version.",
	ReadOnly: true, Idempotent: true, OpenWorld: true,
	InputSchema: mcpserver.InputSchema[CheckIn](func(s *jsonschema.Schema) {
		mcpserver.Enum(s, "level", compat.Levels...)
		mcpserver.Enum(s, "schema_type", compat.Kinds...)
	}),
}

func (h *handlers) checkCompatibility(ctx context.Context, in CheckIn) (*CheckOut, string, error) {
	p, err := schemahistory.ParseProposed(schemahistory.CheckParams{Subject: in.Subject, Schema: in.Schema, SchemaType: in.SchemaType, Level: in.Level})
	if err != nil {
		return nil, "", err
	}
	g, err := h.d.Graph(ctx)
	if err != nil {
		return nil, "", err
	}
	client, configured, err := h.registryClient()
	if err != nil {
		return nil, "", err
	}
	k := &schemahistory.Checker{DB: g.DB(), Graph: g, Registry: client, Configured: configured, Clock: h.d.Clock, Source: Name}
	c, err := k.Check(ctx, p)
	if err != nil {
		return nil, "", err
	}
	out := (*CheckOut)(c)
	return out, summarizeCheck(out), nil
}

func summarizeCheck(o *CheckOut) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s.", o.Subject, o.SchemaType, o.Verdict)
	if o.Registry.Reached {
		fmt.Fprintf(&b, "\nRegistry (%s): compatible=%t.", o.Registry.Level, o.Registry.Compatible)
	} else if o.Registry.Note != "" {
		fmt.Fprintf(&b, "\nRegistry: %s.", o.Registry.Note)
	}
	if o.Disagreement != "" {
		fmt.Fprintf(&b, "\nDisagreement: %s", o.Disagreement)
	}
	for i, c := range o.Changes {
		if i == summaryItems {
			fmt.Fprintf(&b, "\n… %d field-level changes in all", max(o.ChangesTotal, len(o.Changes)))
			break
		}
		fmt.Fprintf(&b, "\n- %s %s", c.Kind, c.Path)
	}
	for i, r := range o.Readers {
		if i == summaryItems {
			fmt.Fprintf(&b, "\n… %d readers in all", max(o.ReadersTotal, len(o.Readers)))
			break
		}
		fmt.Fprintf(&b, "\n- reader %s (owner %s): %s", r.Asset, orNone(r.Owner), orNone(r.Evidence))
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none recorded"
	}
	return s
}
