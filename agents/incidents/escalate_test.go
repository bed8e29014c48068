package incidents

import (
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/incidents"
)

// A fix that does not fix: the Stripe DAG is held but nothing repairs the
// table, so the re-check finds egress_bytes still null and the incident
// goes to the approver with the evidence; it is never verified.
func TestRemediateEscalatesWhenTheCheckStillFails(t *testing.T) {
	s := newStory(t, "billing")
	ctx, h := s.ctx, s.h
	id := openBilling(s)
	if _, _, err := h.diagnose(ctx, DiagnoseIn{Incident: id}); err != nil {
		t.Fatal(err)
	}
	hold := billingProposals(t, s)[0]
	prop, _, err := h.propose(ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{hold}})
	if err != nil {
		t.Fatal(err)
	}
	pid := prop.Proposals[0].ID
	s.decide(pid, "bea", approvals.VerdictApprove)
	s.clk.Set(s.tl.Verify)

	rem, summary, err := h.remediate(ctx, RemediateIn{Incident: id})
	if err != nil {
		t.Fatal(err)
	}
	if rem.Verified || rem.Status != "escalated" || len(rem.EscalatedTo) != 1 || rem.EscalatedTo[0] != "bea" {
		t.Fatalf("remediate = verified %v, status %s, escalated to %v; want escalated to bea", rem.Verified, rem.Status, rem.EscalatedTo)
	}
	a := rem.Assertions[0]
	if a.Passed || !strings.Contains(a.Checked, "null_rate(egress_bytes) on usage.usage_hourly in warehouse demo") ||
		!strings.Contains(a.Observed, "egress_bytes null in") || a.Expected != "null in at most 0% of rows" {
		t.Errorf("assertion = %+v", a)
	}
	contained(t, "summary", summary, "NOT verified", "escalated to Bea Lindqvist (bea)", "FAIL")
	inc, err := s.env().svc.GetIncident(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if inc.Status != incidents.StatusEscalated || inc.Verification == nil || inc.Verification.Verified || !inc.VerifiedAt.IsZero() {
		t.Errorf("incident %s, verification %+v", inc.Status, inc.Verification)
	}
	rec, _, err := h.getReceipt(ctx, ReceiptIn{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	last := rec.Entries[len(rec.Entries)-1]
	if last.Kind != EntryVerification || last.Facts["verified"] != false || !strings.HasPrefix(last.Facts["summary"].(string), "escalated to bea") {
		t.Errorf("last receipt entry = %+v", last)
	}
	// An escalated incident cannot be closed as fixed.
	if _, _, err := h.closeIncident(ctx, CloseIn{Incident: id}); err == nil {
		t.Error("closed an escalated incident")
	}
}

// A rejected fix cannot be verified, and a proposal waiting for its
// approver blocks verification; nothing changes in either case.
func TestRemediateNeedsAnApprovedFix(t *testing.T) {
	s := newStory(t, "billing")
	ctx, h := s.ctx, s.h
	id := openBilling(s)
	_, _, err := h.remediate(ctx, RemediateIn{Incident: id})
	wantErr(t, err, "is open", "no approved fix to verify")
	if _, _, err := h.diagnose(ctx, DiagnoseIn{Incident: id}); err != nil {
		t.Fatal(err)
	}
	prop, _, err := h.propose(ctx, ProposeIn{Incident: id, Proposals: billingProposals(t, s)[:1]})
	if err != nil {
		t.Fatal(err)
	}
	s.decide(prop.Proposals[0].ID, "bea", approvals.VerdictReject)
	_, _, err = h.remediate(ctx, RemediateIn{Incident: id})
	wantErr(t, err, "no approved proposal", "nothing was changed")
	out, _, err := h.getIncident(ctx, IncidentIn{Incident: id})
	if err != nil {
		t.Fatal(err)
	}
	if out.Incident.Status != incidents.StatusProposed || out.Proposals[0].State != "rejected" || out.Proposals[0].DecidedBy != "bea" {
		t.Errorf("incident %s, proposals %+v", out.Incident.Status, out.Proposals)
	}
	if len(out.Assertions) != 1 || out.Assertions[0].Column != "egress_bytes" {
		t.Errorf("assertions %+v", out.Assertions)
	}
}

// Bad proposals are refused before any is sent: a schema version without
// its schema, a hash that is not the schema's, a target in no domain, an
// undo that names no way back.
func TestProposeRefusesBadInputAndSendsNothing(t *testing.T) {
	s := newStory(t, "billing")
	ctx, h := s.ctx, s.h
	id := openBilling(s)
	good := billingProposals(t, s)
	_, _, err := h.propose(ctx, ProposeIn{Incident: id, Proposals: good[:1]})
	wantErr(t, err, "is open", "diagnosis first")
	if _, _, err := h.diagnose(ctx, DiagnoseIn{Incident: id}); err != nil {
		t.Fatal(err)
	}
	noSchema := good[1]
	noSchema.Schema = ""
	wrongHash := good[1]
	wrongHash.Details = map[string]any{"schema_sha256": "00ff"}
	twoSubjects := good[1]
	twoSubjects.Targets = []string{"schema://api-usage-value", "schema://usage-hourly-value"}
	nowhere := good[0]
	nowhere.Targets = []string{"stripe://invoices"}
	noUndo := good[0]
	noUndo.Undo = "none"
	badTable := good[2]
	badTable.Details = map[string]any{"verify_table": "usage.usage hourly"}
	schemaOnHold := good[0]
	schemaOnHold.Schema = "{}"
	for _, c := range []struct {
		bad  ProposalSpec
		want string
	}{
		{noSchema, "needs schema"},
		{wrongHash, "is not the schema's canonical SHA-256"},
		{twoSubjects, "exactly one subject"},
		{nowhere, "stripe://invoices is in no domain"},
		{noUndo, "names no way back"},
		{badTable, "details.verify_table"},
		{schemaOnHold, "apply only to kind schema_version"},
	} {
		_, _, err := h.propose(ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{good[0], c.bad}})
		wantErr(t, err, "proposals[1]", c.want)
	}
	list, err := approvals.New(s.db(), s.cfg, s.clk, nil).List(ctx, approvals.Filter{IncidentID: id})
	if err != nil || len(list) != 0 {
		t.Errorf("proposals sent despite bad input: %+v, %v", list, err)
	}
	inc, _ := s.env().svc.GetIncident(ctx, id)
	if inc.Status != incidents.StatusDiagnosed {
		t.Errorf("status %s after refused proposals, want diagnosed", inc.Status)
	}
	_, _, err = h.propose(ctx, ProposeIn{Incident: "INC-9", Proposals: good[:1]})
	wantErr(t, err, `no incident "INC-9"`, "closest: "+id)
}
