// Package e2e holds the tests that drive the real agent binaries over
// stdio, as an MCP client does: build, spawn, initialize, list, call, and
// see the process exit when stdin closes.
package e2e
