package main

import (
	"context"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/approvals"
)

// TestApprovalsShowAndListShowTheBoundAction: dw approvals show prints
// each bound field on its own line and list prints them all on the
// proposal's row; notes are labelled as allowing nothing.
func TestApprovalsShowAndListShowTheBoundAction(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		action, err := approvals.NewActionSpec(approvals.SystemAirflow, "sync_metered_usage_to_stripe", "airflow://dag/sync_metered_usage_to_stripe",
			approvals.ActionLocation{Instance: "https://airflow.internal"}, map[string]any{"conf": map[string]any{"date": "2026-03-10"}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := h.service().Propose(context.Background(), approvals.NewProposal{
			IncidentID: "INC-1", Kind: approvals.KindRerun, What: "Rerun the Stripe sync", Why: "egress is null",
			Targets: []string{action.Asset}, Undo: "void the invoices", Proposer: "dw-incidents", Action: action,
			Details: map[string]any{"target": "evil_dag"},
		})
		if err != nil {
			t.Fatal(err)
		}
		out, _, code := h.dw("bob", "approvals", "show", p.ID)
		if code != 0 {
			t.Fatalf("show: exit %d\n%s", code, out)
		}
		lines := map[string]bool{}
		for _, l := range strings.Split(out, "\n") {
			lines[strings.TrimSpace(l)] = true
		}
		for _, f := range p.Action.Fields() {
			if !lines[f.Name+": "+f.Value] {
				t.Errorf("show lacks the line %q:\n%s", f.Name+": "+f.Value, out)
			}
		}
		if !strings.Contains(out, "(notes only: they allow nothing)") {
			t.Errorf("notes not labelled:\n%s", out)
		}
		out, _, code = h.dw("bob", "approvals", "list")
		if code != 0 {
			t.Fatalf("list: exit %d\n%s", code, out)
		}
		var row string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, p.ID) {
				row = l
			}
		}
		for _, f := range p.Action.Fields() {
			if !strings.Contains(row, " "+f.Name+"="+f.Value) && !strings.Contains(row, "  "+f.Name+"="+f.Value) {
				t.Errorf("list row lacks %s=%s:\n%s", f.Name, f.Value, row)
			}
		}
	})
}
