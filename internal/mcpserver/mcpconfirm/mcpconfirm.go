// Package mcpconfirm translates the approval confirmation form between
// approvals' plain types and the MCP protocol: the form request a tool
// returns as an input request, the client's declared capability, and the
// answer that comes back on the retry. It is transport code, so the domain
// package approvals never imports the MCP SDK.
package mcpconfirm

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/approvals"
)

// Params is the MCP form request for f: its message and a flat object
// schema of string fields, the only shape form-mode elicitation allows.
func Params(f approvals.Form) *mcp.ElicitParams {
	props := make(map[string]any, len(f.Fields))
	required := []string{}
	for _, fd := range f.Fields {
		p := map[string]any{"type": "string", "title": fd.Title, "description": fd.Description}
		if len(fd.Enum) > 0 {
			p["enum"] = fd.Enum
		}
		props[fd.Name] = p
		if fd.Required {
			required = append(required, fd.Name)
		}
	}
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: f.Message,
		RequestedSchema: map[string]any{
			"type":       "object",
			"properties": props,
			"required":   required,
		},
	}
}

// InputRequests is the tool result's input request map asking f.
func InputRequests(f approvals.Form) mcp.InputRequestMap {
	return mcp.InputRequestMap{approvals.ElicitationInputKey: Params(f)}
}

// Declared reports whether the client of a session declared, in
// initialize, that it can show a form (the elicitation capability with
// form mode, or with no mode named, which means form).
func Declared(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return false
	}
	e := ip.Capabilities.Elicitation
	return e.Form != nil || e.URL == nil
}

// AnswerFrom finds the answer to the approval question in a retry's input
// responses; nil when the client sent none. A field that came back as
// anything but a string reads as "", which approvals refuses.
func AnswerFrom(responses mcp.InputResponseMap) *approvals.Answer {
	r, ok := responses[approvals.ElicitationInputKey].(*mcp.ElicitResult)
	if !ok || r == nil {
		return nil
	}
	return Answer(r)
}

// Answer is r in approvals' terms.
func Answer(r *mcp.ElicitResult) *approvals.Answer {
	if r == nil {
		return nil
	}
	decision, _ := r.Content[approvals.FieldDecision].(string)
	reason, _ := r.Content[approvals.FieldReason].(string)
	return &approvals.Answer{Action: r.Action, Decision: decision, Reason: reason}
}
