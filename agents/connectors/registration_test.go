package connectors

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/registry/registrytest"
)

// The registration workflow (refusals, the stop, autonomy, retries, two
// processes racing) is tested in internal/schemaregister; these tests hold
// the adapter: decoding, the wiring of clients and store, and the answer's
// shape.

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
		if out.Change == nil || out.Change.ID != c.ID || out.Change.Key != c.Key || !out.Change.Created || !out.Change.At.Equal(c.At) {
			t.Errorf("answer's change %+v, recorded %+v", out.Change, c)
		}
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
