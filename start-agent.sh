#!/usr/bin/env bash
# start-agent.sh AGENT — builds the agent into ./bin when its sources changed,
# then replaces itself with it, stdio untouched, so an MCP client speaks to
# the agent directly:
#   claude mcp add dw-quality -- "$(pwd)/start-agent.sh" dw-quality
# Build output goes to stderr: stdout belongs to the MCP protocol.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
agents="dw-quality dw-incidents dw-context-catalog dw-schema dw-connectors"

agent="${1:-}"
if [[ -z "$agent" || " $agents " != *" $agent "* ]]; then
  {
    echo "usage: start-agent.sh AGENT"
    echo "unknown agent '${agent}'; the agents are:"
    for a in $agents; do echo "  $a"; done
  } >&2
  exit 2
fi
shift

bin="$root/bin/$agent"
# The agent starts `dw warehouse serve` beside it for warehouse access, so
# dw is kept as fresh as the agent.
stale=0
for b in "$bin" "$root/bin/dw"; do
  if [[ ! -x "$b" ]] || [[ -n "$(cd "$root" && find cmd internal agents go.mod go.sum -newer "$b" \( -name '*.go' -o -name '*.sql' -o -name go.mod -o -name go.sum \) -print -quit 2>/dev/null)" ]]; then
    stale=1
  fi
done
if [[ "$stale" == 1 ]]; then
  echo "start-agent: building $agent and dw …" >&2
  version="$(cd "$root" && git describe --always --dirty 2>/dev/null || echo dev)"
  (cd "$root" && go build -ldflags "-X main.version=$version" -o "$root/bin/" "./cmd/$agent" ./cmd/dw) 1>&2
fi
exec "$bin" "$@"
