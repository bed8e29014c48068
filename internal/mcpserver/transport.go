package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/mcpserver/wire"
)

// DefaultMaxMessageBytes bounds one inbound line (one JSON-RPC message);
// DW_MAX_MESSAGE_BYTES changes it (wire.MaxMessageBytesFromEnv).
const DefaultMaxMessageBytes = wire.DefaultMaxMessageBytes

// DefaultDrainTimeout bounds how long calls still running when stdin closes
// may take to finish and have their answers written before the agent exits.
const DefaultDrainTimeout = 10 * time.Second

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
// negotiated wire.BatchVersion, and refused otherwise, as before.

// maxBatch bounds the messages of one batch, so one line cannot start more
// calls (or hold a larger answer) than a client has any use for; the line
// itself is already bounded by MaxMessageBytes and its nesting by
// wire.MaxNesting, a batch counted whole.
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
func MaxMessageBytesFromEnv() (int, error) { return wire.MaxMessageBytesFromEnv() }

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

// lineEvent is one thing the reader goroutine found: a line (or an
// over-size line's size and start), or the end of input.
type lineEvent struct {
	wire.Line
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
	// cancelled are calls the client cancelled whose handler has not
	// ended yet. MCP says a cancelled request gets no answer, but the SDK
	// still sends one when the handler returns, so that answer is dropped
	// here (a batch's array has already gone out without it). Until it
	// comes the SDK still holds the id and drops unanswered a new call
	// reusing it, so such a call is refused here as a duplicate: without
	// this the client waited forever for the new call and got the
	// cancelled one's "context canceled" as its answer. A cancelled call
	// is not in pending: end of input does not wait for it.
	cancelled map[jsonrpc.ID]bool
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
		t:         t,
		max:       t.MaxMessageBytes,
		drain:     t.DrainTimeout,
		logger:    t.Logger,
		events:    make(chan lineEvent),
		pending:   map[jsonrpc.ID]bool{},
		batchOf:   map[jsonrpc.ID]*batch{},
		cancelled: map[jsonrpc.ID]bool{},
		idle:      make(chan struct{}, 1),
		abort:     make(chan struct{}),
		ended:     make(chan struct{}),
		closed:    make(chan struct{}),
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

// readLoop hands the input's lines, bounded by wire.Reader, to Read.
func (c *lineConn) readLoop() {
	r := wire.NewReader(c.t.In, c.max)
	for {
		l, err := r.Next()
		if err != nil {
			select {
			case c.events <- lineEvent{readErr: err}:
			case <-c.closed:
			}
			return
		}
		select {
		case c.events <- lineEvent{Line: l}:
		case <-c.closed:
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
			if ev.TooBig > 0 {
				p := wire.TooBig(ev.Line, c.max)
				c.reply(p.ID, p.Code, p.Message)
				continue
			}
			if line := bytes.TrimSpace(ev.Data); len(line) > 0 && line[0] == '[' && c.batchesAllowed() {
				if wire.CheckLine(line) == nil {
					c.readBatch(line)
					continue
				}
			}
			msg, id, code, problem := decodeLine(ev.Data)
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

// batchesAllowed reports whether the session negotiated wire.BatchVersion.
func (c *lineConn) batchesAllowed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version == wire.BatchVersion
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

// decodeBatch reads a batch line that wire.CheckLine accepted: each member
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
			b.answers = append(b.answers, wire.ErrorResponse(m.id, m.code, m.problem))
			continue
		}
		id, dup, flush := c.track(m.msg)
		if dup {
			b.answers = append(b.answers, wire.ErrorResponse(idJSON(id), jsonrpc.CodeInvalidRequest, duplicateID(id)))
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

// decodeLine checks one line that is not an accepted batch by the wire
// rules and decodes it. A zero code with a problem means skip silently (a
// blank line).
func decodeLine(line []byte) (msg jsonrpc.Message, id json.RawMessage, code int64, problem string) {
	m, p := wire.Check(line)
	if p != nil {
		return nil, p.ID, p.Code, p.Message
	}
	return decodeChecked(m)
}

// decodeObject checks a JSON object as one JSON-RPC message (a member of
// a batch) and decodes it.
func decodeObject(obj []byte) (msg jsonrpc.Message, id json.RawMessage, code int64, problem string) {
	m, p := wire.CheckObject(obj)
	if p != nil {
		return nil, p.ID, p.Code, p.Message
	}
	return decodeChecked(m)
}

func decodeChecked(m wire.Message) (jsonrpc.Message, json.RawMessage, int64, string) {
	msg, err := jsonrpc.DecodeMessage(m.Line)
	if err != nil {
		// Not reached for what wire lets through; the SDK's words may name
		// Go types, so they go to the log only.
		slog.Debug("jsonrpc decode failed", "err", err)
		return nil, m.ID, jsonrpc.CodeInvalidRequest, "not a valid JSON-RPC 2.0 message"
	}
	if req, ok := msg.(*jsonrpc.Request); ok {
		if problem := paramsProblem(req); problem != "" {
			return nil, m.ID, jsonrpc.CodeInvalidParams, problem
		}
	}
	return msg, nil, 0, ""
}

// reply writes an error response for a line the server never saw.
func (c *lineConn) reply(id json.RawMessage, code int64, message string) {
	c.logger.Warn("bad message from client", "code", code, "problem", message)
	_ = c.writeLine(wire.ErrorResponse(id, code, message))
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
		if c.pending[req.ID] || c.cancelled[req.ID] {
			return req.ID, true, nil
		}
		c.pending[req.ID] = true
		return req.ID, false, nil
	}
	if req.Method == "notifications/cancelled" {
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil && c.pending[id] {
				c.settle(id)
				c.cancelled[id] = true
				if c.batchOf[id] != nil {
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
		answer := wire.ErrorResponse(idJSON(id), jsonrpc.CodeInternalError, fmt.Sprintf(
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
	data, err := encodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encoding message: %w", err)
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return c.writeLine(data)
	}
	if resp.Error != nil && len(data) > maxErrorAnswer {
		data = clipErrorAnswer(data)
	}
	c.mu.Lock()
	if c.abandoned[resp.ID] {
		c.mu.Unlock()
		return nil // already answered by answerAbandoned
	}
	if c.cancelled[resp.ID] {
		delete(c.cancelled, resp.ID) // the id is free for a new call now
		c.mu.Unlock()
		return nil // cancelled: MCP sends no answer
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

// encodeMessage is jsonrpc.EncodeMessage with a result written around as
// it is: the SDK marshalled it compact a moment before, and EncodeMessage
// compacted it again whole (for a 20 KB answer, about 2% of the agent's
// CPU on a warm blast radius). For such a result, compact valid JSON as
// every response's is (jsonrpc2.NewResponse marshals it; nothing here
// builds a response with a result), the bytes are EncodeMessage's; a
// result holding a line break, which would break the line, goes through
// EncodeMessage.
func encodeMessage(msg jsonrpc.Message) ([]byte, error) {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || resp.Error != nil || len(resp.Result) == 0 || bytes.IndexByte(resp.Result, '\n') >= 0 {
		return jsonrpc.EncodeMessage(msg)
	}
	var id []byte
	switch v := resp.ID.Raw().(type) {
	case int64:
		id = strconv.AppendInt(nil, v, 10)
	case string:
		// As EncodeMessage writes it: HTML characters left as they are.
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
		id = bytes.TrimRight(b.Bytes(), "\n")
	default:
		return jsonrpc.EncodeMessage(msg)
	}
	const head, mid = `{"jsonrpc":"2.0","id":`, `,"result":`
	out := make([]byte, 0, len(head)+len(id)+len(mid)+len(resp.Result)+2) // and the line's newline
	out = append(append(append(append(out, head...), id...), mid...), resp.Result...)
	return append(out, '}'), nil
}

// maxErrorAnswer bounds a JSON-RPC error answer. The transport words the
// errors it can foresee (params.go), but an error from deeper in the SDK
// may quote the request, which can be up to MaxMessageBytes; an error
// never needs more than a few lines to say what was wrong.
const maxErrorAnswer = 4096

// maxErrorMessage is where clipErrorAnswer cuts an error's message.
const maxErrorMessage = 1000

// clipErrorAnswer cuts an error answer's message to maxErrorMessage
// characters and drops its data, keeping its id and code.
func clipErrorAnswer(data []byte) []byte {
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return data
	}
	if utf8.RuneCountInString(r.Error.Message) > maxErrorMessage {
		r.Error.Message = clip(r.Error.Message, maxErrorMessage) + " (cut: the whole message was longer)"
	}
	out, err := json.Marshal(r)
	if err != nil {
		return data
	}
	return out
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
