// Package mcpserver is the bootstrap every Data Workers agent shares: the
// server identity, stderr logging, stdio serving with a clean exit, and
// tool registration that enforces the conventions every tool follows.
//
// Conventions enforced here rather than remembered in each agent:
//   - stdout carries only MCP protocol messages; logs go to stderr through
//     log/slog at the level in DW_LOG_LEVEL (debug, info, warn, error);
//   - every tool states all four annotation hints, because the spec
//     defaults destructiveHint and openWorldHint to true when absent;
//   - a panic inside a tool handler becomes a tool error and the server
//     keeps serving;
//   - every tool returns structured output plus a short text summary a
//     person can read in the client.
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

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
}

// ToolNames lists the tools registered so far, in order.
func (s *Server) ToolNames() []string { return append([]string(nil), s.tools...) }

// New builds the server for an agent without serving it.
func New(a Agent, version string, logger *slog.Logger) (*Server, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	impl := &mcp.Implementation{Name: a.Name, Title: a.Title, Version: version}
	srv := mcp.NewServer(impl, &mcp.ServerOptions{
		Instructions: a.Instructions,
		Logger:       sdkLogger(logger),
		// Tools are fixed for the life of the process; no logging
		// capability is advertised because logs go to stderr.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	s := &Server{MCP: srv, Name: a.Name, Logger: logger}
	if a.Register != nil {
		if err := a.Register(s); err != nil {
			return nil, fmt.Errorf("register %s tools: %w", a.Name, err)
		}
	}
	return s, nil
}

// Main serves the agent over stdio until stdin closes or a signal arrives,
// and returns the process exit code.
func Main(a Agent, version string) int {
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
	s, err := New(a, Version(version), logger)
	if err != nil {
		logger.Error("start failed", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger.Debug("serving on stdio", "agent", a.Name, "version", Version(version), "tools", len(s.tools))
	err = s.MCP.Run(ctx, &mcp.StdioTransport{})
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, io.EOF), isClosed(err):
		logger.Debug("stopped", "agent", a.Name)
		return 0
	default:
		logger.Error("server stopped", "agent", a.Name, "err", err)
		return 1
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
