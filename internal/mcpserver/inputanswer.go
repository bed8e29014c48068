package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool that needs a person's answer returns input requests (the
// multi-round-trip form). With a client on an older protocol version the
// SDK asks the client itself (elicitation/create) and calls the tool again
// with the answer (go-sdk v1.8.0, mcp/mrtr.go). When that asking fails,
// the SDK's error became the call's JSON-RPC answer: a client that
// refused the form read `method not found: "tools/call"`; one whose
// answer did not fit the form read "multi-round-trip: fulfilling input
// request \"dw_approval\": calling \"elicitation/create\": json: cannot
// unmarshal … into Go value of type mcp.ElicitResult". The tool never ran
// its second round, so nothing was recorded, but the model was told the
// server lacks tools/call. inputAnswerMiddleware turns those errors into
// the tool's error result, in words, saying nothing was done.

// mrtrErrorPrefix starts every error the SDK's multi-round-trip middleware
// makes when asking the client fails; mrtrBusy is its answer to an empty
// set of input requests.
const (
	mrtrErrorPrefix = "multi-round-trip: "
	mrtrBusy        = "the server is busy, retry later"
)

func (s *Server) inputAnswerMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err == nil || method != "tools/call" {
			return res, err
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, mrtrErrorPrefix) && msg != mrtrBusy {
			return res, err
		}
		name := ""
		if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil {
			name = call.Params.Name
		}
		s.Logger.Warn("asking the client for a tool's input failed", "tool", name, "err", err)
		var r mcp.CallToolResult
		r.SetError(errors.New(name + ": " + inputAnswerWords(err) + "; nothing was done or recorded, so the call can be made again"))
		return &r, nil
	}
}

// inputAnswerWords says why asking the client failed, in words a model can
// act on.
func inputAnswerWords(err error) string {
	var we *jsonrpc.Error
	switch {
	case err.Error() == mrtrBusy:
		return "the server had nothing to ask"
	case errors.As(err, &we):
		// The client's own answer to the server's request was an error.
		return fmt.Sprintf("the client could not ask the person (it answered the form request with error %d: %s)", we.Code, clip(we.Message, 200))
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return "the call ended before the client answered the form request"
	}
	return "the client could not be asked, or its answer did not fit the form (a client must declare the elicitation capability, and each field's answer must be one of the values it offers, as text)"
}
