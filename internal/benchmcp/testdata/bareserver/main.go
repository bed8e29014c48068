// Command bareserver is the floor of the cold-start benchmark: the
// plainest go-sdk server there is, one tool with a typed input, on the
// SDK's own stdio transport. It lives under testdata so no build of the
// module (./...) includes it; BenchmarkE2EColdStart builds it with the
// flags the agents are built with.
//
// Given DW_BARE_ANSWER (a file holding a tool result as JSON), it also
// has a tool "replay" that answers every call with that result, decoded
// once at start: the SDK's own cost of carrying an answer of that size
// and shape from server to client, which the blast radius benchmark
// reports beside the product's.
package main

import (
	"context"
	"encoding/json"
	"log"
	"os"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type echoOut struct {
	Text string `json:"text"`
}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes its text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut(in), nil
		})
	if path := os.Getenv("DW_BARE_ANSWER"); path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			log.Fatal(err)
		}
		var answer mcp.CallToolResult
		if err := json.Unmarshal(raw, &answer); err != nil {
			log.Fatal(err)
		}
		// Held as its JSON, so each call only encodes it, as a handler
		// returning a marshalled answer does.
		structured, err := json.Marshal(answer.StructuredContent)
		if err != nil {
			log.Fatal(err)
		}
		answer.StructuredContent = json.RawMessage(structured)
		s.AddTool(&mcp.Tool{Name: "replay", Description: "Answers the recorded result.", InputSchema: &jsonschema.Schema{Type: "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				res := answer
				return &res, nil
			})
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
