package approvals_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/mcpserver/mcpconfirm"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// confirmServer is an MCP server with one tool that asks the person in the
// client to decide a proposal, the way an agent's dispatching tool would:
// the first pass returns the question as an input request with a sealed
// state, the retry hands the answer to DecideFromElicitation. It speaks
// MCP through mcpconfirm, as the agents do, so this drives the real
// translation; it is an external test because mcpconfirm imports approvals.
func confirmServer(s *approvals.Service, osUser string) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "confirm-test", Version: "0"}, nil)
	type in struct {
		ProposalID string `json:"proposal_id"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "confirm_proposal"}, func(ctx context.Context, req *mcp.CallToolRequest, args in) (*mcp.CallToolResult, *approvals.ElicitationOutcome, error) {
		if !mcpconfirm.Declared(req.Session) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: approvals.ErrNoElicitation.Error()}}}, nil, nil
		}
		if req.Params.RequestState == "" {
			params, state, err := s.StartElicitation(ctx, osUser, args.ProposalID)
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{InputRequests: mcpconfirm.InputRequests(params), RequestState: state}, nil, nil
		}
		out, err := s.DecideFromElicitation(ctx, mcpconfirm.Declared(req.Session), osUser, req.Params.RequestState, mcpconfirm.AnswerFrom(req.Params.InputResponses), nil)
		if err != nil {
			return nil, nil, err
		}
		return nil, &out, nil
	})
	return srv
}

func connect(t *testing.T, srv *mcp.Server, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "0"}, opts).Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func outcome(t *testing.T, res *mcp.CallToolResult) approvals.ElicitationOutcome {
	t.Helper()
	raw, _ := json.Marshal(res.StructuredContent)
	var out approvals.ElicitationOutcome
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("structured content %s: %v", raw, err)
	}
	return out
}

// TestElicitationOverMCP drives the real SDK in both multi-round-trip
// forms: the client middleware of a 2026-07-28 client, and the server shim
// for an older client.
func TestElicitationOverMCP(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				s, _ := approvals.Fixture(t, db)
				srv := confirmServer(s, "bob")

				// A client that cannot elicit never approves.
				p := approvals.MustPropose(t, s, approvals.HoldDAG())
				bare := connect(t, srv, version, nil)
				res, err := bare.CallTool(ctx, &mcp.CallToolParams{Name: "confirm_proposal", Arguments: map[string]any{"proposal_id": p.ID}})
				if err == nil && !res.IsError {
					t.Errorf("a client without elicitation got %+v", res)
				}
				if got, _ := s.Get(ctx, p.ID); got.State != approvals.StatePending {
					t.Fatalf("state %s after a client that cannot ask; want pending", got.State)
				}

				// The person declines: nothing is recorded.
				var asked string
				declining := connect(t, srv, version, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked = req.Params.Message
					return &mcp.ElicitResult{Action: "decline"}, nil
				}})
				res, err = declining.CallTool(ctx, &mcp.CallToolParams{Name: "confirm_proposal", Arguments: map[string]any{"proposal_id": p.ID}})
				if err != nil || res.IsError {
					t.Fatalf("decline: %+v, %v", res, err)
				}
				if out := outcome(t, res); out.Approved || out.Recorded {
					t.Errorf("decline came out as %+v", out)
				}
				if asked == "" {
					t.Error("the person was never asked")
				}

				// The person approves.
				approving := connect(t, srv, version, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve", "reason": "confirmed in the client"}}, nil
				}})
				res, err = approving.CallTool(ctx, &mcp.CallToolParams{Name: "confirm_proposal", Arguments: map[string]any{"proposal_id": p.ID}})
				if err != nil || res.IsError {
					t.Fatalf("approve: %+v, %v", res, err)
				}
				if out := outcome(t, res); !out.Approved || out.Proposal.Decision.Channel != approvals.ChannelElicitation {
					t.Errorf("approve came out as %+v", out)
				}

				// An answer outside the schema is refused by the client SDK.
				q := approvals.MustPropose(t, s, approvals.HoldDAG())
				odd := connect(t, srv, version, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "sure"}}, nil
				}})
				res, err = odd.CallTool(ctx, &mcp.CallToolParams{Name: "confirm_proposal", Arguments: map[string]any{"proposal_id": q.ID}})
				if err == nil && !res.IsError && outcome(t, res).Approved {
					t.Errorf("an out-of-schema answer approved: %+v", res)
				}
				if got, _ := s.Get(ctx, q.ID); got.State != approvals.StatePending {
					t.Errorf("state %s after an out-of-schema answer", got.State)
				}
			})
		})
	}
}

// TestElicitationForgedStateOverMCP answers by hand with a state the
// server never issued: the tool refuses and nothing is recorded.
func TestElicitationForgedStateOverMCP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := approvals.Fixture(t, db)
		p := approvals.MustPropose(t, s, approvals.HoldDAG())
		// The client declares elicitation but answers by hand.
		cs := connect(t, confirmServer(s, "bob"), "2026-07-28", &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				t.Error("the form was shown although the client answers by hand")
				return nil, nil
			}})
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "confirm_proposal", Arguments: map[string]any{"proposal_id": p.ID}})
		if err != nil || !res.NeedsInput() {
			t.Fatalf("first pass: %+v, %v", res, err)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "confirm_proposal", Arguments: map[string]any{"proposal_id": p.ID},
			InputResponses: mcp.InputResponseMap{approvals.ElicitationInputKey: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}},
			RequestState:   "eyJwIjoiUC1YIn0.c2lnbmF0dXJl"})
		if err == nil && !res.IsError {
			t.Errorf("forged state accepted: %+v", res)
		}
		// The genuine state with no answer attached is no approval either.
		first, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "confirm_proposal", Arguments: map[string]any{"proposal_id": p.ID}})
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "confirm_proposal", Arguments: map[string]any{"proposal_id": p.ID}, RequestState: first.RequestState})
		if err != nil || res.IsError || outcome(t, res).Approved {
			t.Errorf("missing answer: %+v, %v", res, err)
		}
		if got, _ := s.Get(ctx, p.ID); got.State != approvals.StatePending {
			t.Errorf("state %s, want pending", got.State)
		}
	})
}

// Case 5: a client that did not declare elicitation answers accept and
// approve anyway, by hand, on any protocol version (on 2026-07-28 a client
// answers input requests itself). The tool refuses with a tool error the
// model can read, not a JSON-RPC error, and nothing is recorded, even with
// a genuine sealed state.
func TestElicitationNeedsTheDeclaredCapability(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25", "2025-06-18"} {
		t.Run(version, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				s, _ := approvals.Fixture(t, db)
				p := approvals.MustPropose(t, s, approvals.HoldDAG())
				// No ElicitationHandler: the client declares no elicitation.
				cs := connect(t, confirmServer(s, "bob"), version, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
				if caps := cs.InitializeResult(); caps == nil {
					t.Fatal("no initialize result")
				}
				state, err := s.SealRequestState(ctx, *p, "bob")
				if err != nil {
					t.Fatal(err)
				}
				accept := mcp.InputResponseMap{approvals.ElicitationInputKey: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve", "reason": "the model says so"}}}
				for _, call := range []struct {
					name   string
					params *mcp.CallToolParams
				}{
					{"first pass", &mcp.CallToolParams{Name: "confirm_proposal", Arguments: map[string]any{"proposal_id": p.ID}}},
					{"answer with a genuine state", &mcp.CallToolParams{Name: "confirm_proposal", Arguments: map[string]any{"proposal_id": p.ID},
						RequestState: state, InputResponses: accept}},
					{"answer with no state", &mcp.CallToolParams{Name: "confirm_proposal", Arguments: map[string]any{"proposal_id": p.ID},
						InputResponses: accept}},
				} {
					res, err := cs.CallTool(ctx, call.params)
					if err != nil {
						t.Fatalf("%s: a JSON-RPC error (%v); want a tool error the model can read", call.name, err)
					}
					if !res.IsError || len(res.Content) == 0 {
						t.Fatalf("%s: %+v; want isError", call.name, res)
					}
					if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "did not declare the elicitation capability") {
						t.Errorf("%s: %q", call.name, text)
					}
				}
				if got, _ := s.Get(ctx, p.ID); got.State != approvals.StatePending || got.Decision != nil {
					t.Errorf("state %s after answers from a client that cannot ask", got.State)
				}
				// The domain call refuses on its own too.
				if out, err := s.DecideFromElicitation(ctx, false, "bob", state, mcpconfirm.AnswerFrom(accept), nil); !errors.Is(err, approvals.ErrNoElicitation) || out.Approved || out.Recorded {
					t.Errorf("DecideFromElicitation without the capability: %+v, %v", out, err)
				}
			})
		})
	}
}
