package mcpconfirm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/approvals"
)

// The form request is a flat object of string fields with the decision
// required and limited to approve or reject, as approvals describes it.
func TestParamsSchema(t *testing.T) {
	params := Params(approvals.ElicitationRequest(approvals.Proposal{ID: "P-ABCDEFGH", What: "Pause the DAG"}))
	if params.Mode != "form" || !strings.HasPrefix(params.Message, "Approve P-ABCDEFGH? Pause the DAG") {
		t.Errorf("params %+v", params)
	}
	raw, _ := json.Marshal(params.RequestedSchema)
	var schema struct {
		Type       string
		Properties map[string]struct {
			Type string
			Enum []string
		}
		Required []string
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || len(schema.Properties) != 2 || strings.Join(schema.Properties["decision"].Enum, ",") != "approve,reject" ||
		schema.Properties["reason"].Type != "string" || schema.Properties["reason"].Enum != nil || strings.Join(schema.Required, ",") != "decision" {
		t.Errorf("schema %s", raw)
	}
}

func TestAnswerFrom(t *testing.T) {
	got := AnswerFrom(mcp.InputResponseMap{approvals.ElicitationInputKey: &mcp.ElicitResult{Action: "accept",
		Content: map[string]any{"decision": "approve", "reason": "checked"}}})
	if got == nil || *got != (approvals.Answer{Action: "accept", Decision: "approve", Reason: "checked"}) {
		t.Errorf("answer %+v", got)
	}
	// Values of the wrong type read as "", which approvals refuses.
	got = AnswerFrom(mcp.InputResponseMap{approvals.ElicitationInputKey: &mcp.ElicitResult{Action: "accept",
		Content: map[string]any{"decision": true, "reason": 7}}})
	if got == nil || got.Decision != "" || got.Reason != "" {
		t.Errorf("non-string answer %+v", got)
	}
	if AnswerFrom(nil) != nil || AnswerFrom(mcp.InputResponseMap{"other": &mcp.ElicitResult{Action: "accept"}}) != nil ||
		AnswerFrom(mcp.InputResponseMap{approvals.ElicitationInputKey: (*mcp.ElicitResult)(nil)}) != nil {
		t.Error("a missing answer must be nil")
	}
}

func TestDeclaredWithoutSession(t *testing.T) {
	if Declared(nil) {
		t.Error("no session declared elicitation")
	}
}
