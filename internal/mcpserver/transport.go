package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxMessageBytes bounds one inbound line (one JSON-RPC message).
// A real dbt manifest passed inline runs to tens of MiB, so the default is
// above the SDK's 16 MiB; DW_MAX_MESSAGE_BYTES changes it.
const DefaultMaxMessageBytes = 32 << 20

// DefaultDrainTimeout bounds how long calls still running when stdin closes
// may take to finish and have their answers written before the agent exits.
const DefaultDrainTimeout = 10 * time.Second

// maxNesting matches the SDK's own decoder limit, so a message this reader
// lets through never fails to decode further in.
const maxNesting = 1000

// idPrefixBytes is how much of an over-size line is kept to find its id in,
// so the error can be addressed to the request that was too big.
const idPrefixBytes = 64 << 10

// StdioTransport is the agents' stdio transport. It replaces the SDK's,
// which ends the session (and so the process) on the first line it cannot
// decode: here a bad line is answered with a JSON-RPC error and the next
// line is read as usual. It also owns shutdown: when its input ends it
// waits (up to DrainTimeout) for the calls it has handed to the server to be
// answered before reporting end of input, so `printf … | agent` gets every
// answer.
type StdioTransport struct {
	In  io.Reader
	Out io.Writer
	// MaxMessageBytes bounds one line; 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// DrainTimeout bounds the wait for running calls at end of input; 0
	// means DefaultDrainTimeout.
	DrainTimeout time.Duration
	Logger       *slog.Logger

	once sync.Once
	conn *lineConn
}

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

// Connect implements mcp.Transport. It is called once.
func (t *StdioTransport) Connect(context.Context) (mcp.Connection, error) {
	t.once.Do(func() { t.conn = newLineConn(t) })
	return t.conn, nil
}

// InputEnded is closed once the transport has told the server its input is
// over (after draining, or at once after Abort).
func (t *StdioTransport) InputEnded() <-chan struct{} {
	t.once.Do(func() { t.conn = newLineConn(t) })
	return t.conn.ended
}

// Abort ends the input now without waiting for running calls: the server
// then cancels them. Used on SIGTERM.
func (t *StdioTransport) Abort() {
	t.once.Do(func() { t.conn = newLineConn(t) })
	t.conn.abortOnce.Do(func() { close(t.conn.abort) })
}

// lineEvent is one thing the reader goroutine found: a line, an over-size
// line (prefix and size), or the end of input.
type lineEvent struct {
	line    []byte
	tooBig  int
	prefix  []byte
	readErr error
}

type lineConn struct {
	t      *StdioTransport
	max    int
	drain  time.Duration
	logger *slog.Logger

	events chan lineEvent

	writeMu sync.Mutex

	mu      sync.Mutex
	pending map[jsonrpc.ID]bool // calls handed to the server, not yet answered
	// abandoned are calls the transport answered itself when input ended
	// and the drain timeout passed; the server's late answers are dropped.
	abandoned map[jsonrpc.ID]bool
	// writing counts answers taken out of pending and being written: the
	// id is free for the client to reuse as soon as the answer can reach
	// it, but input may not be reported ended until the answer is out.
	writing int
	idle    chan struct{} // signalled when pending becomes empty and nothing is being written

	abort     chan struct{}
	abortOnce sync.Once
	ended     chan struct{}
	endOnce   sync.Once
	closed    chan struct{}
	closeOnce sync.Once
}

func newLineConn(t *StdioTransport) *lineConn {
	c := &lineConn{
		t:       t,
		max:     t.MaxMessageBytes,
		drain:   t.DrainTimeout,
		logger:  t.Logger,
		events:  make(chan lineEvent),
		pending: map[jsonrpc.ID]bool{},
		idle:    make(chan struct{}, 1),
		abort:   make(chan struct{}),
		ended:   make(chan struct{}),
		closed:  make(chan struct{}),
	}
	if c.max <= 0 {
		c.max = DefaultMaxMessageBytes
	}
	if c.drain <= 0 {
		c.drain = DefaultDrainTimeout
	}
	if c.logger == nil {
		c.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// Reading stdin cannot be interrupted, so it runs on its own goroutine
	// and Read selects on its output, on Close and on Abort.
	go c.readLoop()
	return c
}

// readLoop splits the input at newlines, never holding more than max bytes
// of one line: the rest of an over-size line is skipped up to its newline.
func (c *lineConn) readLoop() {
	r := bufio.NewReaderSize(c.t.In, 64<<10)
	for {
		var (
			buf    []byte
			size   int
			tooBig bool
			err    error
		)
		for {
			var chunk []byte
			chunk, err = r.ReadSlice('\n')
			size += len(chunk)
			if !tooBig {
				payload := size
				if err == nil {
					payload-- // the newline ending the line is not part of it
				}
				if payload > c.max {
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
		var ev lineEvent
		switch {
		case tooBig:
			ev = lineEvent{tooBig: size, prefix: buf}
		case len(buf) > 0:
			ev = lineEvent{line: buf}
		}
		if ev.line != nil || ev.tooBig > 0 {
			select {
			case c.events <- ev:
			case <-c.closed:
				return
			}
		}
		if err != nil {
			select {
			case c.events <- lineEvent{readErr: err}:
			case <-c.closed:
			}
			return
		}
	}
}

func (c *lineConn) SessionID() string { return "" }

// Read returns the next valid message. Bad lines are answered here and
// skipped, so the server never sees a read error until input really ends.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case <-c.abort:
			c.end()
			return nil, io.EOF
		case ev := <-c.events:
			if ev.readErr != nil {
				if !errors.Is(ev.readErr, io.EOF) {
					c.logger.Warn("reading stdin failed; finishing running calls", "err", ev.readErr)
				}
				c.waitForPending()
				c.end()
				return nil, io.EOF
			}
			if ev.tooBig > 0 {
				c.reply(idFromPrefix(ev.prefix), jsonrpc.CodeInvalidRequest, fmt.Sprintf(
					"message of more than %d bytes is over the limit of %d bytes (DW_MAX_MESSAGE_BYTES); pass large documents by file path instead", c.max, c.max))
				continue
			}
			msg, id, code, problem := decodeLine(ev.line)
			if problem != "" {
				if code != 0 {
					c.reply(id, code, problem)
				}
				continue
			}
			if id, dup := c.track(msg); dup {
				raw, _ := json.Marshal(id.Raw())
				c.reply(raw, jsonrpc.CodeInvalidRequest, fmt.Sprintf(
					"id %s is already in use by a call still running; give each call a new id", raw))
				continue
			}
			return msg, nil
		}
	}
}

// decodeLine checks one line. A zero code with a problem means skip
// silently (a blank line).
func decodeLine(line []byte) (msg jsonrpc.Message, id json.RawMessage, code int64, problem string) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil, 0, "blank"
	}
	// For these two the id can often still be read, and answering it
	// spares the client waiting for an answer that never comes.
	if !utf8.Valid(line) {
		return nil, idOf(line), jsonrpc.CodeParseError, "message is not valid UTF-8"
	}
	if d := nesting(line); d > maxNesting {
		return nil, idOf(line), jsonrpc.CodeParseError, fmt.Sprintf("message nests more than %d levels deep", maxNesting)
	}
	var raw json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return nil, nil, jsonrpc.CodeParseError, "message is not valid JSON: " + jsonProblem(err)
	}
	switch line[0] {
	case '[':
		return nil, nil, jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not supported; send one message per line"
	case '{':
	default:
		return nil, nil, jsonrpc.CodeInvalidRequest, "message must be a JSON-RPC object"
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
		return nil, nil, jsonrpc.CodeInvalidRequest, "message must be a JSON-RPC object"
	}
	id, problem = checkID(env.ID)
	if problem != "" {
		return nil, id, jsonrpc.CodeInvalidRequest, problem
	}
	var version string
	if json.Unmarshal(env.JSONRPC, &version) != nil || version != "2.0" {
		return nil, id, jsonrpc.CodeInvalidRequest, `not a JSON-RPC 2.0 message: "jsonrpc" must be "2.0"`
	}
	var method string
	if len(env.Method) > 0 {
		if env.Method[0] != '"' || json.Unmarshal(env.Method, &method) != nil {
			return nil, id, jsonrpc.CodeInvalidRequest, "method must be a string"
		}
		// A notification has no id member at all; "id": null on a request
		// would leave the client waiting for an answer it can never match.
		// An MCP notification (notifications/...) sent with id null is
		// still read as the notification it names.
		if string(env.ID) == "null" && !strings.HasPrefix(method, "notifications/") {
			return nil, nil, jsonrpc.CodeInvalidRequest, "id is null: a request needs an id that is a string or a number (leave id out only for a notification)"
		}
	} else if len(env.ID) == 0 || string(env.ID) == "null" {
		return nil, nil, jsonrpc.CodeInvalidRequest, "not a JSON-RPC 2.0 message: a request needs a method; a response needs the id of a request this server sent"
	}
	m, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		// Not reached for what is checked above; the SDK's words may name
		// Go types, so they go to the log only.
		slog.Debug("jsonrpc decode failed", "err", err)
		return nil, id, jsonrpc.CodeInvalidRequest, "not a valid JSON-RPC 2.0 message"
	}
	return m, nil, 0, ""
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

// jsonProblem words a decoding error without Go type names.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	return err.Error()
}

// nesting is the deepest level of objects and arrays, strings skipped.
func nesting(data []byte) int {
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

// reply writes an error response for a line the server never saw.
func (c *lineConn) reply(id json.RawMessage, code int64, message string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	c.logger.Warn("bad message from client", "code", code, "problem", message)
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
		return
	}
	_ = c.writeLine(data)
}

// track records a call the server must answer, and forgets one the client
// cancelled (the server does not answer those). A call whose id is already
// pending is not recorded and is reported (dup): the SDK would drop it
// unanswered, so the transport answers it and keeps it from the server,
// leaving the running call with that id undisturbed.
func (c *lineConn) track(msg jsonrpc.Message) (id jsonrpc.ID, dup bool) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return id, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.IsCall() {
		if c.pending[req.ID] {
			return req.ID, true
		}
		c.pending[req.ID] = true
		return req.ID, false
	}
	if req.Method == "notifications/cancelled" {
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
				c.settle(id)
			}
		}
	}
	return id, false
}

// settle forgets an answered call; mu is held.
func (c *lineConn) settle(id jsonrpc.ID) {
	delete(c.pending, id)
	c.signalIfIdle()
}

// signalIfIdle wakes waitForPending when no call is left; mu is held.
func (c *lineConn) signalIfIdle() {
	if len(c.pending) == 0 && c.writing == 0 {
		select {
		case c.idle <- struct{}{}:
		default:
		}
	}
}

// waitForPending blocks until every call read so far is answered, the
// drain timeout passes, or the transport is aborted or closed.
func (c *lineConn) waitForPending() {
	deadline := time.NewTimer(c.drain)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		n := len(c.pending) + c.writing
		c.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-c.idle:
		case <-deadline.C:
			c.logger.Warn("input ended; calls still running after the drain timeout are cancelled", "calls", n, "timeout", c.drain)
			c.answerAbandoned()
			return
		case <-c.abort:
			return
		case <-c.closed:
			return
		}
	}
}

// answerAbandoned answers every call still running when the drain
// timeout passed, so a client that reads what is left of stdout sees each
// of its calls end rather than wait for answers that never come. The
// server's own late answer for such a call is dropped (Write), so no call
// is answered twice.
func (c *lineConn) answerAbandoned() {
	c.mu.Lock()
	ids := make([]jsonrpc.ID, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	if c.abandoned == nil {
		c.abandoned = map[jsonrpc.ID]bool{}
	}
	for _, id := range ids {
		c.abandoned[id] = true
		c.settle(id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		raw, err := json.Marshal(id.Raw())
		if err != nil {
			continue
		}
		c.reply(raw, jsonrpc.CodeInternalError, fmt.Sprintf(
			"the client closed its input and this call was still running %s later; it was cancelled, so check what it changed before calling it again", c.drain))
	}
}

func (c *lineConn) end() { c.endOnce.Do(func() { close(c.ended) }) }

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encoding message: %w", err)
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return c.writeLine(data)
	}
	c.mu.Lock()
	if c.abandoned[resp.ID] {
		c.mu.Unlock()
		return nil // already answered by answerAbandoned
	}
	// The id leaves pending before the answer is written, as the SDK
	// frees it before writing: a client may reuse an id the moment it
	// reads the answer, and that call is not a duplicate.
	delete(c.pending, resp.ID)
	c.writing++
	c.mu.Unlock()
	err = c.writeLine(data)
	c.mu.Lock()
	c.writing--
	c.signalIfIdle()
	c.mu.Unlock()
	return err
}

func (c *lineConn) writeLine(data []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	select {
	case <-c.closed:
		return mcp.ErrConnectionClosed
	default:
	}
	_, err := c.t.Out.Write(append(data, '\n'))
	return err
}

func (c *lineConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}
