package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// build is what the starter knows of the build start-agent.sh started in
// the background: it looks at bin/, as start-agent.sh leaves it.
//   - bin/.build.lock is held (flock) while any build runs (on macOS,
//     without flock(1), bin/.build.lockdir holds the builder's pid);
//   - binaries are renamed into bin/ when complete, so one that exists
//     can be run;
//   - a build that fails writes bin/.build.failed, and its output is at
//     the end of bin/.build.log.
type build struct {
	bin, agent string
	// since is when this session began: a failure recorded before it is
	// an earlier build's, and the build started for this session retries
	// (start-agent.sh starts that build just before the starter).
	since time.Time
	// idleLimit is how long the lock may stay free with no binary and no
	// failure recorded before the starter stops waiting: the build it was
	// started with never ran.
	idleLimit time.Duration
	freeSince time.Time
}

func newBuild(bin, agent string, since time.Time) *build {
	return &build{bin: bin, agent: agent, since: since, idleLimit: 30 * time.Second}
}

// helpers are what the agents run beside them, which start-agent.sh
// builds with them (its $helpers): dw and the warehouse child of each kind.
var helpers = []string{"dw", "dw-warehouse-duckdb", "dw-warehouse-bigquery", "dw-warehouse-snowflake"}

// buildState is where the build stands.
type buildState int

const (
	building buildState = iota
	// done: bin/AGENT can be started. Not before bin/dw and the
	// warehouse children are there too (the agents run dw to seed the
	// embedded default's store, and a child to read a warehouse, so a
	// first call without them fails), unless no build is left to bring
	// them. start-agent.sh moves them in before the agents' names.
	done
	failed
)

// check looks at bin/ now; for failed it also says why, for people.
func (b *build) check(now time.Time) (buildState, string) {
	held := lockHeld(b.bin)
	if held {
		b.freeSince = time.Time{}
	} else if b.freeSince.IsZero() {
		b.freeSince = now
	}
	if exists(filepath.Join(b.bin, b.agent)) {
		if held && slices.ContainsFunc(helpers, func(h string) bool { return !exists(filepath.Join(b.bin, h)) }) {
			return building, "" // the helpers come with the agents in the same build
		}
		return done, ""
	}
	if held {
		return building, ""
	}
	root := filepath.Dir(b.bin)
	if fi, err := os.Stat(filepath.Join(b.bin, ".build.failed")); err == nil && fi.ModTime().After(b.since.Add(-mtimeSlack)) {
		return failed, fmt.Sprintf("%s could not start: the build of the agents failed. The end of %s:\n%s\nFix what it says, run `make build` in %s, then reconnect (in Claude Code: /mcp).",
			b.agent, filepath.Join(b.bin, ".build.log"), logTail(filepath.Join(b.bin, ".build.log"), 15), root)
	}
	if now.Sub(b.freeSince) >= b.idleLimit {
		return failed, fmt.Sprintf("%s could not start: %s is missing and no build of the agents has run for %s (bin/.build.lock is free; see %s). Run `make build` in %s, then reconnect (in Claude Code: /mcp).",
			b.agent, filepath.Join(b.bin, b.agent), b.idleLimit, filepath.Join(b.bin, ".build.log"), root)
	}
	return building, ""
}

// mtimeSlack allows for file times taken from the kernel's coarse clock,
// which can read a few milliseconds behind time.Now.
const mtimeSlack = 100 * time.Millisecond

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// logTail is the last n lines of a file, read from its last 8 KiB.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no build log: " + err.Error() + ")"
	}
	defer f.Close()
	const window = 8 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		_, _ = f.Seek(fi.Size()-window, io.SeekStart)
	}
	raw, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
