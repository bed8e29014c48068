package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

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
			msg, id, code, problem := decodeLine(ev.Data)
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

// decodeLine checks one line by the wire rules and decodes it. A zero
// code with a problem means skip silently (a blank line).
func decodeLine(line []byte) (msg jsonrpc.Message, id json.RawMessage, code int64, problem string) {
	m, p := wire.Check(line)
	if p != nil {
		return nil, p.ID, p.Code, p.Message
	}
	msg, err := jsonrpc.DecodeMessage(m.Line)
	if err != nil {
		// Not reached for what wire.Check lets through; the SDK's words may
		// name Go types, so they go to the log only.
		slog.Debug("jsonrpc decode failed", "err", err)
		return nil, m.ID, jsonrpc.CodeInvalidRequest, "not a valid JSON-RPC 2.0 message"
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
