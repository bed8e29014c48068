package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	sjson "github.com/segmentio/encoding/json"

	"github.com/dataworkers/dw/internal/mcpserver/wire"
)

// An answer is checked against its output schema as the SDK checks it
// (call.go), but decoded only as deep as the schema looks. The schema a
// tool advertises and checks is its answer's outline (outschema.go): the
// top-level fields' types and, within the budget, a level or two below.
// Decoding a 16 KB answer whole into maps, every asset of a blast radius
// page and every hop of its paths, was nine tenths of the check's cost
// (about 0.15 ms of a warm call at 1M assets), to validate types two
// levels up; decoded this way, the check takes a quarter less.
//
// Below the depth the schema constrains, each container is replaced by an
// empty one of the same JSON type, which every schema keyword the check
// allows (answerDepth) judges as it judges the container in full; scalars
// are decoded as they are. The answer is the marshalled Go value, so it is
// valid JSON throughout; a value below the depth the schema looks at is
// not decoded, so one the SDK could not decode (a number past float64,
// which json.Marshal never writes) is not reported, as no schema keyword
// there would have judged it.

// answerDepth is how many levels of containers below an answer's root
// its schema constrains, or -1 when the schema uses a keyword this does
// not know, so the answer is decoded whole.
func answerDepth(s *jsonschema.Schema) int {
	raw, err := json.Marshal(s)
	if err != nil {
		return -1
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return -1
	}
	return depthOf(v)
}

// depthOf is answerDepth over the schema's JSON.
func depthOf(schema any) int {
	switch s := schema.(type) {
	case bool:
		if s {
			return 0 // anything
		}
		return -1
	case map[string]any:
		d := 0
		for k, sub := range s {
			switch k {
			case "type", "description", "title":
			case "enum":
				// A container never equals a scalar, so an empty one fails
				// a scalar enum as the whole one does; an enum listing a
				// container would need the container itself.
				values, ok := sub.([]any)
				if !ok {
					return -1
				}
				for _, v := range values {
					switch v.(type) {
					case map[string]any, []any:
						return -1
					}
				}
			case "properties":
				props, ok := sub.(map[string]any)
				if !ok {
					return -1
				}
				for _, p := range props {
					pd := depthOf(p)
					if pd < 0 {
						return -1
					}
					d = max(d, 1+pd)
				}
			case "items", "additionalProperties":
				pd := depthOf(sub)
				if pd < 0 {
					return -1
				}
				d = max(d, 1+pd)
			default:
				return -1
			}
		}
		return d
	}
	return -1
}

// shallow decodes data as the SDK does (sdkUnmarshal), opening depth
// levels of containers; the containers below are empty ones of their type.
func shallow(data []byte, depth int) (any, error) {
	var first byte
	for _, b := range data {
		if b != ' ' && b != '\t' && b != '\n' && b != '\r' {
			first = b
			break
		}
	}
	switch {
	case first == '{' && depth == 0:
		return map[string]any{}, nil
	case first == '[' && depth == 0:
		return []any{}, nil
	case first == '{':
		var members map[string]json.RawMessage
		if err := splitJSON(data, &members); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(members))
		for k, raw := range members {
			v, err := shallow(raw, depth-1)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	case first == '[':
		var elems []json.RawMessage
		if err := splitJSON(data, &elems); err != nil {
			return nil, err
		}
		out := make([]any, len(elems))
		for i, raw := range elems {
			v, err := shallow(raw, depth-1)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	var v any
	err := sdkUnmarshal(data, &v)
	return v, err
}

// splitJSON splits a container into its members, undecoded: with the
// SDK's decoder (segmentio's), which does this in time linear in the
// size (each member is scanned once) and faster than encoding/json (0.18
// against 0.29 ms for a page of a blast radius). Never use it to decode
// into interface values, whose time it makes grow with size times depth
// (sdkUnmarshal).
func splitJSON[T map[string]json.RawMessage | []json.RawMessage](data []byte, into *T) error {
	if wire.Nesting(data) > wire.MaxNesting {
		return errMaxDepthExceeded
	}
	dec := sjson.NewDecoder(bytes.NewReader(data))
	dec.DontMatchCaseInsensitiveStructFields()
	return dec.Decode(into)
}

// checkAnswer checks an answer against its output schema and returns what
// to send: the answer as marshalled, or, when the schema gives defaults,
// the answer with them filled in (applySchema). depth is answerDepth of
// the schema.
func checkAnswer(data json.RawMessage, resolved *jsonschema.Resolved, fills bool, depth int) (json.RawMessage, error) {
	if resolved == nil || fills || depth < 0 || len(data) == 0 {
		return applySchema(data, resolved, true, fills)
	}
	if depth == 0 && wire.Nesting(data) > wire.MaxNesting {
		// Opened at all, a container is decoded whole first, which holds
		// it to the SDK's nesting bound; unopened, this does.
		return applySchema(data, resolved, true, fills)
	}
	v, err := shallow(data, depth)
	if err != nil {
		return nil, fmt.Errorf("unmarshaling output: %w", err)
	}
	if v == nil {
		// null is checked as applySchema checks it (an object schema
		// reads it as {}).
		return applySchema(data, resolved, true, fills)
	}
	if err := resolved.Validate(&v); err != nil {
		// Checked again whole, so the error quotes the answer as it is,
		// not with the emptied containers. An answer that breaks its own
		// schema is a bug; what it costs does not matter.
		return applySchema(data, resolved, true, fills)
	}
	return data, nil
}
