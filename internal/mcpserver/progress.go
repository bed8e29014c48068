package mcpserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Progress and logging reach the client only through the request being
// served, so each call carries it in its context (AddRaw puts it there).
//
//   - Every call whose client sent a progress token gets a progress
//     notification at least every heartbeat while it runs (elapsed
//     seconds, total unknown), so a client showing progress sees that a
//     long check, import, diagnosis or wait is alive. A handler that knows
//     how far it is calls Progress with a total; the heartbeat then stops
//     and the handler's reports are the only ones.
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

	mu     sync.Mutex
	last   float64 // progress sent so far; every notification increases it
	ruled  bool    // the handler reports with a total: no heartbeat
	closed bool
}

func (c *call) token() any {
	if c == nil || c.req == nil || c.req.Params == nil || c.req.Session == nil {
		return nil
	}
	return c.req.Params.GetProgressToken()
}

// notify sends one progress notification if progress increased.
func (c *call) notify(ctx context.Context, done, total float64, msg string, fromHandler bool) {
	tok := c.token()
	if tok == nil {
		return
	}
	c.mu.Lock()
	if c.closed || done <= c.last || (!fromHandler && c.ruled) {
		c.mu.Unlock()
		return
	}
	c.last = done
	if fromHandler && total > 0 {
		c.ruled = true
	}
	c.mu.Unlock()
	_ = c.req.Session.NotifyProgress(context.WithoutCancel(ctx), &mcp.ProgressNotificationParams{
		ProgressToken: tok, Progress: done, Total: total, Message: msg})
}

// begin starts the heartbeat for a call; the returned func stops it.
func begin(ctx context.Context, tool string, req *mcp.CallToolRequest) (context.Context, func()) {
	c := &call{req: req, tool: tool, start: time.Now()}
	ctx = context.WithValue(ctx, callKey{}, c)
	if c.token() == nil {
		return ctx, func() {}
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
	}
}

// Progress reports how far a long call has come (done of total; total 0
// when unknown), when the client asked for progress. Reports that do not
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
