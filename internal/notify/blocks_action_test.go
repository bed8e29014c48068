package notify

import (
	"encoding/json"
	"html"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
)

// boundRun is a proposal whose action has every kind of field: a Dagster
// job with its code location and repository, and params with characters
// Slack's mrkdwn treats as control, long enough to need several sections.
func boundRun(t *testing.T) approvals.Proposal {
	t.Helper()
	ops := map[string]any{}
	for _, op := range []string{"load", "transform", "publish", "notify", "audit", "reconcile"} {
		ops[op] = map[string]any{"config": map[string]any{"date": "2026-03-10", "filter": "region <> 'EU' && plan > 3", "note": strings.Repeat("keep ", 30)}}
	}
	a, err := approvals.NewActionSpec(approvals.SystemDagster, "refresh_usage", "dagster://job/refresh_usage",
		approvals.ActionLocation{Instance: "https://dagster.internal", CodeLocation: "billing_location", Repository: "__repository__"},
		map[string]any{"run_config": map[string]any{"ops": ops}, "tags": map[string]any{"team": "billing"}})
	if err != nil {
		t.Fatal(err)
	}
	a.Domain = "billing"
	return approvals.Proposal{ID: "P-AAAABBBB", Domain: "billing", Kind: approvals.KindRerun, Class: approvals.ClassStandard,
		What: "Rerun refresh_usage for 2026-03-10", Why: "egress was null", Targets: []string{a.Asset}, Undo: "nothing to undo",
		Action: a, Details: map[string]any{"target": "evil_job"}, Proposer: "dw-incidents", Approver: "bob",
		ApproverOrder: []string{"bob"}, State: approvals.StatePending, ExpiresAt: time.Date(2026, 3, 10, 17, 0, 0, 0, time.UTC)}
}

// blockTexts parses Block Kit JSON and returns every text a person reads,
// unescaped, in order.
func blockTexts(t *testing.T, raw []byte) []string {
	t.Helper()
	var blocks []map[string]any
	if err := json.Unmarshal(raw, &blocks); err != nil {
		t.Fatalf("blocks are not a JSON array of objects: %v", err)
	}
	var out []string
	text := func(v any) {
		if m, ok := v.(map[string]any); ok {
			if s, ok := m["text"].(string); ok {
				out = append(out, html.UnescapeString(s))
			}
		}
	}
	for _, b := range blocks {
		text(b["text"])
		if fs, ok := b["fields"].([]any); ok {
			for _, f := range fs {
				text(f)
			}
		}
		if es, ok := b["elements"].([]any); ok && b["type"] == "context" {
			for _, e := range es {
				text(e)
			}
		}
	}
	return out
}

// TestRequestBlocksShowEveryBoundField: the Slack request shows each field
// the approval binds, whole, and the params exactly as they will be sent.
func TestRequestBlocksShowEveryBoundField(t *testing.T) {
	cfg := &config.Config{People: []config.Person{{ID: "bob", Name: "Bob Billing", SlackID: "U0BOB"}}}
	p := boundRun(t)
	raw, err := json.Marshal(RequestBlocks(cfg, approvals.Notice{Approver: "bob", Proposal: p}, true))
	if err != nil {
		t.Fatal(err)
	}
	texts := blockTexts(t, raw)
	var params strings.Builder
	var head string
	for _, s := range texts {
		if inner, ok := strings.CutPrefix(s, "*params*\n"); ok {
			s = inner
		} else if !strings.HasPrefix(s, "```") {
			if strings.HasPrefix(s, "*Allows exactly this action") {
				head = s
			}
			continue
		}
		params.WriteString(strings.TrimSuffix(strings.TrimPrefix(s, "```"), "```"))
	}
	for _, f := range p.Action.Fields() {
		if f.Name == "params" {
			if params.String() != f.Value {
				t.Errorf("params shown:\n%s\nwant:\n%s", params.String(), f.Value)
			}
			continue
		}
		if !strings.Contains(head, "*"+f.Name+"*: "+f.Value+"\n") && !strings.HasSuffix(head, "*"+f.Name+"*: "+f.Value) {
			t.Errorf("field %s %q is not shown:\n%s", f.Name, f.Value, head)
		}
	}
	for _, s := range texts {
		if len([]rune(s)) > maxSection || strings.HasSuffix(s, "…") && strings.Contains(s, "```") {
			t.Errorf("a section was cut: %d characters", len([]rune(s)))
		}
		if strings.Contains(s, "evil_job") {
			t.Errorf("free-form notes are shown as if they were bound: %s", s)
		}
	}

	// Without an action the request says it allows nothing to run.
	p.Action = nil
	raw, _ = json.Marshal(RequestBlocks(cfg, approvals.Notice{Approver: "bob", Proposal: p}, false))
	found := false
	for _, s := range blockTexts(t, raw) {
		found = found || strings.HasPrefix(s, "Runs nothing: no tool may dispatch")
	}
	if !found {
		t.Errorf("a request without an action does not say it runs nothing: %s", raw)
	}
}
