package compat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ParseError is a schema the parser refused: which schema, where (1-based
// line and column, 0 when the parser does not say) and the parser's message.
type ParseError struct {
	Kind Kind
	// Which names the schema: "new schema", "version 3", "reference 1".
	Which   string
	Line    int
	Column  int
	Message string
}

// Error says which schema, where, and what the parser said.
func (e *ParseError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is not a valid %s schema", nonEmpty(e.Which, "schema"), kindWord(e.Kind))
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d, column %d)", e.Line, e.Column)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	return b.String()
}

func kindWord(k Kind) string {
	switch k {
	case JSON:
		return "JSON Schema"
	case Protobuf:
		return "Protobuf"
	}
	return "Avro"
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// withWhich names the schema a parse error is about, keeping a more
// specific name (a reference inside that schema) as a prefix.
func withWhich(err error, which string) error {
	var pe *ParseError
	if errors.As(err, &pe) {
		cp := *pe
		if cp.Which == "" {
			cp.Which = which
		} else {
			cp.Which = which + " " + cp.Which
		}
		return &cp
	}
	return fmt.Errorf("%s: %w", which, err)
}

// jsonSyntax checks that text is one JSON value and, if it is not, says
// where, since hamba/avro and encoding/json report only a byte offset or
// nothing useful.
func jsonSyntax(kind Kind, text string) error {
	if strings.TrimSpace(text) == "" {
		return &ParseError{Kind: kind, Message: "the schema is empty"}
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	if err == nil {
		if dec.More() {
			off := int(dec.InputOffset())
			line, col := lineCol(text, off)
			return &ParseError{Kind: kind, Line: line, Column: col, Message: "unexpected text after the end of the JSON value"}
		}
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := lineCol(text, int(se.Offset)-1)
		return &ParseError{Kind: kind, Line: line, Column: col, Message: se.Error()}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		line, col := lineCol(text, len(text))
		return &ParseError{Kind: kind, Line: line, Column: col, Message: "unexpected end of JSON input"}
	}
	return &ParseError{Kind: kind, Message: err.Error()}
}

// lineCol turns a byte offset into a 1-based line and column (in runes).
func lineCol(text string, off int) (int, int) {
	if off < 0 {
		off = 0
	}
	if off > len(text) {
		off = len(text)
	}
	line, col := 1, 1
	for _, r := range text[:off] {
		if r == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}
