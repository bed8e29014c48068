package incidents

import (
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/demo/tables"
	"github.com/dataworkers/dw/internal/remediate"
)

// A proposal's "replaces A with B" is checked, recorded as the canonical
// pair in the details the approval seals, and said first in the why the
// approver reads; a pair written into details by hand, or given twice, is
// refused before anything is sent.
func TestProposeReplacementIsCheckedAndSealed(t *testing.T) {
	s := newStory(t, "billing")
	ctx, h := s.ctx, s.h
	id := openBilling(s)
	if _, _, err := h.diagnose(ctx, DiagnoseIn{Incident: id}); err != nil {
		t.Fatal(err)
	}
	spec := func() ProposalSpec {
		return ProposalSpec{Kind: "diff", What: "dbt: fct_billable_egress reads usage.usage_hourly_v2",
			Targets: []string{"dbt://model.billing.fct_billable_egress"}, Undo: "point the dbt source back to usage.usage_hourly",
			Replaces: &remediate.ReplacementSpec{Asset: "DuckDB://usage.USAGE_HOURLY", With: "duckdb://usage.usage_hourly_v2"}}
	}
	// The replacement does not exist yet: refused, nothing sent.
	_, _, err := h.propose(ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{spec()}})
	wantErr(t, err, "replaces.with duckdb://usage.usage_hourly_v2", "create the replacement first")

	forged := spec()
	forged.Replaces = nil
	forged.Details = map[string]any{"replacement": map[string]any{"asset": "duckdb://usage.usage_hourly", "with": "duckdb://usage.usage_hourly_v2"}}
	_, _, err = h.propose(ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{forged}})
	wantErr(t, err, "details.replacement", "give replaces {asset, with} instead")
	twice := spec()
	twice.Details = map[string]any{"verify_table": "usage.usage_hourly_v2"}
	_, _, err = h.propose(ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{twice}})
	wantErr(t, err, "not both")
	if inc, _ := s.env().svc.GetIncident(ctx, id); len(inc.Proposals) != 0 {
		t.Fatalf("refused proposals were sent: %v", inc.Proposals)
	}

	if err := tables.ApplyBillingFix(ctx, s.whPath, s.tl.Fix); err != nil {
		t.Fatal(err)
	}
	out, _, err := h.propose(ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{spec()}})
	if err != nil {
		t.Fatal(err)
	}
	p := out.Proposals[0]
	r, _ := p.Details["replacement"].(map[string]any)
	if r["asset"] != "duckdb://usage.usage_hourly" || r["with"] != "duckdb://usage.usage_hourly_v2" {
		t.Errorf("details.replacement %v, want the canonical pair", p.Details["replacement"])
	}
	if !strings.HasPrefix(p.Why, "Replaces duckdb://usage.usage_hourly with duckdb://usage.usage_hourly_v2: once approved") {
		t.Errorf("why %q does not open with the replacement", p.Why)
	}
	stored, err := s.env().apv.Get(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sr, _ := stored.Details["replacement"].(map[string]any); sr["with"] != "duckdb://usage.usage_hourly_v2" || stored.Why != p.Why {
		t.Errorf("stored proposal details %v why %q", stored.Details, stored.Why)
	}
}
