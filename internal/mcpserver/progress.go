package mcpserver

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/memtrim"
)

// Progress and logging reach the client only through the request being
// served, so each call carries it in its context (AddRaw puts it there).
//
//   - Every call whose client sent a progress token gets a progress
//     notification at least every heartbeat while it runs (elapsed
//     seconds, total unknown), so a client showing progress sees that a
//     long check, import, diagnosis or wait is alive. Once the handler
//     calls Progress the heartbeat stops and the handler's reports are the
//     only ones, each sent, shifted above the heartbeats already sent.
//   - Log sends a notifications/message the client filters by the level
//     it set with logging/setLevel (nothing is sent before it sets one).
//   - Cancellation (notifications/cancelled) cancels the call's context;
//     handlers pass it to every query and wait, so the work stops.

// heartbeat is how often a running call reports that it is alive.
const heartbeat = 2 * time.Second

type callKey struct{}

// call is one running tool call's progress state.
type call struct {
	req   *mcp.CallToolRequest
	tool  string
	start time.Time

	// mu is held while a notification is sent, so the heartbeat and the
	// handler never send out of order: the client sees every value rise.
	mu   sync.Mutex
	last float64 // progress sent so far; every notification increases it
	sent bool    // at least one notification went out
	// offset is added to every handler report. Heartbeats count elapsed
	// seconds, so a handler that starts reporting after a few of them (a
	// backfill planned after a slow first query) would have its early
	// steps fall below the last heartbeat and be dropped; its scale starts
	// above the heartbeats instead, fixed at its first report.
	offset  float64
	handler bool // the handler has reported: no more heartbeats
	closed  bool
}

func (c *call) token() any {
	if c == nil || c.req == nil || c.req.Params == nil || c.req.Session == nil {
		return nil
	}
	return c.req.Params.GetProgressToken()
}

// notify sends one progress notification if progress increased. A
// handler's report is shifted by the call's offset (its total too), so
// each of its rising reports is sent even after heartbeats went out.
func (c *call) notify(ctx context.Context, done, total float64, msg string, fromHandler bool) {
	tok := c.token()
	if tok == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || (!fromHandler && c.handler) {
		return
	}
	if fromHandler {
		if !c.handler && c.sent {
			c.offset = math.Floor(c.last) + 1
		}
		c.handler = true
		done += c.offset
		if total > 0 {
			total += c.offset
		}
	}
	if c.sent && done <= c.last {
		return
	}
	c.last, c.sent = done, true
	_ = c.req.Session.NotifyProgress(context.WithoutCancel(ctx), &mcp.ProgressNotificationParams{
		ProgressToken: tok, Progress: done, Total: total, Message: msg})
}

// quiet trims the agent's memory once no call has run for a while: an
// agent lives for the client's session, mostly waiting (see memtrim).
var quiet = memtrim.New()

// begin starts the heartbeat for a call; the returned func stops it.
func begin(ctx context.Context, tool string, req *mcp.CallToolRequest) (context.Context, func()) {
	quiet.Busy()
	c := &call{req: req, tool: tool, start: time.Now()}
	ctx = context.WithValue(ctx, callKey{}, c)
	if c.token() == nil {
		return ctx, quiet.Quiet
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				el := time.Since(c.start)
				c.notify(ctx, el.Seconds(), 0, fmt.Sprintf("%s: still working (%s)", tool, el.Round(time.Second)), false)
			}
		}
	}()
	return ctx, func() {
		close(stop)
		<-done
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		quiet.Quiet()
	}
}

// Progress reports how far a long call has come (done of total; total 0
// when unknown), when the client asked for progress. Every report that
// rises above the handler's previous one reaches the client, in order; if
// heartbeats went out first, done and total arrive shifted up by the same
// offset (the message says which step it is). Reports that do not
// increase are dropped, as the spec requires progress to increase.
func Progress(ctx context.Context, done, total float64, msg string) {
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		c.notify(ctx, done, total, msg, true)
	}
}

// Log sends a log message to the client at level (debug, info, notice,
// warning, error, …); the client receives it only at or above the level
// it set.
func Log(ctx context.Context, level mcp.LoggingLevel, msg string) {
	c, ok := ctx.Value(callKey{}).(*call)
	if !ok || c.req == nil || c.req.Session == nil {
		return
	}
	_ = c.req.Session.Log(context.WithoutCancel(ctx), &mcp.LoggingMessageParams{Level: level, Logger: c.tool, Data: msg})
}
