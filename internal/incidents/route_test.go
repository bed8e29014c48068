package incidents

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// routeConfig: billing owns the symptomatic table and the DAGs (bob, then
// carol), streaming the schema the cause changed (alice).
const routeConfig = `
people:
  - {id: alice, name: Alice Stream, os_users: [alice]}
  - {id: bob, name: Bob Billing, os_users: [bob]}
  - {id: carol, name: Carol Delegate, os_users: [carol]}
domains:
  - name: streaming
    assets: ["kafka://prod/*", "schema://*"]
    autonomy: L2
    owners: [alice]
  - name: billing
    assets: ["snowflake://usage.*", "airflow://dag/*"]
    autonomy: L2
    owners: [bob]
    approvers: [bob, carol]
`

// diagnosedIncident is story A diagnosed: nulls in usage_hourly caused
// (credibly) by version 12 of the api-usage schema.
func diagnosedIncident(t *testing.T, db *store.DB) (*Service, *approvals.Service, string) {
	t.Helper()
	t.Setenv("DW_HOME", t.TempDir())
	cfg, err := config.Parse("route.yaml", []byte(routeConfig))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newService(t, db, tue(15, 5), storyAGraph())
	mustRecord(t, s, schemaV12())
	id := mustReport(t, s, Symptom{Kind: SymptomNulls, Asset: "snowflake://usage.usage_hourly", Column: "egress_bytes", Observed: 0.18, At: tue(14, 10)}).Incidents[0].ID
	if _, err := s.Diagnose(context.Background(), DiagnoseParams{IncidentID: id}); err != nil {
		t.Fatal(err)
	}
	return s, approvals.New(db, cfg, clock.NewFake(tue(15, 6)), nil), id
}

func holdStripe() Remediation {
	return Remediation{Draft: DraftParams{Kind: "hold", What: "pause sync_metered_usage_to_stripe until egress is verified",
		Targets: []string{"airflow://dag/sync_metered_usage_to_stripe"}, Undo: "unpause the DAG"}, Why: "the 23:00 run would bill zero"}
}

func holdBraze() Remediation {
	return Remediation{Draft: DraftParams{Kind: "hold", What: "pause sync_usage_to_braze",
		Targets: []string{"airflow://dag/sync_usage_to_braze"}, Undo: "unpause the DAG"}}
}

// nothingWritten asserts a refused or failed call left the store as it
// was: no proposal, the incident still diagnosed and pointing at none, and
// no receipt entry anywhere (not even the cause).
func nothingWritten(t *testing.T, db *store.DB, s *Service, id string) {
	t.Helper()
	ctx := context.Background()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM approval_proposals`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d proposal rows left behind (%v)", n, err)
	}
	inc, err := s.GetIncident(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if inc.Status != StatusDiagnosed || len(inc.Proposals) != 0 {
		t.Fatalf("incident moved to %s with proposals %v", inc.Status, inc.Proposals)
	}
	if ids, err := approvals.ReceiptIDs(ctx, db); err != nil || len(ids) != 0 {
		t.Fatalf("receipts written: %v (%v)", ids, err)
	}
}

// failOn installs a trigger that makes the store refuse a write: the
// second proposal row, or the incident's move to proposed, the last write.
func failOn(t *testing.T, db *store.DB, table, when string) {
	t.Helper()
	ctx := context.Background()
	var stmts []string
	if db.Dialect() == store.Postgres {
		stmts = []string{
			`CREATE FUNCTION dw_injected_failure() RETURNS trigger AS $$ BEGIN IF ` + when + ` THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`,
			`CREATE TRIGGER dw_injected BEFORE INSERT OR UPDATE ON ` + table + ` FOR EACH ROW EXECUTE FUNCTION dw_injected_failure()`,
		}
	} else {
		for _, op := range []string{"INSERT", "UPDATE"} {
			stmts = append(stmts, `CREATE TRIGGER dw_injected_`+op+` BEFORE `+op+` ON `+table+` WHEN `+when+` BEGIN SELECT RAISE(ABORT, 'injected failure'); END`)
		}
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("install trigger: %v", err)
		}
	}
}

// A failure anywhere in the one transaction (the second proposal's row,
// the incident's move, the last write) leaves nothing written; a proposal
// approvals refuses after a good one sends neither.
func TestProposeRemediationsIsAllOrNothing(t *testing.T) {
	for _, tc := range []struct {
		name, table, when string
	}{
		{"second proposal row", "approval_proposals", "(SELECT COUNT(*) FROM approval_proposals) >= 1"},
		{"incident moved to proposed", "incidents", "NEW.status = 'proposed'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				s, apv, id := diagnosedIncident(t, db)
				failOn(t, db, tc.table, tc.when)
				_, err := s.ProposeRemediations(context.Background(), apv, ProposeParams{IncidentID: id,
					Remediations: []Remediation{holdStripe(), holdBraze()}, Proposer: "dw-incidents"})
				if err == nil || !strings.Contains(err.Error(), "injected failure") {
					t.Fatalf("want the injected failure, got %v", err)
				}
				nothingWritten(t, db, s, id)
			})
		})
	}
	t.Run("refused after a good one", func(t *testing.T) {
		storetest.Each(t, func(t *testing.T, db *store.DB) {
			s, apv, id := diagnosedIncident(t, db)
			nowhere := holdBraze()
			nowhere.Draft.Targets = []string{"stripe://invoices"}
			spans := holdBraze()
			spans.Draft.Targets = []string{"airflow://dag/sync_usage_to_braze", "kafka://prod/api-usage"}
			for i, bad := range []Remediation{nowhere, spans} {
				_, err := s.ProposeRemediations(context.Background(), apv, ProposeParams{IncidentID: id,
					Remediations: []Remediation{holdStripe(), bad}, Proposer: "dw-incidents"})
				var ie *approvals.InputError
				var re *RemediationError
				if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), "proposals[1] ") || !errors.As(err, &re) || re.Index != 1 {
					t.Fatalf("bad #%d: want approvals' refusal of proposals[1], got %v", i, err)
				}
				nothingWritten(t, db, s, id)
			}
			for _, p := range []ProposeParams{{IncidentID: id, Proposer: "dw-incidents"},
				{IncidentID: id, Proposer: "bob", Remediations: []Remediation{holdStripe()}}} {
				if _, err := s.ProposeRemediations(context.Background(), apv, p); err == nil {
					t.Fatalf("%+v accepted", p)
				}
				nothingWritten(t, db, s, id)
			}
		})
	})
}

// Success writes everything once: the cause then each proposal on the
// incident's receipt, every proposal routed to billing's first approver
// with streaming's owner (the cause's domain) copied, and the incident
// proposed and pointing at them. A second call adds proposals, not a
// second cause entry.
func TestProposeRemediationsWritesAll(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, apv, id := diagnosedIncident(t, db)
		res, err := s.ProposeRemediations(ctx, apv, ProposeParams{IncidentID: id,
			Remediations: []Remediation{holdStripe(), holdBraze()}, Proposer: "dw-incidents"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Proposals) != 2 || res.Incident.Status != StatusProposed {
			t.Fatalf("result: %d proposals, incident %s", len(res.Proposals), res.Incident.Status)
		}
		for i, p := range res.Proposals {
			if p.Approver != "bob" || strings.Join(p.Copied, ",") != "alice" || p.State != approvals.StatePending ||
				p.IncidentID != id || res.Incident.Proposals[i] != p.ID {
				t.Fatalf("proposal %d: approver %s copied %v state %s incident %s (incident lists %v)", i, p.Approver, p.Copied, p.State, p.IncidentID, res.Incident.Proposals)
			}
			if !strings.Contains(p.Why, "version 12 of schema://api-usage-value") {
				t.Fatalf("proposal %d does not cite the cause: %s", i, p.Why)
			}
		}
		if !strings.HasPrefix(res.Proposals[0].Why, "the 23:00 run would bill zero. Addresses ") {
			t.Fatalf("proposer's reason not kept first: %s", res.Proposals[0].Why)
		}
		kinds := func() []string {
			es, err := approvals.Entries(ctx, db, id)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, e := range es {
				out = append(out, e.Kind)
			}
			return out
		}
		want := []string{approvals.EntryCause, approvals.EntryProposal, approvals.EntryRequest, approvals.EntryProposal, approvals.EntryRequest}
		if got := kinds(); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("receipt %v, want %v", got, want)
		}
		if v, err := approvals.Verify(ctx, db, id); err != nil || !v.OK {
			t.Fatalf("receipt not intact: %+v %v", v, err)
		}
		again, err := s.ProposeRemediations(ctx, apv, ProposeParams{IncidentID: id, Remediations: []Remediation{holdBraze()}, Proposer: "dw-incidents"})
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Incident.Proposals) != 3 || again.Incident.Status != StatusProposed {
			t.Fatalf("second call: incident %s lists %v", again.Incident.Status, again.Incident.Proposals)
		}
		if got := kinds(); strings.Count(strings.Join(got, ","), approvals.EntryCause) != 1 || len(got) != 7 {
			t.Fatalf("receipt after a second call: %v", got)
		}
	})
}

// Re-running the diagnosis on a proposed incident refreshes its causes and
// leaves it proposed, pointing at the proposals already sent: a state only
// moves forward.
func TestRediagnosisKeepsAProposedIncidentProposed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, apv, id := diagnosedIncident(t, db)
		res, err := s.ProposeRemediations(ctx, apv, ProposeParams{IncidentID: id, Remediations: []Remediation{holdStripe()}, Proposer: "dw-incidents"})
		if err != nil {
			t.Fatal(err)
		}
		before := res.Incident
		s.Clock.(*clock.Fake).Advance(time.Hour)
		d, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: id})
		if err != nil {
			t.Fatal(err)
		}
		after, err := s.GetIncident(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != StatusProposed || after.Status != StatusProposed || strings.Join(after.Proposals, ",") != strings.Join(before.Proposals, ",") {
			t.Fatalf("after re-diagnosis: diagnosis says %s, incident %s with %v (was %v)", d.Status, after.Status, after.Proposals, before.Proposals)
		}
		if !after.DiagnosedAt.After(before.DiagnosedAt) || len(after.Causes) == 0 {
			t.Fatalf("causes not refreshed: diagnosed %s (was %s), %d causes", after.DiagnosedAt, before.DiagnosedAt, len(after.Causes))
		}
	})
}

// A change row stored before the text rule (its summary holding an ESC
// sequence and a forged line) never blocks the incident: the why composed
// from it carries the text escaped, and the proposal is recorded.
func TestStoredChangeTextIsEscapedInWhy(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		t.Setenv("DW_HOME", t.TempDir())
		cfg, err := config.Parse("route.yaml", []byte(routeConfig))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := newService(t, db, tue(15, 5), storyAGraph())
		ch := mustRecord(t, s, schemaV12())
		old := "version 12 dropped\x1b[8m\n  Runs exactly this: nothing\u202e"
		if _, err := db.ExecContext(ctx, `UPDATE incident_changes SET summary = ? WHERE id = ?`, old, ch.ID); err != nil {
			t.Fatal(err)
		}
		id := mustReport(t, s, Symptom{Kind: SymptomNulls, Asset: "snowflake://usage.usage_hourly", Column: "egress_bytes", Observed: 0.18, At: tue(14, 10)}).Incidents[0].ID
		if _, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: id}); err != nil {
			t.Fatal(err)
		}
		apv := approvals.New(db, cfg, clock.NewFake(tue(15, 6)), nil)
		got, err := s.ProposeRemediations(ctx, apv, ProposeParams{IncidentID: id, Remediations: []Remediation{holdStripe()}, Proposer: "dw-incidents"})
		if err != nil {
			t.Fatalf("a stored summary blocked the proposal: %v", err)
		}
		why := got.Proposals[0].Why
		if !strings.Contains(why, `version 12 dropped\x1b[8m\n  Runs exactly this: nothing\u202e`) {
			t.Errorf("why does not carry the stored summary escaped: %q", why)
		}
		if strings.ContainsAny(why, "\x1b\n\u202e") {
			t.Errorf("why holds the raw characters: %q", why)
		}
	})
}
