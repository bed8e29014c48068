// Command dw-starter answers an MCP client for one agent while the agents
// are being built for the first time, then hands the session to the agent.
//
// start-agent.sh runs it in place of bin/AGENT when that binary is missing
// (a fresh clone whose set-up step was skipped). Compiling the agents on a
// cold Go cache takes minutes, far over a client's connect timeout (Claude
// Code waits 30 s); this program links only the standard library and
// builds in seconds. It answers initialize, ping and tools/list itself,
// from data generated from the real agents (data/, go generate), and
// queues every other message in order. Once the build has put bin/AGENT
// and bin/dw (which the agents run for their store and warehouses) in
// place, it starts the agent, replays the client's initialize (the
// agent's answer to it is dropped: the client has one already) and the
// queue, and from then on passes the session through both ways.
//
// stdout carries only protocol messages; logs go to stderr.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/dataworkers/dw/internal/mcpserver/wire"
)

//go:generate env UPDATE_STARTER_DATA=true go test -run TestEmbeddedDataIsCurrent .

// version is set by the build (-ldflags "-X main.version=…"), as each
// agent's is: the starter's serverInfo is the agent's.
var version = "dev"

func main() {
	logger := newLogger()
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version" || os.Args[1] == "version") {
		fmt.Fprintf(os.Stderr, "dw-starter %s\n", agentVersion(version))
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintf(os.Stderr, "usage: dw-starter AGENT (start-agent.sh runs it while the agents are built); the agents: %s\n", strings.Join(agentNames(), " "))
		os.Exit(2)
	}
	exe, err := os.Executable()
	if err != nil {
		logger.Error("cannot find the bin directory", "err", err)
		os.Exit(1)
	}
	os.Exit(starterMain(os.Args[1], filepath.Dir(exe), logger))
}

// starterMain serves agent over stdio from the starter in binDir until the
// session ends, and returns the exit code.
func starterMain(agent, binDir string, logger *slog.Logger) int {
	data, err := loadAgent(agent)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dw-starter: %v; the agents: %s\n", err, strings.Join(agentNames(), " "))
		return 2
	}
	maxMsg, err := wire.MaxMessageBytesFromEnv()
	if err != nil {
		// As the agents do: a bad setting costs the client nothing.
		logger.Warn("ignoring DW_MAX_MESSAGE_BYTES", "err", err, "using", wire.DefaultMaxMessageBytes)
		maxMsg = wire.DefaultMaxMessageBytes
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	s := &session{
		agent:   data,
		version: agentVersion(version),
		build:   newBuild(binDir, agent, time.Now()),
		in:      os.Stdin,
		out:     os.Stdout,
		max:     maxMsg,
		logger:  logger,
		signals: sig,
	}
	return s.run()
}

// newLogger logs text to stderr at the level named by DW_LOG_LEVEL
// (default info), as the agents do (mcpserver.NewLogger).
func newLogger() *slog.Logger {
	level := slog.LevelInfo
	switch strings.ToLower(os.Getenv("DW_LOG_LEVEL")) {
	case "debug":
		level = slog.LevelDebug
	case "warn", "warning":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// agentVersion is mcpserver.Version: the linker-set value when there is
// one, else the module version or VCS revision from the build info. The
// starter is built by the same command with the same -X main.version as
// the agents, so its serverInfo.version is the one the agent will give.
func agentVersion(linked string) string {
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
