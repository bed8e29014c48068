// Package wire holds the rules of the agents' stdio framing that need
// nothing but the standard library: how input is split into lines and
// bounded, which lines are refused and with what JSON-RPC error, and how
// that error is written. The agents' transport (mcpserver.StdioTransport)
// and the starter that answers a first connect while the agents are built
// (cmd/dw-starter, which must build in seconds on a cold cache, so it
// links no SDK) both use it, so a bad line gets the same answer from
// either.
package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

// JSON-RPC error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInternalError  = -32603
)

// DefaultMaxMessageBytes bounds one inbound line (one JSON-RPC message).
// A real dbt manifest passed inline runs to tens of MiB, so the default is
// above the SDK's 16 MiB; DW_MAX_MESSAGE_BYTES changes it.
const DefaultMaxMessageBytes = 32 << 20

// MaxNesting matches the SDK's own decoder limit, so a message these rules
// let through never fails to decode further in.
const MaxNesting = 1000

// MaxOuterNesting and MaxOuterBytes bound a message outside a tool call's
// arguments. The SDK decodes the rest of a message (params, results)
// itself, with a decoder whose time for a value of interface type
// (_meta, a client's capabilities, its answers) grows with the value's
// size times its depth, and more than once: 1 MB of _meta nested 990
// deep kept an agent busy for 17 s, and 33 MB of it 28 deep for 30 s.
// Nothing MCP sends there nests more than a few levels or runs past a
// few KB. A tool call's arguments, which the SDK hands on undecoded and
// the server decodes in time linear in their size, may nest up to
// MaxNesting and fill the message (DW_MAX_MESSAGE_BYTES).
const (
	MaxOuterNesting = 32
	MaxOuterBytes   = 1 << 20
)

// idPrefixBytes is how much of an over-size line is kept to find its id in,
// so the error can be addressed to the request that was too big.
const idPrefixBytes = 64 << 10

// MaxMessageBytesFromEnv reads DW_MAX_MESSAGE_BYTES (a positive byte count),
// falling back to DefaultMaxMessageBytes.
func MaxMessageBytesFromEnv() (int, error) {
	v := os.Getenv("DW_MAX_MESSAGE_BYTES")
	if v == "" {
		return DefaultMaxMessageBytes, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1024 {
		return 0, fmt.Errorf("DW_MAX_MESSAGE_BYTES=%q: want a whole number of bytes, at least 1024 (default %d)", v, DefaultMaxMessageBytes)
	}
	return n, nil
}

// Line is one line of input: its bytes (newline included when there was
// one), or, for a line over the limit, its size and the start of it.
type Line struct {
	Data   []byte
	TooBig int
	Prefix []byte
}

// Reader splits input at newlines, never holding more than max bytes of
// one line: the rest of an over-size line is skipped up to its newline.
type Reader struct {
	r   *bufio.Reader
	max int
	err error // the read error that ended the last line, returned next
}

// NewReader reads lines of at most max bytes (0: DefaultMaxMessageBytes).
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = DefaultMaxMessageBytes
	}
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Max is the limit on one line's payload.
func (r *Reader) Max() int { return r.max }

// Next returns the next non-empty line, or the error that ended the input
// (io.EOF at its end) once every line before it has been returned.
func (r *Reader) Next() (Line, error) {
	for r.err == nil {
		var (
			buf    []byte
			size   int
			tooBig bool
			err    error
		)
		for {
			var chunk []byte
			chunk, err = r.r.ReadSlice('\n')
			size += len(chunk)
			if !tooBig {
				payload := size
				if err == nil {
					payload-- // the newline ending the line is not part of it
				}
				if payload > r.max {
					tooBig = true
					keep := min(idPrefixBytes, len(buf))
					buf = append(buf[:keep:keep], chunk[:min(len(chunk), idPrefixBytes-keep)]...)
				} else {
					buf = append(buf, chunk...)
				}
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		r.err = err
		switch {
		case tooBig:
			return Line{TooBig: size, Prefix: buf}, nil
		case len(buf) > 0:
			return Line{Data: buf}, nil
		}
	}
	return Line{}, r.err
}

// TooBig is the answer to a line over the limit of max bytes, addressed
// to the id found in its start when there is one.
func TooBig(l Line, max int) Problem {
	return Problem{ID: idFromPrefix(l.Prefix), Code: CodeInvalidRequest, Message: fmt.Sprintf(
		"message of more than %d bytes is over the limit of %d bytes (DW_MAX_MESSAGE_BYTES); pass large documents by file path instead", max, max)}
}

// Message is what Check reads of a line it lets through.
type Message struct {
	// Line is the message, surrounding white space trimmed.
	Line []byte
	// ID is the id member as sent; nil when absent or null.
	ID json.RawMessage
	// Method is the method; "" for a response.
	Method string
}

// IsCall is whether the message is a request the server must answer.
func (m Message) IsCall() bool { return m.Method != "" && m.ID != nil }

// Problem is why a line was refused: the JSON-RPC error to answer it with
// (ID nil answers with id null). A zero Code means say nothing (a blank
// line).
type Problem struct {
	ID      json.RawMessage
	Code    int64
	Message string
}

// BatchVersion is the one MCP revision whose base protocol has JSON-RPC
// batches (see mcpserver's transport for the spec's words): a batch is
// read only in a session that negotiated it, and refused otherwise.
const BatchVersion = "2025-03-26"

// Check applies the envelope rules to one line that is not an accepted
// batch. A line it lets through is a JSON-RPC 2.0 object with a usable id
// (or none) and, when it has a method, a string method.
func Check(line []byte) (Message, *Problem) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return Message{}, &Problem{Message: "blank"}
	}
	if p := CheckLine(line); p != nil {
		return Message{}, p
	}
	switch line[0] {
	case '[':
		return Message{}, &Problem{Code: CodeInvalidRequest, Message: fmt.Sprintf(
			"JSON-RPC batches are read only when the session negotiated protocol version %s (MCP has no batches before or after it); send one message per line", BatchVersion)}
	case '{':
	default:
		return Message{}, &Problem{Code: CodeInvalidRequest, Message: "message must be a JSON-RPC object"}
	}
	return CheckObject(line)
}

// CheckLine checks what every non-blank line must be, a batch taken
// whole: valid UTF-8, nested at most MaxNesting deep, one JSON value.
func CheckLine(line []byte) *Problem {
	// For these two the id can often still be read, and answering it
	// spares the client waiting for an answer that never comes.
	if !utf8.Valid(line) {
		return &Problem{ID: idOf(line), Code: CodeParseError, Message: "message is not valid UTF-8"}
	}
	if d := Nesting(line); d > MaxNesting {
		return &Problem{ID: idOf(line), Code: CodeParseError, Message: fmt.Sprintf("message nests more than %d levels deep", MaxNesting)}
	}
	var raw json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return &Problem{Code: CodeParseError, Message: "message is not valid JSON: " + jsonProblem(err)}
	}
	return nil
}

// CheckObject checks one JSON object, already through CheckLine, as a
// JSON-RPC 2.0 message: a line of its own, or a member of a batch.
func CheckObject(line []byte) (Message, *Problem) {
	bad := func(id json.RawMessage, code int64, msg string) (Message, *Problem) {
		return Message{}, &Problem{ID: id, Code: code, Message: msg}
	}
	// The envelope is checked here rather than by the SDK, whose errors
	// name Go types ("invalid ID type []interface {}") and which treats a
	// request with id null as a notification, answering nothing.
	var env struct {
		JSONRPC json.RawMessage `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  json.RawMessage `json:"method"`
	}
	if err := json.Unmarshal(line, &env); err != nil {
		return bad(nil, CodeInvalidRequest, "message must be a JSON-RPC object")
	}
	id, problem := checkID(env.ID)
	if problem != "" {
		return bad(id, CodeInvalidRequest, problem)
	}
	var version string
	if json.Unmarshal(env.JSONRPC, &version) != nil || version != "2.0" {
		return bad(id, CodeInvalidRequest, `not a JSON-RPC 2.0 message: "jsonrpc" must be "2.0"`)
	}
	var method string
	if len(env.Method) > 0 {
		if env.Method[0] != '"' || json.Unmarshal(env.Method, &method) != nil {
			return bad(id, CodeInvalidRequest, "method must be a string")
		}
		// A notification has no id member at all; "id": null on a request
		// would leave the client waiting for an answer it can never match.
		// An MCP notification (notifications/...) sent with id null is
		// still read as the notification it names.
		if string(env.ID) == "null" && !strings.HasPrefix(method, "notifications/") {
			return bad(nil, CodeInvalidRequest, "id is null: a request needs an id that is a string or a number (leave id out only for a notification)")
		}
	} else if len(env.ID) == 0 || string(env.ID) == "null" {
		return bad(nil, CodeInvalidRequest, "not a JSON-RPC 2.0 message: a request needs a method; a response needs the id of a request this server sent")
	}
	if p := outerProblem(line); p != "" {
		return bad(id, CodeInvalidRequest, p)
	}
	return Message{Line: line, ID: id, Method: method}, nil
}

// outerProblem says why line (one JSON-RPC object) is refused for what
// it holds outside a tool call's arguments (MaxOuterNesting,
// MaxOuterBytes), or "". Only a message past either bound as a whole is
// taken apart, so a common one costs one scan of its nesting, and a
// large one none beyond its parts'. Members are told apart by their
// exact names, the method's too, as the SDK's decoder does
// (encoding/json would read "Method" or "Params" as well).
func outerProblem(line []byte) string {
	size := len(line)
	if size <= MaxOuterBytes && Nesting(line) <= MaxOuterNesting {
		return ""
	}
	var env map[string]json.RawMessage
	if json.Unmarshal(line, &env) != nil {
		return "" // CheckLine has refused what is not JSON
	}
	var method string
	_ = json.Unmarshal(env["method"], &method)
	depth := 1
	for k, v := range env {
		var params map[string]json.RawMessage
		if k != "params" || method != "tools/call" || json.Unmarshal(v, &params) != nil {
			depth = max(depth, 1+Nesting(v))
			continue
		}
		depth = max(depth, 2)
		for pk, pv := range params {
			if pk == "arguments" {
				size -= len(pv)
			} else {
				depth = max(depth, 2+Nesting(pv))
			}
		}
	}
	where := "a message"
	if method == "tools/call" {
		where = "a tool call outside its arguments"
	}
	switch {
	case depth > MaxOuterNesting:
		return fmt.Sprintf("%s nests %d levels deep; at most %d are read there (a tool call's arguments may nest up to %d)", where, depth, MaxOuterNesting, MaxNesting)
	case size > MaxOuterBytes:
		return fmt.Sprintf("%s holds %d bytes; at most %d are read there (a tool call's arguments may fill the message)", where, size, MaxOuterBytes)
	}
	return ""
}

// maxExactID is the largest integer a JSON number id keeps exactly through
// the SDK, which reads ids as float64.
const maxExactID = 1<<53 - 1

// checkID reads a message's id member (absent is nil). A number that is
// not a whole number the SDK can hold exactly is refused, as the SDK
// would answer it under another id (1.5 as 1); that refusal still carries
// the id as sent, so the client can match it.
func checkID(raw json.RawMessage) (json.RawMessage, string) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil, "id must be a string or a number"
	}
	switch n := v.(type) {
	case string:
		return raw, ""
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > maxExactID {
			return raw, fmt.Sprintf("id must be a string or a whole number from -%d to %d", int64(maxExactID), int64(maxExactID))
		}
		return raw, ""
	}
	return nil, "id must be a string or a number"
}

// SameID reports whether two ids as sent name the same request: 7 and 7.0
// do, as the SDK reads both as one number.
func SameID(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return x == y
}

// jsonProblem words a decoding error without Go type names.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	return err.Error()
}

// Nesting is the deepest level of objects and arrays, strings skipped.
func Nesting(data []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// idOf returns the message's id if it is one JSON-RPC allows (a string or a
// number), so an error can be addressed to it.
func idOf(line []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	return validID(m.ID)
}

func validID(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return nil
	}
	switch v.(type) {
	case string, float64:
		return id
	}
	return nil
}

// idFromPrefix finds a top-level "id" member in the start of an over-size
// message: clients put id before params, so the error usually reaches the
// request that caused it.
func idFromPrefix(prefix []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if key == "id" {
			return validID(v)
		}
	}
	return nil
}

// ErrorResponse is the JSON-RPC error response line (no newline) for a
// message: id null when id is nil.
func ErrorResponse(id json.RawMessage, code int64, message string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id}
	resp.Error.Code, resp.Error.Message = code, message
	data, err := json.Marshal(resp)
	if err != nil {
		// Only an id that is not JSON could fail, and ids come from Check.
		return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`)
	}
	return data
}
