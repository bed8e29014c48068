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

// JSON-RPC batches (a JSON array of requests and notifications on one
// line) are part of exactly one MCP revision. 2025-03-26 added them to the
// base protocol ("MCP implementations MAY support sending JSON-RPC
// batches, but MUST support receiving JSON-RPC batches"; its stdio
// transport lists a batch among the messages a line may hold), and its
// lifecycle forbids initialize inside one, noting that this "permits
// backwards compatibility with prior protocol versions that do not
// explicitly support JSON-RPC batches": 2024-11-05 names none (its base
// protocol, its stdio transport and its schema define single messages
// only), so a batch is refused there. 2025-06-18 removed them, and later
// revisions have none. So a batch is read only once initialize has
// negotiated batchVersion, and refused otherwise, as before.
const batchVersion = "2025-03-26"

// maxBatch bounds the messages of one batch, so one line cannot start more
// calls (or hold a larger answer) than a client has any use for; the line
// itself is already bounded by MaxMessageBytes and its nesting by
// maxNesting, a batch counted whole.
const maxBatch = 1000

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

	// queue holds the rest of an accepted batch: Read hands the server one
	// message at a time.
	queue []jsonrpc.Message
	// batchOf maps each call of an accepted batch, not yet answered, to
	// its batch, whose answers are written together as one array.
	batchOf map[jsonrpc.ID]*batch
	// dropAnswer are cancelled calls of a batch: the batch's array went
	// out without them, so the server's late answer (the SDK still sends
	// one) is dropped once, as MCP says a cancelled request gets none.
	dropAnswer map[jsonrpc.ID]bool
	// initID is the id of the initialize call (initSeen once one came), so
	// its answer tells the protocol version the session negotiated.
	initID   jsonrpc.ID
	initSeen bool
	version  string

	abort     chan struct{}
	abortOnce sync.Once
	ended     chan struct{}
	endOnce   sync.Once
	closed    chan struct{}
	closeOnce sync.Once
}

func newLineConn(t *StdioTransport) *lineConn {
	c := &lineConn{
		t:          t,
		max:        t.MaxMessageBytes,
		drain:      t.DrainTimeout,
		logger:     t.Logger,
		events:     make(chan lineEvent),
		pending:    map[jsonrpc.ID]bool{},
		batchOf:    map[jsonrpc.ID]*batch{},
		dropAnswer: map[jsonrpc.ID]bool{},
		idle:       make(chan struct{}, 1),
		abort:      make(chan struct{}),
		ended:      make(chan struct{}),
		closed:     make(chan struct{}),
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
		if msg := c.dequeue(); msg != nil {
			return msg, nil
		}
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
			if line := bytes.TrimSpace(ev.line); len(line) > 0 && line[0] == '[' && c.batchesAllowed() {
				if _, _, problem := checkLine(line); problem == "" {
					c.readBatch(line)
					continue
				}
			}
			msg, id, code, problem := decodeLine(ev.line)
			if problem != "" {
				if code != 0 {
					c.reply(id, code, problem)
				}
				continue
			}
			if id, dup, flush := c.track(msg); dup {
				c.reply(idJSON(id), jsonrpc.CodeInvalidRequest, duplicateID(id))
				continue
			} else if flush != nil {
				_ = c.writeLine(flush)
			}
			c.noteInitialize(msg)
			return msg, nil
		}
	}
}

func (c *lineConn) dequeue() jsonrpc.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		return nil
	}
	msg := c.queue[0]
	c.queue = c.queue[1:]
	return msg
}

// batchesAllowed reports whether the session negotiated batchVersion.
func (c *lineConn) batchesAllowed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version == batchVersion
}

// noteInitialize remembers the initialize call, whose answer names the
// negotiated protocol version (noteVersion).
func (c *lineConn) noteInitialize(msg jsonrpc.Message) {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && req.Method == "initialize" {
		c.mu.Lock()
		c.initID, c.initSeen = req.ID, true
		c.mu.Unlock()
	}
}

// noteVersion reads the negotiated protocol version from the answer to
// initialize; mu is held.
func (c *lineConn) noteVersion(resp *jsonrpc.Response) {
	if !c.initSeen || resp.ID != c.initID || resp.Error != nil {
		return
	}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(resp.Result, &r) == nil {
		c.version = r.ProtocolVersion
	}
}

func duplicateID(id jsonrpc.ID) string {
	return fmt.Sprintf("id %s is already in use by a call still running; give each call a new id", idJSON(id))
}

func idJSON(id jsonrpc.ID) json.RawMessage {
	raw, err := json.Marshal(id.Raw())
	if err != nil {
		return nil
	}
	return raw
}

// batch collects the answers to one accepted batch: the JSON-RPC answer
// to a batch is one array of the answers to its calls (and the errors for
// its bad members), written once every call is answered, and nothing at
// all when it held only notifications.
type batch struct {
	waiting map[jsonrpc.ID]bool
	answers []json.RawMessage
}

// add records one answer and returns the array to write when it was the
// last one awaited, else nil.
func (b *batch) add(id jsonrpc.ID, answer []byte) []byte {
	if answer != nil {
		b.answers = append(b.answers, answer)
	}
	delete(b.waiting, id)
	return b.done()
}

func (b *batch) done() []byte {
	if len(b.waiting) > 0 || len(b.answers) == 0 {
		return nil
	}
	data, err := json.Marshal(b.answers)
	if err != nil {
		return nil
	}
	return data
}

// batchMember is one member of a batch: a message for the server, or the
// error it is answered with (problem, code and the member's id).
type batchMember struct {
	msg     jsonrpc.Message
	id      json.RawMessage
	code    int64
	problem string
}

// decodeBatch reads a batch line that checkLine accepted: each member
// checked as a line of its own would be, except that a member that is not
// an object or is initialize (which MCP forbids in a batch) is answered
// with Invalid Request. problem is set when the batch as a whole is not
// one (empty or too large): it is then answered with one error, as
// JSON-RPC says.
func decodeBatch(line []byte) (members []batchMember, problem string) {
	var raws []json.RawMessage
	if err := json.Unmarshal(line, &raws); err != nil {
		return nil, "a batch must be a JSON array of JSON-RPC messages"
	}
	switch {
	case len(raws) == 0:
		return nil, "empty batch: a batch holds at least one request or notification"
	case len(raws) > maxBatch:
		return nil, fmt.Sprintf("batch of %d messages is over the limit of %d; send the rest in another batch or one per line", len(raws), maxBatch)
	}
	members = make([]batchMember, len(raws))
	for i, raw := range raws {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || raw[0] != '{' {
			members[i] = batchMember{code: jsonrpc.CodeInvalidRequest, problem: "a batch member must be a JSON-RPC object"}
			continue
		}
		msg, id, code, problem := decodeObject(raw)
		if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" {
			msg, id, code, problem = nil, idJSON(req.ID), jsonrpc.CodeInvalidRequest,
				"initialize must be sent on its own line, not in a batch"
		}
		members[i] = batchMember{msg: msg, id: id, code: code, problem: problem}
	}
	return members, ""
}

// readBatch takes an accepted batch apart: bad members and duplicate ids
// are answered in the batch's array, the rest queued for the server.
func (c *lineConn) readBatch(line []byte) {
	members, problem := decodeBatch(line)
	if problem != "" {
		c.reply(nil, jsonrpc.CodeInvalidRequest, problem)
		return
	}
	b := &batch{waiting: map[jsonrpc.ID]bool{}}
	var msgs []jsonrpc.Message
	for _, m := range members {
		if m.problem != "" {
			c.logger.Warn("bad message in a batch from client", "code", m.code, "problem", m.problem)
			b.answers = append(b.answers, errorResponse(m.id, m.code, m.problem))
			continue
		}
		id, dup, flush := c.track(m.msg)
		if dup {
			b.answers = append(b.answers, errorResponse(idJSON(id), jsonrpc.CodeInvalidRequest, duplicateID(id)))
			continue
		}
		if flush != nil {
			_ = c.writeLine(flush)
		}
		if req, ok := m.msg.(*jsonrpc.Request); ok && req.IsCall() {
			b.waiting[req.ID] = true
		}
		msgs = append(msgs, m.msg)
	}
	c.mu.Lock()
	for id := range b.waiting {
		c.batchOf[id] = b
	}
	c.queue = append(c.queue, msgs...)
	out := b.done()
	c.mu.Unlock()
	if out != nil {
		_ = c.writeLine(out)
	}
}

// decodeLine checks one line that is not an accepted batch. A zero code
// with a problem means skip silently (a blank line).
func decodeLine(line []byte) (msg jsonrpc.Message, id json.RawMessage, code int64, problem string) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil, 0, "blank"
	}
	if id, code, problem := checkLine(line); problem != "" {
		return nil, id, code, problem
	}
	switch line[0] {
	case '[':
		return nil, nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf(
			"JSON-RPC batches are read only when the session negotiated protocol version %s (MCP has no batches before or after it); send one message per line", batchVersion)
	case '{':
	default:
		return nil, nil, jsonrpc.CodeInvalidRequest, "message must be a JSON-RPC object"
	}
	return decodeObject(line)
}

// checkLine checks what every non-blank line must be, a batch whole: valid
// UTF-8, nested at most maxNesting deep, one JSON value.
func checkLine(line []byte) (id json.RawMessage, code int64, problem string) {
	// For these two the id can often still be read, and answering it
	// spares the client waiting for an answer that never comes.
	if !utf8.Valid(line) {
		return idOf(line), jsonrpc.CodeParseError, "message is not valid UTF-8"
	}
	if d := nesting(line); d > maxNesting {
		return idOf(line), jsonrpc.CodeParseError, fmt.Sprintf("message nests more than %d levels deep", maxNesting)
	}
	var raw json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return nil, jsonrpc.CodeParseError, "message is not valid JSON: " + jsonProblem(err)
	}
	return nil, 0, ""
}

// decodeObject checks a JSON object as one JSON-RPC message: a line, or a
// member of a batch.
func decodeObject(line []byte) (msg jsonrpc.Message, id json.RawMessage, code int64, problem string) {
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
	c.logger.Warn("bad message from client", "code", code, "problem", message)
	if data := errorResponse(id, code, message); data != nil {
		_ = c.writeLine(data)
	}
}

// errorResponse is a JSON-RPC error response; a nil id is null.
func errorResponse(id json.RawMessage, code int64, message string) []byte {
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
		return nil
	}
	return data
}

// track records a call the server must answer, and forgets one the client
// cancelled (the server does not answer those). A call whose id is already
// pending is not recorded and is reported (dup): the SDK would drop it
// unanswered, so the transport answers it and keeps it from the server,
// leaving the running call with that id undisturbed.
//
// A cancelled call of a batch is no longer awaited there: flush is then the
// batch's array when that call was the last it waited for.
func (c *lineConn) track(msg jsonrpc.Message) (id jsonrpc.ID, dup bool, flush []byte) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return id, false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.IsCall() {
		if c.pending[req.ID] {
			return req.ID, true, nil
		}
		c.pending[req.ID] = true
		delete(c.dropAnswer, req.ID) // a new call's answer is its own
		return req.ID, false, nil
	}
	if req.Method == "notifications/cancelled" {
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil && c.pending[id] {
				c.settle(id)
				if c.batchOf[id] != nil {
					c.dropAnswer[id] = true
					flush = c.answerLocked(id, nil)
				}
			}
		}
	}
	return id, false, flush
}

// answerLocked routes an answer (nil: the call ended unanswered) to what
// writes it: itself for a call of its own line, its batch's array once
// the batch's last call is answered, nothing while the batch still
// waits. mu is held.
func (c *lineConn) answerLocked(id jsonrpc.ID, answer []byte) []byte {
	b := c.batchOf[id]
	if b == nil {
		return answer
	}
	delete(c.batchOf, id)
	return b.add(id, answer)
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
	var out [][]byte
	for _, id := range ids {
		c.abandoned[id] = true
		c.settle(id)
		answer := errorResponse(idJSON(id), jsonrpc.CodeInternalError, fmt.Sprintf(
			"the client closed its input and this call was still running %s later; it was cancelled, so check what it changed before calling it again", c.drain))
		if data := c.answerLocked(id, answer); data != nil {
			out = append(out, data)
		}
	}
	c.mu.Unlock()
	if len(ids) > 0 {
		c.logger.Warn("answered calls cancelled at the drain timeout", "calls", len(ids))
	}
	for _, data := range out {
		_ = c.writeLine(data)
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
	if c.dropAnswer[resp.ID] {
		delete(c.dropAnswer, resp.ID)
		c.mu.Unlock()
		return nil // cancelled in a batch whose array is out
	}
	// The id leaves pending before the answer is written, as the SDK
	// frees it before writing: a client may reuse an id the moment it
	// reads the answer, and that call is not a duplicate.
	delete(c.pending, resp.ID)
	c.noteVersion(resp)
	if data = c.answerLocked(resp.ID, data); data == nil {
		c.signalIfIdle() // kept for its batch's array
		c.mu.Unlock()
		return nil
	}
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
