#!/usr/bin/env bash
# start-agent.sh AGENT — runs a Data Workers agent on stdio for an MCP client
# (it replaces itself with bin/AGENT, stdio untouched):
#   claude mcp add dw-quality -- /path/to/checkout/start-agent.sh dw-quality
# start-agent.sh --build — builds every binary into bin/ (what make build runs).
#
# The rules, so that connecting never waits on a compiler when it need not:
#   - the agent's binary is present: start it at once, even when it is
#     older than the sources (after a git pull or an edit); the binaries that
#     are missing or older than the sources are rebuilt in the background,
#     for the next start (`make build` rebuilds now);
#   - the agent's binary is missing (a fresh clone whose set-up step was
#     skipped): start the build of the agents and the helpers they run
#     ($helpers) in the background, in one `go build`,
#     and answer the client at once with bin/dw-starter. Compiling the
#     agents on a cold Go cache takes minutes, far over a client's connect
#     timeout (Claude Code waits 30 s); the starter links only the standard
#     library and builds in seconds (it is built here first if it is missing
#     or stale, under its own lock, bin/.starter.lock, so the five connects
#     a client makes at once share that build too). It answers initialize
#     and tools/list as the agent would, holds every other message, and
#     hands the session to bin/AGENT once the build has put it there
#     (cmd/dw-starter).
# Every build holds one lock (bin/.build.lock), so the five agents a client
# starts at once share one build: the first takes the lock and builds, the
# others wait for it and find their binaries built. A background build is
# skipped when another build holds the lock, so builds never queue up. A
# build that fails writes bin/.build.failed; a connect that was waiting
# for it does not build again (make build does), so five connects to a
# broken tree cost one failed build, not five. A build keeps going when
# the client goes away: it runs in a session of its own (setsid), because
# Claude Code kills the server's whole process group when it gives up or
# quits. It is the only build, it ends when it is done, and the next
# connect uses its result; its output goes to bin/.build.log. Binaries are
# built into a directory in bin/ and renamed into place, so nothing ever
# starts from a half-written file, and each carries the time its build
# read the sources as its mtime.
# Everything this script prints goes to stderr: stdout belongs to MCP.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
agents="dw-quality dw-incidents dw-context-catalog dw-schema dw-connectors" # hard links to bin/dw-agents
# What the agents run beside them: dw (the demo's seeder) and a warehouse
# child per kind, each linking that kind's driver alone.
helpers="dw dw-warehouse-duckdb dw-warehouse-bigquery dw-warehouse-snowflake"
bindir="$root/bin"

say() { echo "start-agent: $*" >&2; }

# find_go prints the go command: $GO when set (make passes it), else go on
# PATH, else the usual install places, because GUI clients (Claude Desktop,
# Cursor) start servers with a short PATH.
find_go() {
  local g
  if [[ -n "${GO+set}" ]]; then
    command -v "$GO" 2>/dev/null
    return
  fi
  for g in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go /opt/homebrew/bin/go /usr/local/bin/go "$HOME/go/bin/go" /usr/lib/go/bin/go; do
    if [[ -n "$g" && -x "$g" ]]; then
      echo "$g"
      return 0
    fi
  done
  return 1
}

# outdated prints the binaries among its arguments that are missing or
# older than a source file they are built from; an agent's name is also
# outdated when it is not bin/dw-agents (a bin/ from before the agents were
# one binary).
outdated() {
  local b
  for b in "$@"; do
    if [[ ! -x "$bindir/$b" ]] || { [[ " $agents " == *" $b "* ]] && [[ ! "$bindir/$b" -ef "$bindir/dw-agents" ]]; } || [[ -n "$(cd "$root" && find cmd internal agents go.mod go.sum -newer "$bindir/$b" -type f ! -name '*_test.go' -print -quit 2>/dev/null)" ]]; then
      echo "$b"
    fi
  done
}

# lock [nowait] [NAME] takes the lock bin/.NAME.lock (default: build, the
# lock of every build of the agents and dw) for the rest of the calling
# (sub)shell; with nowait it fails at once when it is held. flock(1) where
# it exists (Linux), else an atomic mkdir with the holder's pid (macOS).
lock() {
  local block=1
  if [[ "${1:-}" == nowait ]]; then block=0; shift; fi
  local name="${1:-build}"
  mkdir -p "$bindir"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$bindir/.$name.lock"
    if [[ $block == 0 ]]; then flock -n 9; else flock 9; fi
    return
  fi
  local dir="$bindir/.$name.lockdir" holder
  until mkdir "$dir" 2>/dev/null; do
    holder="$(cat "$dir/pid" 2>/dev/null || true)"
    if [[ -n "$holder" ]] && ! kill -0 "$holder" 2>/dev/null; then
      rm -rf "$dir" # its holder died
      continue
    fi
    [[ $block == 0 ]] && return 1
    sleep 1
  done
  echo "$BASHPID" >"$dir/pid"
  trap 'rm -rf "$dir"' EXIT
}

# build [--partial] [--starter] [BINARY...] compiles the named binaries
# (every one under cmd/ when none is named) and renames them into bin/;
# the caller holds the lock. A failed build installs nothing and writes
# bin/.build.failed, except with --partial (the first build), which puts
# in place the binaries that did build: the agents are of use even when
# dw or the DuckDB child did not build (they link DuckDB through cgo); the
# agents being one binary, a compile error in any agent's package leaves
# none of them. --starter is the
# starter's own build, under its own lock: it leaves the agents' build
# directory and failure mark alone.
build() {
  local go tmp version pkgs=() b partial=0 kind=build ok=0
  if [[ "${1:-}" == --partial ]]; then partial=1; shift; fi
  if [[ "${1:-}" == --starter ]]; then kind=starter; shift; fi
  go="$(find_go)" || {
    say "no go command found (PATH=$PATH); run make build in $root once"
    return 127
  }
  if [[ $# -gt 0 ]]; then
    for b in "$@"; do
      # The agents are one binary, dw-agents, installed under their names.
      [[ " $agents " == *" $b "* ]] && b=dw-agents
      [[ " ${pkgs[*]} " == *" ./cmd/$b "* ]] || pkgs+=("./cmd/$b")
    done
  else
    pkgs=(./cmd/...)
  fi
  rm -rf "$bindir"/.tmp-$kind.* # left by a build that was killed
  [[ $kind == starter ]] || rm -f "$bindir/.build.failed"
  tmp="$(mktemp -d "$bindir/.tmp-$kind.XXXXXX")"
  touch "$tmp/.start"
  version="$(cd "$root" && git describe --always --dirty 2>/dev/null || echo dev)"
  # -trimpath: compiled packages are cached by content, not by checkout
  # path, so a fresh clone (or a second checkout) reuses what any earlier
  # build compiled and only links (without it every package of the module
  # compiles again: 31 s of CPU instead of 16 s for the five agents).
  # -s -w: no symbol table or DWARF, which is most of the link (13 s of CPU
  # instead of 21 s); panics still print file:line (to debug with delve,
  # go build the one binary yourself). Numbers: README, Development.
  # --exclude-libs (Linux, for the binaries linking DuckDB through cgo):
  # Go asks the C linker to export every global symbol, which for DuckDB's
  # static archive is a 6 MiB symbol table that each warehouse child
  # faults into memory at start; nothing loads symbols from dw at run time
  # (DuckDB's extension loading is locked down). Numbers: README.
  local ldflags="-s -w -X main.version=$version"
  [[ "$(uname -s)" == Linux ]] && ldflags+=" -extldflags=-Wl,--exclude-libs,ALL"
  local began=$SECONDS
  (cd "$root" && "$go" build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}") && ok=1
  if [[ $ok == 1 ]]; then
    say "built ${*:-every binary} in $((SECONDS - began)) s"
  else
    say "the build of ${*:-every binary} failed after $((SECONDS - began)) s"
  fi
  if [[ $ok == 1 || $partial == 1 ]]; then
    # Each agent's name is a hard link to dw-agents, which serves the agent
    # it is started as: five processes of one file share its pages (five
    # files held 55 MiB more; README, "The warehouse child"). The renames
    # below keep the links.
    # The helpers go in first: a waiting starter hands its session over
    # once bin/AGENT is there, and the agent's first warehouse call needs
    # its child.
    if [[ -e "$tmp/dw-agents" ]]; then
      for b in $agents; do ln -f "$tmp/dw-agents" "$tmp/$b"; done
    fi
    for b in "$tmp"/dw*; do
      [[ -e "$b" && " $agents " != *" ${b##*/} "* ]] || continue
      touch -r "$tmp/.start" "$b"
      mv -f "$b" "$bindir/"
    done
    for b in $agents; do
      [[ -e "$tmp/$b" ]] || continue
      touch -r "$tmp/.start" "$tmp/$b"
      mv -f "$tmp/$b" "$bindir/"
    done
  fi
  rm -rf "$tmp"
  [[ $ok == 1 ]] && return 0
  [[ $kind == starter ]] || date >"$bindir/.build.failed"
  return 1
}

if [[ "${1:-}" == --build ]]; then
  lock
  build >&2
  say "built $(cd "$bindir" && echo dw*) in $bindir"
  exit
fi

# The two builds a connect starts, each run by this script in a session of
# its own (see detach): --build-agents waits for the lock and builds the
# agents and their helpers that are missing or stale, in one go build (on a
# cold cache the agents' critical path is modernc.org/sqlite, one package
# on one core, and dw's packages fill the other: the six cost about what
# the five do); --build-stale, only when no other build holds the lock,
# rebuilds every binary that is, at low priority.
case "${1:-}" in
--build-agents)
  # A build that fails while this one waits is not run again: the five
  # connects of one client would otherwise each repeat it.
  since="$(mktemp)"
  lock
  if [[ "$bindir/.build.failed" -nt "$since" ]]; then
    rm -f "$since"
    say "the build of the agents just failed (above); not building again (make build does)"
    exit 1
  fi
  rm -f "$since"
  # shellcheck disable=SC2086 # $agents is a list of words
  todo="$(outdated $agents $helpers)"
  [[ -z "$todo" ]] || build --partial $todo
  exit
  ;;
--build-stale)
  lock nowait || exit 0 # a build is running: it is the one; no queue forms
  # shellcheck disable=SC2086
  todo="$(outdated $agents $helpers)"
  [[ -n "$todo" ]] || exit 0
  renice -n 10 -p $$ >/dev/null 2>&1 || true
  build $todo
  exit
  ;;
esac

# detach runs this script with the given mode in a new session, its output
# appended to bin/.build.log, so that neither the client killing the
# server's process group nor its closing the server's stderr stops a build.
# Without setsid (macOS) the build only survives the script being killed.
# It is always called in a background subshell, which it replaces (exec),
# so no shell is left waiting for the build.
detach() {
  local self
  self="$root/$(basename "${BASH_SOURCE[0]}")"
  mkdir -p "$bindir"
  if command -v setsid >/dev/null 2>&1; then
    exec setsid "$self" "$1" </dev/null >>"$bindir/.build.log" 2>&1
  else
    exec "$self" "$1" </dev/null >>"$bindir/.build.log" 2>&1
  fi
}

agent="${1:-}"
if [[ -z "$agent" || " $agents " != *" $agent "* ]]; then
  {
    echo "usage: start-agent.sh AGENT    (or start-agent.sh --build)"
    echo "unknown agent '${agent}'; the agents are:"
    for a in $agents; do echo "  $a"; done
  } >&2
  exit 2
fi
shift

# starter makes sure bin/dw-starter is there and current, building it
# under its own lock when it is not (seconds even on a cold cache: it
# links only the standard library). A stale starter that does not rebuild
# still serves: its tools/list is at worst the one it was built with.
starter() {
  if [[ -n "$(outdated dw-starter)" ]]; then
    (
      lock starter
      [[ -z "$(outdated dw-starter)" ]] || build --starter dw-starter
    ) </dev/null >>"$bindir/.build.log" 2>&1 || true
  fi
  [[ -x "$bindir/dw-starter" ]]
}

if [[ ! -x "$bindir/$agent" ]]; then
  if ! find_go >/dev/null; then
    say "$agent is not built and no go command was found (PATH=$PATH)."
    say "Build the agents once from a terminal: cd '$root' && make build"
    exit 1
  fi
  mkdir -p "$bindir"
  if [[ $# -eq 0 ]] && starter; then
    say "$agent is not built yet: building the agents in the background (one build serves all five; log: bin/.build.log); bin/dw-starter answers until it is done"
    # Started from a subshell that exits at once, so the build is not a
    # child of the starter (which would never reap it).
    ( detach --build-agents & )
    exec "$bindir/dw-starter" "$agent"
  fi
  say "building the five agents into $bindir (one build serves them all; this happens once; log: bin/.build.log) …"
  # If the client stops waiting and kills this script, the detached build
  # still finishes and the next connect uses it.
  detach --build-agents &
  wait $! || true
  if [[ ! -x "$bindir/$agent" ]]; then
    say "the build did not produce bin/$agent; the end of bin/.build.log:"
    tail -n 20 "$bindir/.build.log" >&2 || true
    say "run make build in $root to build again"
    exit 1
  fi
fi
# shellcheck disable=SC2086
if [[ -n "$(outdated $agents $helpers)" ]] && find_go >/dev/null; then
  say "rebuilding the binaries that are missing or older than the sources in the background, for the next start (log: bin/.build.log; make build rebuilds now)"
  # Started from a subshell that exits at once, so the build is not a
  # child of the agent (which would never reap it).
  ( detach --build-stale & )
fi
exec "$bindir/$agent" "$@"
