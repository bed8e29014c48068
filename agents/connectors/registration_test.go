package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/registry/registrytest"
)

// gate is the approval gate's world: the billing registry, the agent, and
// the approvals service people decide through.
type gate struct {
	*env
	reg *registrytest.Server
	svc *approvals.Service
}

func newGate(t *testing.T, storeYAML string) *gate {
	t.Helper()
	r := billingRegistry(t)
	e := newEnv(t, storeYAML+registryYAML(r.URL()))
	return &gate{env: e, reg: r, svc: e.approvals()}
}

func sha(t *testing.T, text string) string {
	t.Helper()
	c, err := compat.Canonicalize(compat.Avro, compat.Schema{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return c.SHA256
}

// propose asks, as dw-incidents does, to register a schema whose hash is
// bound in the proposal's action.
func (g *gate) propose(boundSHA string) *approvals.Proposal {
	g.t.Helper()
	action, err := approvals.SchemaVersionAction(g.reg.URL(), subject, "AVRO", boundSHA)
	if err != nil {
		g.t.Fatal(err)
	}
	p, err := g.svc.Propose(context.Background(), approvals.NewProposal{
		Action:     action,
		IncidentID: "INC-BILLING-1",
		Kind:       approvals.KindSchemaVersion,
		What:       "Register api-usage-value version 13 restoring response_bytes beside response_kib",
		Why:        "version 12 dropped response_bytes, which usage-hourly-rollup sums",
		Targets:    []string{"schema://" + subject},
		Undo:       "soft-delete version 13 (DELETE /subjects/api-usage-value/versions/13)",
		Details:    map[string]any{DetailSubject: subject, DetailSchemaSHA: boundSHA, DetailSchemaType: "AVRO"},
		Proposer:   "dw-incidents",
	})
	if err != nil {
		g.t.Fatalf("propose: %v", err)
	}
	return p
}

// decide records the named approver's decision at the terminal: the OS
// user running the test is mapped to olivia in the config.
func (g *gate) decide(p *approvals.Proposal, v approvals.Verdict, reason string) {
	g.t.Helper()
	by, err := approvals.OSUserDecider(g.cfg, approvals.ChannelTerminal, config.CurrentOSUser())
	if err != nil {
		g.t.Fatal(err)
	}
	if _, err := g.svc.Decide(context.Background(), p.ID, by, v, reason); err != nil {
		g.t.Fatalf("decide %s: %v", v, err)
	}
}

func (g *gate) register(schema, proposalID string) (*RegisterSchemaOut, string, error) {
	return g.h.registerSchema(context.Background(), RegisterSchemaIn{Subject: subject, Schema: schema, ProposalID: proposalID})
}

// steps lists the step entries of a receipt.
func (g *gate) steps(receiptID string) []approvals.Entry {
	g.t.Helper()
	es, err := approvals.Entries(context.Background(), g.db(), receiptID)
	if err != nil {
		g.t.Fatal(err)
	}
	var out []approvals.Entry
	for _, e := range es {
		if e.Kind == approvals.EntryStep {
			out = append(out, e)
		}
	}
	return out
}

// nothingWritten proves a refused call left the registry, the change log
// and the receipt as they were.
func (g *gate) nothingWritten(p *approvals.Proposal) {
	g.t.Helper()
	if got := g.reg.Versions(subject); !slices.Equal(got, []int{11, 12}) {
		g.t.Errorf("registry versions %v, want [11 12]", got)
	}
	if n := g.reg.Hits("POST /subjects/" + subject + "/versions"); n != 0 {
		g.t.Errorf("%d registration requests reached the registry", n)
	}
	if cs := g.changes("schema://" + subject); len(cs) != 0 {
		g.t.Errorf("change log written: %+v", cs)
	}
	if st := g.steps(p.ReceiptID); len(st) != 0 {
		g.t.Errorf("receipt steps written: %+v", st)
	}
}

func TestRegisterRefusedWithoutApproval(t *testing.T) {
	engines(t, func(t *testing.T, sy string) {
		g := newGate(t, sy)
		p := g.propose(sha(t, v13))
		_, _, err := g.register(v13, p.ID)
		wantErr(t, err, "dispatch refused", "is pending", "awaiting olivia",
			fmt.Sprintf("ask Olivia Owner (olivia) to approve proposal %s: dw approve %s", p.ID, p.ID), "Nothing was registered")
		if !approvals.IsRefusal(err) {
			t.Errorf("not a refusal: %T", err)
		}
		g.nothingWritten(p)

		_, _, err = g.register(v13, "")
		wantErr(t, err, "proposal_id is empty")
		// One character off the real id (never the id itself).
		last := "Z"
		if strings.HasSuffix(p.ID, "Z") {
			last = "Y"
		}
		_, _, err = g.register(v13, p.ID[:len(p.ID)-1]+last)
		wantErr(t, err, "no proposal", "closest: "+p.ID)
		g.nothingWritten(p)
	})
}

func TestRegisterRefusedForADifferentSchema(t *testing.T) {
	engines(t, func(t *testing.T, sy string) {
		g := newGate(t, sy)
		// Approved for a version 13 that only restores response_bytes.
		other := strings.Replace(v13, `{"name":"response_kib","type":["null","double"],"default":null},`, "", 1)
		p := g.propose(sha(t, other))
		g.decide(p, approvals.VerdictApprove, "")
		_, _, err := g.register(v13, p.ID)
		wantErr(t, err, "dispatch refused", "approved for a different schema", sha(t, v13)[:12], "needs its own approval")
		g.nothingWritten(p)

		// Approved for the right schema but on another subject.
		q, err := g.svc.Propose(context.Background(), approvals.NewProposal{
			Kind: approvals.KindSchemaVersion, What: "register member-balances-value v2", Why: "x", Undo: "soft-delete v2",
			Targets: []string{"schema://member-balances-value"}, Proposer: "dw-incidents",
			Details: map[string]any{DetailSchemaSHA: sha(t, v13)},
		})
		if err != nil {
			t.Fatal(err)
		}
		g.decide(q, approvals.VerdictApprove, "")
		_, _, err = g.register(v13, q.ID)
		wantErr(t, err, "approves changes to schema://member-balances-value, not to schema://api-usage-value")

		// A proposal that binds no schema authorises none.
		r, err := g.svc.Propose(context.Background(), approvals.NewProposal{
			Kind: approvals.KindSchemaVersion, What: "register a new api-usage-value", Why: "x", Undo: "soft-delete it",
			Targets: []string{"schema://" + subject}, Proposer: "dw-incidents",
		})
		if err != nil {
			t.Fatal(err)
		}
		g.decide(r, approvals.VerdictApprove, "")
		_, _, err = g.register(v13, r.ID)
		wantErr(t, err, "binds no schema", DetailSchemaSHA)
		g.nothingWritten(p)
	})
}

func TestRegisterRefusedWhenExpiredOrRejected(t *testing.T) {
	engines(t, func(t *testing.T, sy string) {
		g := newGate(t, sy)
		p := g.propose(sha(t, v13))
		g.clk.Advance(2*time.Hour + time.Minute)
		_, _, err := g.register(v13, p.ID)
		wantErr(t, err, "dispatch refused", "is expired", "granted nothing", "propose it again")
		g.nothingWritten(p)

		q := g.propose(sha(t, v13))
		g.decide(q, approvals.VerdictReject, "restore bytes in the gateway instead")
		_, _, err = g.register(v13, q.ID)
		wantErr(t, err, "dispatch refused", "is rejected", `"restore bytes in the gateway instead"`)
		g.nothingWritten(q)
	})
}

func TestRegisterRefusedUnderOrgStop(t *testing.T) {
	engines(t, func(t *testing.T, sy string) {
		g := newGate(t, sy)
		p := g.propose(sha(t, v13))
		g.decide(p, approvals.VerdictApprove, "")
		if _, err := g.svc.Stop(context.Background(), "oncall", "billing pipeline frozen during the audit"); err != nil {
			t.Fatal(err)
		}
		_, _, err := g.register(v13, p.ID)
		wantErr(t, err, "dispatch refused", "org-wide stop", "billing pipeline frozen during the audit", "dw resume")
		g.nothingWritten(p)

		// Lifted by a person at the terminal, the same approval now runs.
		by, err := approvals.OSUserDecider(g.cfg, approvals.ChannelTerminal, config.CurrentOSUser())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.svc.Resume(context.Background(), by, "audit done"); err != nil {
			t.Fatal(err)
		}
		out, _, err := g.register(v13, p.ID)
		if err != nil || !out.Registered || out.Version != 13 {
			t.Fatalf("after resume: %+v %v", out, err)
		}
	})
}

// TestRegisterUnderApproval registers version 13 under its approval,
// records the change and the receipt step, marks the proposal executed,
// and does nothing twice when called again.
func TestRegisterUnderApproval(t *testing.T) {
	engines(t, func(t *testing.T, sy string) {
		ctx := context.Background()
		g := newGate(t, sy)
		p := g.propose(sha(t, v13))
		g.decide(p, approvals.VerdictApprove, "restores the field the rollup sums")
		g.clk.Advance(5 * time.Minute)

		// Another spelling of the same schema: same canonical form.
		var doc any
		if err := json.Unmarshal([]byte(v13), &doc); err != nil {
			t.Fatal(err)
		}
		respelled, _ := json.MarshalIndent(doc, "", "    ")
		out, summary, err := g.register(string(respelled), p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !out.Registered || out.Version != 13 || out.ID == 0 || out.ProposalState != "executed" || out.SHA256 != sha(t, v13) ||
			!strings.Contains(out.Basis, "approved by olivia via terminal") || out.StepSeq == 0 {
			t.Errorf("registration: %+v", out)
		}
		if !strings.Contains(summary, "registered api-usage-value version 13") {
			t.Errorf("summary: %s", summary)
		}
		if got := g.reg.Versions(subject); !slices.Equal(got, []int{11, 12, 13}) {
			t.Errorf("registry versions %v", got)
		}

		changes := g.changes("schema://" + subject)
		if len(changes) != 1 {
			t.Fatalf("changes: %+v", changes)
		}
		c := changes[0]
		if c.Key != "schema-registry:api-usage-value:13" || !c.At.Equal(g.clk.Now()) || c.Details["proposal"] != p.ID ||
			!strings.Contains(c.Actor, "on behalf of olivia") || !strings.Contains(c.Summary, "added response_bytes") {
			t.Errorf("change: %+v", c)
		}

		steps := g.steps(p.ReceiptID)
		if len(steps) != 1 || steps[0].Actor != Name {
			t.Fatalf("steps: %+v", steps)
		}
		var payload struct {
			Proposal    string         `json:"proposal"`
			Description string         `json:"description"`
			Details     map[string]any `json:"details"`
		}
		if err := json.Unmarshal(steps[0].Payload, &payload); err != nil {
			t.Fatal(err)
		}
		if payload.Proposal != p.ID || payload.Details["version"] != float64(13) || !strings.Contains(payload.Description, "on behalf of olivia") {
			t.Errorf("step: %+v", payload)
		}
		if v, err := approvals.Verify(ctx, g.db(), p.ReceiptID); err != nil || !v.OK {
			t.Errorf("receipt chain: %+v %v", v, err)
		}
		got, err := g.svc.Get(ctx, p.ID)
		if err != nil || got.State != approvals.StateExecuted {
			t.Fatalf("proposal after: %+v %v", got, err)
		}

		// Again: the existing version, no second registration or step.
		posts := g.reg.Hits("POST /subjects/" + subject + "/versions")
		again, _, err := g.register(v13, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if again.Registered || again.Version != 13 || again.ID != out.ID || !strings.Contains(again.Note, "nothing was done twice") {
			t.Errorf("second call: %+v", again)
		}
		if n := len(g.steps(p.ReceiptID)); n != 1 {
			t.Errorf("%d steps after a second call", n)
		}
		if g.reg.Hits("POST /subjects/"+subject+"/versions") != posts || len(g.changes("schema://"+subject)) != 1 {
			t.Error("a second call wrote again")
		}
		// The executed approval does not stretch to another schema.
		_, _, err = g.register(v11, p.ID)
		wantErr(t, err, "approved for a different schema")
	})
}

// TestRegisterFinishesAfterAnInterruptedCall: the registry already holds
// the approved schema (a call that registered and then failed); the retry
// confirms it, records one step saying nothing new was registered, and
// executes the proposal.
func TestRegisterFinishesAfterAnInterruptedCall(t *testing.T) {
	engines(t, func(t *testing.T, sy string) {
		g := newGate(t, sy)
		p := g.propose(sha(t, v13))
		g.decide(p, approvals.VerdictApprove, "")
		if _, err := g.reg.SeedVersions(subject, "", registrytest.Seeded{Schema: v13}); err != nil {
			t.Fatal(err)
		}
		out, _, err := g.register(v13, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if out.Registered || out.Version != 13 || out.ProposalState != "executed" || out.StepSeq == 0 {
			t.Errorf("%+v", out)
		}
		steps := g.steps(p.ReceiptID)
		if len(steps) != 1 || !strings.Contains(string(steps[0].Payload), "registered nothing new") {
			t.Errorf("steps: %+v", steps)
		}
		if n := g.reg.Hits("POST /subjects/" + subject + "/versions"); n != 0 {
			t.Errorf("%d registrations", n)
		}
	})
}

// TestRegisterRefusedByTheRegistry: an approved schema the registry finds
// incompatible is not registered and the approval stays unexecuted.
func TestRegisterRefusedByTheRegistry(t *testing.T) {
	engines(t, func(t *testing.T, sy string) {
		g := newGate(t, sy)
		// Making usage_id a long breaks BACKWARD against version 12.
		bad := strings.Replace(v13, `{"name":"usage_id","type":"string"}`, `{"name":"usage_id","type":"long"}`, 1)
		p := g.propose(sha(t, bad))
		g.decide(p, approvals.VerdictApprove, "")
		_, _, err := g.register(bad, p.ID)
		wantErr(t, err, "did not register", "409", "stays approved")
		got, _ := g.svc.Get(context.Background(), p.ID)
		if got.State != approvals.StateApproved || len(g.steps(p.ReceiptID)) != 0 || len(g.changes("schema://"+subject)) != 0 {
			t.Errorf("state %s, steps or changes written", got.State)
		}
		if v := g.reg.Versions(subject); !slices.Equal(v, []int{11, 12}) {
			t.Errorf("versions %v", v)
		}
	})
}

// TestRegisterRefusedInAnObservingDomain: an approval does not let an
// agent act in a domain its owner set to L1 (observe).
func TestRegisterRefusedInAnObservingDomain(t *testing.T) {
	engines(t, func(t *testing.T, sy string) {
		g := newGate(t, sy)
		p := g.propose(sha(t, v13))
		g.decide(p, approvals.VerdictApprove, "")
		by, err := approvals.OSUserDecider(g.cfg, approvals.ChannelTerminal, config.CurrentOSUser())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.svc.SetAutonomy(context.Background(), "streaming", "L1", by, "registry migration this week"); err != nil {
			t.Fatal(err)
		}
		_, _, err = g.register(v13, p.ID)
		wantErr(t, err, "dispatch refused", "L1 (observe)", "dw autonomy set streaming L2")
		g.nothingWritten(p)
	})
}

// TestTwoProcessesRegisterOnce: two dw-connectors (separate store
// handles, as two MCP clients' processes have) race to carry out one
// approval; the registry sees one registration, the receipt one step, and
// every answer names the same version.
func TestTwoProcessesRegisterOnce(t *testing.T) {
	engines(t, func(t *testing.T, sy string) {
		g := newGate(t, sy)
		other := deps.New(Name, g.cfg, g.clk, nil)
		t.Cleanup(func() { other.Close() })
		procs := []*handlers{g.h, {d: other}}
		p := g.propose(sha(t, v13))
		g.decide(p, approvals.VerdictApprove, "")
		const callers = 10
		var wg sync.WaitGroup
		outs := make([]*RegisterSchemaOut, callers)
		errs := make([]error, callers)
		for i := range callers {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				outs[i], _, errs[i] = procs[i%2].registerSchema(context.Background(), RegisterSchemaIn{Subject: subject, Schema: v13, ProposalID: p.ID})
			}(i)
		}
		wg.Wait()
		answered := 0
		for i := range callers {
			var busy *approvals.BusyError
			switch {
			case errs[i] == nil:
				answered++
				if outs[i].Version != 13 {
					t.Errorf("caller %d: %+v", i, outs[i])
				}
			case !errors.As(errs[i], &busy):
				t.Errorf("caller %d: %v", i, errs[i])
			}
		}
		if answered == 0 {
			t.Fatal("no caller carried the approval out")
		}
		if n := g.reg.Hits("POST /subjects/" + subject + "/versions"); n != 1 {
			t.Errorf("%d registrations reached the registry, want 1", n)
		}
		if n := len(g.steps(p.ReceiptID)); n != 1 {
			t.Errorf("%d receipt steps, want 1", n)
		}
		// Each process's retry answers with the same version and step.
		for _, h := range procs {
			again, _, err := h.registerSchema(context.Background(), RegisterSchemaIn{Subject: subject, Schema: v13, ProposalID: p.ID})
			if err != nil || again.Registered || again.Version != 13 || again.StepSeq == 0 || !strings.Contains(again.Note, "nothing was done twice") {
				t.Errorf("retry: %+v, %v", again, err)
			}
		}
	})
}

// TestRegisterRefusedAtAnotherRegistry: an approval for the same subject
// and schema at another registry does not register here.
func TestRegisterRefusedAtAnotherRegistry(t *testing.T) {
	engines(t, func(t *testing.T, sy string) {
		g := newGate(t, sy)
		action, err := approvals.SchemaVersionAction("http://staging-registry.internal:8081", subject, "AVRO", sha(t, v13))
		if err != nil {
			t.Fatal(err)
		}
		p, err := g.svc.Propose(context.Background(), approvals.NewProposal{Kind: approvals.KindSchemaVersion, What: "register v13 on staging",
			Why: "x", Undo: "soft-delete it", Targets: []string{"schema://" + subject}, Proposer: "dw-incidents", Action: action})
		if err != nil {
			t.Fatal(err)
		}
		g.decide(p, approvals.VerdictApprove, "")
		_, _, err = g.register(v13, p.ID)
		wantErr(t, err, "dispatch refused", "approved instance http://staging-registry.internal:8081, requested "+g.reg.URL())
		g.nothingWritten(p)
	})
}
