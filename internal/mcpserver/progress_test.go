package mcpserver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type waitIn struct {
	Millis  int  `json:"millis" jsonschema:"how long to work"`
	Reports bool `json:"reports,omitempty" jsonschema:"report progress with a total"`
}

type waitOut struct {
	Stopped bool `json:"stopped" jsonschema:"the call was cancelled"`
}

// progressServer serves one tool that works for a while, optionally
// reporting its own progress, and tells the test when it saw a cancel.
func progressServer(t *testing.T, cancelled chan<- time.Time) *Server {
	t.Helper()
	s, err := New(Agent{Name: "dw-test", Instructions: "test", Register: func(s *Server) error {
		Add(s, Tool{Name: "work", Description: "works", ReadOnly: true, Idempotent: true},
			func(ctx context.Context, in waitIn) (*waitOut, string, error) {
				if in.Reports {
					Progress(ctx, 1, 3, "one")
					Progress(ctx, 1, 3, "one again") // not an increase: dropped
					Progress(ctx, 2, 3, "two")
				}
				select {
				case <-ctx.Done():
					cancelled <- time.Now()
					return &waitOut{Stopped: true}, "stopped", nil
				case <-time.After(time.Duration(in.Millis) * time.Millisecond):
				}
				return &waitOut{}, "done", nil
			})
		return nil
	}}, "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type recorder struct {
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	logs     []*mcp.LoggingMessageParams
}

func connectRecording(t *testing.T, s *Server, r *recorder) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.MCP.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			r.mu.Lock()
			r.progress = append(r.progress, req.Params)
			r.mu.Unlock()
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			r.mu.Lock()
			r.logs = append(r.logs, req.Params)
			r.mu.Unlock()
		},
	}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestProgressHeartbeatAndLogs: a long call with a progress token gets
// rising heartbeats; the logging capability is advertised and log messages
// arrive only at or above the level the client set.
func TestProgressHeartbeatAndLogs(t *testing.T) {
	s := progressServer(t, make(chan time.Time, 1))
	r := &recorder{}
	cs := connectRecording(t, s, r)
	ctx := context.Background()
	if cs.InitializeResult().Capabilities.Logging == nil {
		t.Fatal("the logging capability is not advertised")
	}
	// Before the client sets a level nothing is logged.
	params := &mcp.CallToolParams{Name: "work", Arguments: map[string]any{"millis": 10}}
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	// The level travels with each request (protocol 2026-07-28) or is the
	// session's (logging/setLevel, earlier versions); the SDK applies both.
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
		t.Fatal(err)
	}
	params = &mcp.CallToolParams{Name: "work", Arguments: map[string]any{"millis": 4500}, Meta: mcp.Meta{mcp.MetaKeyLogLevel: "warning"}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "work", Arguments: map[string]any{"millis": 10}, Meta: mcp.Meta{mcp.MetaKeyLogLevel: "info"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // notifications are asynchronous
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.progress) < 2 {
		t.Fatalf("%d progress notifications for a 4.5 s call, want at least 2", len(r.progress))
	}
	for i, p := range r.progress {
		if p.ProgressToken != "tok-1" {
			t.Errorf("progress token %v", p.ProgressToken)
		}
		if i > 0 && p.Progress <= r.progress[i-1].Progress {
			t.Errorf("progress did not increase: %v then %v", r.progress[i-1].Progress, p.Progress)
		}
		if !strings.Contains(p.Message, "work: still working") {
			t.Errorf("message %q", p.Message)
		}
	}
	if len(r.logs) != 1 || r.logs[0].Level != "info" || !strings.Contains(r.logs[0].Data.(string), "work answered") {
		t.Errorf("logs %+v, want one info message from the call made at level info", r.logs)
	}
}

// TestHandlerProgressReplacesHeartbeat: a handler's own reports, with a
// total, are sent as given (a repeat that does not increase is dropped).
func TestHandlerProgressReplacesHeartbeat(t *testing.T) {
	s := progressServer(t, make(chan time.Time, 1))
	r := &recorder{}
	cs := connectRecording(t, s, r)
	params := &mcp.CallToolParams{Name: "work", Arguments: map[string]any{"millis": 2500, "reports": true}}
	params.SetProgressToken(7)
	if _, err := cs.CallTool(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	r.mu.Lock()
	defer r.mu.Unlock()
	var got []float64
	for _, p := range r.progress {
		got = append(got, p.Progress)
		if p.Total != 3 {
			t.Errorf("total %v, want 3 (no heartbeat once the handler reports)", p.Total)
		}
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("progress %v, want [1 2]", got)
	}
}

// TestCancelStopsTheWork: a client's cancel reaches the handler's context.
func TestCancelStopsTheWork(t *testing.T) {
	cancelled := make(chan time.Time, 1)
	s := progressServer(t, cancelled)
	cs := connectRecording(t, s, &recorder{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(200 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "work", Arguments: map[string]any{"millis": 30000}})
	select {
	case at := <-cancelled:
		if d := at.Sub(start); d > 3*time.Second {
			t.Errorf("the handler saw the cancel after %s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler never saw the cancel: the work kept running")
	}
}

type chunksIn struct {
	AfterMillis int `json:"after_millis" jsonschema:"how long before the first chunk"`
	Chunks      int `json:"chunks" jsonschema:"chunks to report"`
}

// TestLateHandlerProgressKeepsEveryChunk: a handler that starts reporting
// after heartbeats went out (a backfill planned after a slow first query)
// still gets every chunk to the client, in order, each above the last
// heartbeat and the one before it, with the handler's total shifted by the
// same amount.
func TestLateHandlerProgressKeepsEveryChunk(t *testing.T) {
	s, err := New(Agent{Name: "dw-test", Instructions: "test", Register: func(s *Server) error {
		Add(s, Tool{Name: "backfill", Description: "backfills", ReadOnly: true, Idempotent: true},
			func(ctx context.Context, in chunksIn) (*waitOut, string, error) {
				time.Sleep(time.Duration(in.AfterMillis) * time.Millisecond)
				for i := 1; i <= in.Chunks; i++ {
					Progress(ctx, float64(i), float64(in.Chunks), fmt.Sprintf("chunk %d of %d", i, in.Chunks))
				}
				return &waitOut{}, "done", nil
			})
		return nil
	}}, "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	cs := connectRecording(t, s, r)
	const chunks = 5
	params := &mcp.CallToolParams{Name: "backfill", Arguments: map[string]any{"after_millis": 4300, "chunks": chunks}}
	params.SetProgressToken("bf")
	if res, err := cs.CallTool(context.Background(), params); err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	time.Sleep(100 * time.Millisecond)
	r.mu.Lock()
	defer r.mu.Unlock()
	var beats int
	var chunkMsgs []string
	for i, p := range r.progress {
		if p.ProgressToken != "bf" {
			t.Errorf("progress token %v", p.ProgressToken)
		}
		if i > 0 && p.Progress <= r.progress[i-1].Progress {
			t.Errorf("progress did not increase: %v then %v", r.progress[i-1].Progress, p.Progress)
		}
		if strings.HasPrefix(p.Message, "backfill: still working") {
			if len(chunkMsgs) > 0 {
				t.Errorf("heartbeat %q after the handler reported", p.Message)
			}
			beats++
			continue
		}
		chunkMsgs = append(chunkMsgs, p.Message)
		// done and total move together: the remaining share is the
		// handler's own.
		if left := p.Total - p.Progress; left != float64(chunks-len(chunkMsgs)) {
			t.Errorf("%q: %v of %v, want %d left", p.Message, p.Progress, p.Total, chunks-len(chunkMsgs))
		}
	}
	if beats < 2 {
		t.Errorf("%d heartbeats before the first chunk at 4.3 s, want at least 2", beats)
	}
	var want []string
	for i := 1; i <= chunks; i++ {
		want = append(want, fmt.Sprintf("chunk %d of %d", i, chunks))
	}
	if !slices.Equal(chunkMsgs, want) {
		t.Errorf("chunk reports %q, want %q", chunkMsgs, want)
	}
}
