// Package mcpserver is the bootstrap every Data Workers agent shares: the
// server identity, stderr logging, stdio serving with a clean exit, and
// tool registration that enforces the conventions every tool follows.
//
// Serving (transport.go): a line that is not a valid JSON-RPC message is
// answered with a JSON-RPC error and the server keeps serving; one message
// may be up to DW_MAX_MESSAGE_BYTES (default 32 MiB). When stdin closes,
// calls still running are finished (up to 10 s) and answered before the
// process exits; SIGTERM or SIGINT cancels them and exits within 2 s.
//
// Conventions enforced here rather than remembered in each agent:
//   - stdout carries only MCP protocol messages; logs go to stderr through
//     log/slog at the level in DW_LOG_LEVEL (debug, info, warn, error);
//   - every tool states all four annotation hints, because the spec
//     defaults destructiveHint and openWorldHint to true when absent;
//   - a panic inside a tool handler becomes a tool error and the server
//     keeps serving;
//   - arguments that do not fit the input schema or do not decode are
//     refused before the handler runs, with an error naming the argument
//     and what is valid (args.go);
//   - every tool returns structured output plus a short text summary a
//     person can read in the client;
//   - the output schema a tool advertises is its answer's shape cut to
//     OutputSchemaBudget characters (outschema.go), so tools/list stays
//     small: clients check answers against it, models read the answers;
//   - start-up does no schema work a client is not waiting for: tools/list
//     carries schemas generated into schemas_gen.go (register.go), and a
//     tool's schemas are built and resolved on its first call (call.go).
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
)

// Agent describes one MCP server binary.
type Agent struct {
	// Name is the binary's name and the server's serverInfo.name.
	Name string
	// Title is a human-readable name.
	Title string
	// Instructions tell a model client what the agent is for and how its
	// tools fit together.
	Instructions string
	// Register adds the agent's tools. It must not open databases or
	// networks: resources are opened lazily on the first call that needs
	// them, so a client's tools/list answers in milliseconds.
	Register func(s *Server) error
}

// Server wraps the SDK server for registration.
type Server struct {
	MCP    *mcp.Server
	Name   string
	Logger *slog.Logger
	tools  []string
	// checkers word bad tool arguments before the SDK does (args.go).
	checkers argCheckers
	// note, when set, says the demo's time in every answer (demo.go).
	note func() string
	// live holds each tool's schemas as its Go types give them, for the
	// test that keeps schemas_gen.go current (register.go);
	// ignoreListed makes the server list those instead of the table's.
	live         map[string]liveSchemas
	ignoreListed bool
	// fromTable are the tools whose schemas tools/list takes from the
	// table (register.go).
	fromTable listedTools
}

// ToolNames lists the tools registered so far, in order.
func (s *Server) ToolNames() []string { return append([]string(nil), s.tools...) }

// New builds the server for an agent without serving it.
func New(a Agent, version string, logger *slog.Logger) (*Server, error) {
	return newServer(a, version, logger, false)
}

// newServer is New; ignoreListed lists every tool's schemas as its Go
// types give them now rather than from schemas_gen.go (register.go).
func newServer(a Agent, version string, logger *slog.Logger, ignoreListed bool) (*Server, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	impl := &mcp.Implementation{Name: a.Name, Title: a.Title, Version: version}
	srv := mcp.NewServer(impl, &mcp.ServerOptions{
		Instructions: a.Instructions,
		Logger:       sdkLogger(logger),
		// Tools are fixed for the life of the process. Logs go to stderr
		// and, at the level a client sets, to the client (progress.go).
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Logging: &mcp.LoggingCapabilities{}},
	})
	s := &Server{MCP: srv, Name: a.Name, Logger: logger, ignoreListed: ignoreListed}
	srv.AddReceivingMiddleware(s.inputAnswerMiddleware, s.checkArgsMiddleware, s.listMiddleware)
	if a.Register != nil {
		if err := a.Register(s); err != nil {
			return nil, fmt.Errorf("register %s tools: %w", a.Name, err)
		}
	}
	return s, nil
}

// Boot is what an agent process runs on, loaded once at start: the
// configuration (or, when it did not load, the embedded default's shape
// with the error that stopped it) and the clock. internal/agentboot loads
// it and hands the same values to the agent's dependencies, so nothing
// below reads dw.yaml again.
type Boot struct {
	Config    *config.Config
	ConfigErr error
	Clock     clock.Clock
}

// Main serves the agent over stdio until stdin closes or a signal arrives,
// and returns the process exit code. boot is called once, after the
// command line is checked and logging is set up and before a.Register
// runs; an error from it (not a bad config, which the agent reports from
// every tool call) stops the process.
func Main(a Agent, version string, boot func() (Boot, error)) int {
	logger := NewLogger(os.Stderr)
	slog.SetDefault(logger)
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "-version", "--version", "version":
			fmt.Fprintf(os.Stderr, "%s %s\n", a.Name, Version(version))
			return 0
		default:
			fmt.Fprintf(os.Stderr, "%s is an MCP server spoken to over stdio; it takes no arguments (try --version)\n", a.Name)
			return 2
		}
	}
	b, err := boot()
	if err != nil {
		logger.Error("start failed", "agent", a.Name, "err", err)
		return 1
	}
	a = withConfig(a, b)          // config.go: a bad config refuses tools, never the connect
	a, note := withDemoTime(a, b) // demo.go: the embedded default says its demo time
	s, err := New(a, Version(version), logger)
	if err != nil {
		logger.Error("start failed", "err", err)
		return 1
	}
	s.note = note
	applyConfig(s, b.ConfigErr)
	maxMsg, err := MaxMessageBytesFromEnv()
	if err != nil {
		// A bad setting must not cost the client its server: say so and
		// keep the default.
		logger.Warn("ignoring DW_MAX_MESSAGE_BYTES", "err", err, "using", DefaultMaxMessageBytes)
		maxMsg = DefaultMaxMessageBytes
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	// The transport is the only writer of stdout in an agent: it carries
	// protocol messages and nothing else (logs go to stderr).
	t := &StdioTransport{In: os.Stdin, Out: os.Stdout, MaxMessageBytes: maxMsg, Logger: logger}
	logger.Debug("serving on stdio", "agent", a.Name, "version", Version(version), "tools", len(s.tools))
	return serve(s, t, sig, logger)
}

// exitGrace bounds how long the process waits, once its input has ended or a
// signal came, for cancelled calls to return before it exits anyway: a
// handler that ignores its context must not keep the process (and its CPU)
// alive after the client is gone.
const exitGrace = 1500 * time.Millisecond

// serve runs the server until its input ends (running calls drained, see
// StdioTransport) or a signal arrives (running calls cancelled), and
// returns the exit code. It never waits more than exitGrace after either.
func serve(s *Server, t *StdioTransport, sig <-chan os.Signal, logger *slog.Logger) int {
	done := make(chan error, 1)
	// The server's own context is never cancelled: cancelling it makes the
	// SDK wait for every running call. Ending the transport's input instead
	// cancels the calls' contexts.
	go func() { done <- s.MCP.Run(context.Background(), t) }()
	var err error
	select {
	case err = <-done:
	case <-sig:
		logger.Info("signal received; cancelling running calls", "agent", s.Name)
		t.Abort()
		err = waitOrGiveUp(done, logger, s.Name)
	case <-t.InputEnded():
		err = waitOrGiveUp(done, logger, s.Name)
	}
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, io.EOF), isClosed(err):
		logger.Debug("stopped", "agent", s.Name)
		return 0
	default:
		logger.Error("server stopped", "agent", s.Name, "err", err)
		return 1
	}
}

func waitOrGiveUp(done <-chan error, logger *slog.Logger, name string) error {
	select {
	case err := <-done:
		return err
	case <-time.After(exitGrace):
		logger.Warn("calls did not stop in time; exiting anyway", "agent", name, "grace", exitGrace)
		return nil
	}
}

func isClosed(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "closed") || strings.Contains(msg, "EOF")
}

// sdkLogger quiets the SDK's own session bookkeeping (connect, disconnect)
// below debug: an operator reading an agent's stderr wants its warnings and
// errors, not a line per session.
func sdkLogger(l *slog.Logger) *slog.Logger {
	if l.Enabled(context.Background(), slog.LevelDebug) {
		return l
	}
	return slog.New(minLevel{l.Handler(), slog.LevelWarn})
}

// minLevel drops records below a level.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(a), m.min}
}

func (m minLevel) WithGroup(n string) slog.Handler { return minLevel{m.Handler.WithGroup(n), m.min} }

// NewLogger logs text to w at the level named by DW_LOG_LEVEL (default info).
func NewLogger(w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	switch strings.ToLower(os.Getenv("DW_LOG_LEVEL")) {
	case "debug":
		level = slog.LevelDebug
	case "warn", "warning":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// Version is the build's version: the linker-set value when there is one,
// else the module version or VCS revision from the build info.
func Version(linked string) string {
	if linked != "" && linked != "dev" {
		return linked
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return "dev"
}
