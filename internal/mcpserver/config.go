package mcpserver

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// withConfig tells the client which configuration and store the agent
// uses, in the instructions it reads at initialize, or the error the
// configuration did not load with. The agent then still starts (its deps
// carry the same error, see deps.Load) so that the client connects, lists
// the tools and gets the error, with its file, line and key, from every
// tool call (refuseTools) instead of a bare "failed to connect".
func withConfig(a Agent, b Boot) Agent {
	switch {
	case b.ConfigErr != nil:
		a.Instructions += "\n\nThe configuration did not load, so every tool answers with this error until it is fixed and the agent restarted:\n" + b.ConfigErr.Error()
	case b.Config != nil:
		a.Instructions += "\n\n" + b.Config.Describe()
	}
	return a
}

// refuseTools answers every tools/call with the configuration error as a
// tool error; initialize, tools/list and the rest are served as usual.
func refuseTools(agent string, cfgErr error) mcp.Middleware {
	text := fmt.Sprintf("%s cannot run tools: its configuration did not load.\n%v\nFix the file (or set DW_CONFIG to another one), then restart the agent (in Claude Code: /mcp, then reconnect).", agent, cfgErr)
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
		}
	}
}

// applyConfig installs refuseTools when the configuration did not load.
func applyConfig(s *Server, cfgErr error) {
	if cfgErr == nil {
		return
	}
	s.Logger.Error("the configuration did not load; every tool call answers with this error", "agent", s.Name, "err", cfgErr)
	s.MCP.AddReceivingMiddleware(refuseTools(s.Name, cfgErr))
}
