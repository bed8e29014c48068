package incidents

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/mcpserver/mcpconfirm"
	"github.com/dataworkers/dw/internal/textrule"
)

// ConfirmIn names the proposal to put to the person at this client.
type ConfirmIn struct {
	Proposal string `json:"proposal" jsonschema:"proposal id to put to its named approver in this client, e.g. P-7K3M9QXA"`
}

// ConfirmOut is what the person answered; the model cannot answer for them.
// The fields are approvals.ElicitationOutcome's, except that the proposal
// is shaped as propose_remediation's answer shows it (Proposed, within
// answerBudget): a proposal can name 1,000 scope entries and keep a lineage
// event of thousands of datasets, and echoing it whole made this answer
// about a megabyte.
type ConfirmOut struct {
	ProposalID string            `json:"proposal_id"`
	Approved   bool              `json:"approved"`
	Recorded   bool              `json:"recorded"`
	Verdict    approvals.Verdict `json:"verdict,omitempty"`
	Message    string            `json:"message"`
	Proposal   *Proposed         `json:"proposal,omitempty"`
	Channel    string            `json:"channel" jsonschema:"how the person was asked: elicitation (the client's own confirmation form)"`
}

var askApproverTool = mcpserver.Tool{
	Name:  "request_confirmation",
	Title: "Put a proposal to its approver in this client",
	Description: "When the OS user running this agent is mapped in dw.yaml to a proposal's named approver, shows that person the proposal (what, why, blast radius, undo, expiry) in the client's own confirmation form and records their answer as their decision (channel elicitation). " +
		"The model cannot answer the form: only the person can. It fails closed: a client that cannot ask, a declined or cancelled form, an error or no answer records nothing and the proposal stays pending for Slack or `dw approve`.",
	ReadOnly: false, Destructive: false, Idempotent: false, OpenWorld: false,
}

// askApprover uses the multi-round-trip form: the first call returns the
// question as an input request with a sealed state naming the proposal and
// the person; the client asks its user and calls again with the answer,
// which is checked against that state before anything is recorded.
func (h *handlers) askApprover(ctx context.Context, req *mcp.CallToolRequest, in ConfirmIn) (*mcp.CallToolResult, *ConfirmOut, error) {
	// Only a client that declared it can show a form may ask or answer,
	// whatever protocol version it speaks: on newer versions a client
	// answers input requests itself, so an answer from one that never said
	// it can ask a person may be the model's. Refused as a tool error the
	// model can read, with nothing recorded.
	if !mcpconfirm.Declared(req.Session) {
		return refusal(in.Proposal, approvals.ErrNoElicitation), nil, nil
	}
	e, err := h.env(ctx)
	if err != nil {
		return nil, nil, err
	}
	login, err := approvals.OSLogin()
	if err != nil {
		return refusal(in.Proposal, err), nil, nil
	}
	if req.Params.RequestState == "" && len(req.Params.InputResponses) == 0 {
		form, state, err := e.apv.StartElicitation(ctx, login, in.Proposal)
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{
			InputRequests: mcpconfirm.InputRequests(form),
			RequestState:  state,
		}, nil, nil
	}
	outcome, err := e.apv.DecideFromElicitation(ctx, true, login, req.Params.RequestState, mcpconfirm.AnswerFrom(req.Params.InputResponses), nil)
	if err != nil {
		return nil, nil, err
	}
	out := &ConfirmOut{ProposalID: outcome.ProposalID, Approved: outcome.Approved, Recorded: outcome.Recorded, Verdict: outcome.Verdict,
		Message: outcome.Message, Channel: string(approvals.ChannelElicitation)}
	if outcome.Proposal != nil {
		shown := h.proposed(outcome.Proposal, answerBudget)
		if !outcome.Proposal.State.Open() {
			shown.HowToDecide = "decided: " + outcome.Message
		}
		out.Proposal = &shown
	}
	text := outcome.Message
	if text == "" {
		text = fmt.Sprintf("%s: nothing recorded", textrule.Quote(in.Proposal))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// refusal is a tool error result: the model reads why nothing happened.
// The id is the client's text, quoted: a bidirectional override or a
// newline in it must not rearrange what a person reads beside it.
func refusal(proposal string, err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
		Text: fmt.Sprintf("not approved: %s: %v", textrule.Quote(proposal), err)}}}
}
