package schemaregister

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/registry/registrytest"
	"github.com/dataworkers/dw/internal/schemahistory"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// The billing story's subject: version 11 carries an optional
// response_bytes, version 12 drops it for response_kib, version 13
// restores it beside response_kib.
const (
	subject = "api-usage-value"
	v11     = `{"type":"record","name":"ApiUsage","namespace":"com.acme.usage","fields":[
		{"name":"usage_id","type":"string"},{"name":"account_id","type":"string"},
		{"name":"response_bytes","type":["null","long"],"default":null}]}`
	v12 = `{"type":"record","name":"ApiUsage","namespace":"com.acme.usage","fields":[
		{"name":"usage_id","type":"string"},{"name":"account_id","type":"string"},
		{"name":"response_kib","type":["null","double"],"default":null}]}`
	v13 = `{"type":"record","name":"ApiUsage","namespace":"com.acme.usage","fields":[
		{"name":"usage_id","type":"string"},{"name":"account_id","type":"string"},
		{"name":"response_kib","type":["null","double"],"default":null},
		{"name":"response_bytes","type":["null","long"],"default":null}]}`
	agent = "dw-connectors"
)

var t0 = time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)

// world is a registration's surroundings: the billing registry, a store
// (opened again by open, as a second process would), the approvals
// service people decide through, and a Registrar on one store handle.
type world struct {
	t    testing.TB
	cfg  *config.Config
	clk  *clock.Fake
	reg  *registrytest.Server
	db   *store.DB
	svc  *approvals.Service
	open func() *store.DB
	r    *Registrar
}

// engines runs fn against a fresh SQLite store and a fresh PostgreSQL
// schema; open opens another handle to the same store.
func engines(t *testing.T, fn func(t *testing.T, open func(testing.TB) *store.DB)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "dw.db")
		fn(t, func(tb testing.TB) *store.DB {
			return opened(tb, func() (*store.DB, error) { return store.OpenSQLite(context.Background(), path) })
		})
	})
	t.Run("postgres", func(t *testing.T) {
		url := storetest.PostgresSchemaURL(t)
		fn(t, func(tb testing.TB) *store.DB {
			return opened(tb, func() (*store.DB, error) { return store.OpenPostgres(context.Background(), url) })
		})
	})
}

func opened(tb testing.TB, open func() (*store.DB, error)) *store.DB {
	tb.Helper()
	db, err := open()
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func newWorld(t *testing.T, open func(testing.TB) *store.DB) *world {
	t.Helper()
	reg := registrytest.New(t)
	if _, err := reg.SeedVersions(subject, compat.Backward,
		registrytest.Seeded{Schema: v11, Version: 11}, registrytest.Seeded{Schema: v12, Version: 12}); err != nil {
		t.Fatal(err)
	}
	reg.Seed("member-balances-value", "", `{"type":"record","name":"Balance","fields":[{"name":"member_id","type":"string"},{"name":"points","type":"long"}]}`)
	home := t.TempDir()
	cfg, err := config.Parse("dw.yaml", []byte(fmt.Sprintf(`home: %s
people:
  - {id: olivia, name: Olivia Owner, os_users: [%q]}
  - {id: carol, name: Carol Other, os_users: [carol-is-not-a-login]}
domains:
  - name: streaming
    assets: ["schema://*"]
    autonomy: L2
    owners: [olivia]
    copy: [carol]
    approval_expiry: 2h
schema_registry:
  url: %s
  timeout: 2s
`, home, config.CurrentOSUser(), reg.URL())))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	w := &world{t: t, cfg: cfg, clk: clock.NewFake(t0), reg: reg, open: func() *store.DB { return open(t) }}
	w.db = w.open()
	w.svc = approvals.New(w.db, cfg, w.clk, nil)
	w.r = w.registrar(w.db)
	return w
}

// registrar is a Registrar over one store handle, as one agent process
// holds.
func (w *world) registrar(db *store.DB) *Registrar {
	rc, err := registry.New(registry.Config{URL: w.reg.URL(), Timeout: 2 * time.Second})
	if err != nil {
		w.t.Fatal(err)
	}
	return &Registrar{
		Sources: schemahistory.Sources{
			Registry:  func() (*registry.Client, error) { return rc, nil },
			ChangeLog: func(context.Context) (*changelog.Log, error) { return &changelog.Log{DB: db, Clock: w.clk}, nil },
			Clock:     w.clk,
			Source:    agent,
		},
		Approvals: func(context.Context) (*approvals.Service, error) { return approvals.New(db, w.cfg, w.clk, nil), nil },
		Store:     func(context.Context) (*store.DB, error) { return db, nil },
		Config:    w.cfg,
	}
}

func sha(t testing.TB, text string) string {
	t.Helper()
	c, err := compat.Canonicalize(compat.Avro, compat.Schema{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return c.SHA256
}

// propose asks, as dw-incidents does, to register a schema whose hash is
// bound in the proposal's action.
func (w *world) propose(boundSHA string) *approvals.Proposal {
	w.t.Helper()
	action, err := approvals.SchemaVersionAction(w.reg.URL(), subject, "AVRO", boundSHA)
	if err != nil {
		w.t.Fatal(err)
	}
	p, err := w.svc.Propose(context.Background(), approvals.NewProposal{
		Action: action, IncidentID: "INC-BILLING-1", Kind: approvals.KindSchemaVersion,
		What: "Register api-usage-value version 13 restoring response_bytes beside response_kib",
		Why:  "version 12 dropped response_bytes, which usage-hourly-rollup sums", Targets: []string{Asset(subject)},
		Undo: "soft-delete version 13", Proposer: "dw-incidents",
	})
	if err != nil {
		w.t.Fatalf("propose: %v", err)
	}
	return p
}

// decider is the OS user running the test, olivia in the config.
func (w *world) decider() approvals.Decider {
	w.t.Helper()
	by, err := approvals.OSUserDecider(w.cfg, approvals.ChannelTerminal, config.CurrentOSUser())
	if err != nil {
		w.t.Fatal(err)
	}
	return by
}

func (w *world) decide(p *approvals.Proposal, v approvals.Verdict, reason string) {
	w.t.Helper()
	if _, err := w.svc.Decide(context.Background(), p.ID, w.decider(), v, reason); err != nil {
		w.t.Fatalf("decide %s: %v", v, err)
	}
}

func (w *world) register(schema, proposalID string) (*Result, error) {
	return w.r.Register(context.Background(), Request{Subject: subject, Schema: schema, ProposalID: proposalID})
}

// steps lists the step entries of a receipt.
func (w *world) steps(receiptID string) []approvals.Entry {
	w.t.Helper()
	es, err := approvals.Entries(context.Background(), w.db, receiptID)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []approvals.Entry
	for _, e := range es {
		if e.Kind == approvals.EntryStep {
			out = append(out, e)
		}
	}
	return out
}

func (w *world) changes() []changelog.Change {
	w.t.Helper()
	list, err := (&changelog.Log{DB: w.db, Clock: w.clk}).ListChanges(context.Background(), changelog.ChangeFilter{Asset: Asset(subject)})
	if err != nil {
		w.t.Fatal(err)
	}
	return list.Changes
}

// nothingWritten proves a refused call left the registry, the change log
// and the receipt as they were.
func (w *world) nothingWritten(p *approvals.Proposal) {
	w.t.Helper()
	if got := w.reg.Versions(subject); !slices.Equal(got, []int{11, 12}) {
		w.t.Errorf("registry versions %v, want [11 12]", got)
	}
	if n := w.reg.Hits("POST /subjects/" + subject + "/versions"); n != 0 {
		w.t.Errorf("%d registration requests reached the registry", n)
	}
	if cs := w.changes(); len(cs) != 0 {
		w.t.Errorf("change log written: %+v", cs)
	}
	if st := w.steps(p.ReceiptID); len(st) != 0 {
		w.t.Errorf("receipt steps written: %+v", st)
	}
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

// TestRequestRefusedBeforeAnyClient: a malformed request is refused
// without building a client or reading the store.
func TestRequestRefusedBeforeAnyClient(t *testing.T) {
	opened := false
	r := &Registrar{
		Sources:   schemahistory.Sources{Registry: func() (*registry.Client, error) { opened = true; return nil, errors.New("no registry") }},
		Approvals: func(context.Context) (*approvals.Service, error) { opened = true; return nil, errors.New("no store") },
	}
	for _, c := range []struct {
		req  Request
		want string
	}{
		{Request{Schema: v13, ProposalID: "P-1"}, "subject is empty"},
		{Request{Subject: subject, Schema: "  ", ProposalID: "P-1"}, "schema is empty"},
		{Request{Subject: subject, Schema: v13}, "proposal_id is empty"},
		{Request{Subject: subject, Schema: v13, ProposalID: "P-1", SchemaType: "XML"}, "XML"},
		{Request{Subject: subject, Schema: `{"type":"record"`, ProposalID: "P-1"}, "does not parse as AVRO"},
	} {
		_, err := r.Register(context.Background(), c.req)
		wantErr(t, err, c.want)
	}
	if opened {
		t.Error("a malformed request built a client or opened the store")
	}
}

func TestRegisterUnderApproval(t *testing.T) {
	engines(t, func(t *testing.T, open func(testing.TB) *store.DB) {
		ctx := context.Background()
		w := newWorld(t, open)
		p := w.propose(sha(t, v13))
		w.decide(p, approvals.VerdictApprove, "restores the field the rollup sums")
		w.clk.Advance(5 * time.Minute)

		// Another spelling of the same schema: same canonical form.
		var doc any
		if err := json.Unmarshal([]byte(v13), &doc); err != nil {
			t.Fatal(err)
		}
		respelled, _ := json.MarshalIndent(doc, "", "    ")
		out, err := w.register(string(respelled), p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !out.Registered || out.Version != 13 || out.ID == 0 || out.ProposalState != "executed" || out.SHA256 != sha(t, v13) ||
			!strings.Contains(out.Basis, "approved by olivia via terminal") || out.StepSeq == 0 || out.Change == nil || !out.Change.Created {
			t.Errorf("registration: %+v", out)
		}
		if got := w.reg.Versions(subject); !slices.Equal(got, []int{11, 12, 13}) {
			t.Errorf("registry versions %v", got)
		}
		changes := w.changes()
		if len(changes) != 1 {
			t.Fatalf("changes: %+v", changes)
		}
		c := changes[0]
		if c.ID != out.Change.ID || c.Key != "schema-registry:api-usage-value:13" || !c.At.Equal(w.clk.Now()) || c.Details["proposal"] != p.ID ||
			c.Details["approved_by"] != "olivia" || c.Actor != "dw-connectors on behalf of olivia (proposal "+p.ID+")" ||
			c.Details["previous_version"] != "12" || c.Details["sha256"] != sha(t, v13) {
			t.Errorf("change: %+v", c)
		}
		if len(c.Fields) != 1 || c.Fields[0].Name != "response_bytes" || c.Fields[0].How != changelog.FieldAdded {
			t.Errorf("fields: %+v", c.Fields)
		}

		steps := w.steps(p.ReceiptID)
		if len(steps) != 1 || steps[0].Actor != agent || steps[0].Seq != out.StepSeq {
			t.Fatalf("steps: %+v", steps)
		}
		var payload struct {
			Proposal string         `json:"proposal"`
			Details  map[string]any `json:"details"`
		}
		if err := json.Unmarshal(steps[0].Payload, &payload); err != nil {
			t.Fatal(err)
		}
		if payload.Proposal != p.ID || payload.Details["version"] != float64(13) || payload.Details["tool"] != Tool ||
			payload.Details["registered"] != true || payload.Details["change_id"] != float64(out.Change.ID) {
			t.Errorf("step: %+v", payload)
		}
		if v, err := approvals.Verify(ctx, w.db, p.ReceiptID); err != nil || !v.OK {
			t.Errorf("receipt chain: %+v %v", v, err)
		}

		// Again: the recorded result, no second registration or step.
		again, err := w.register(v13, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if again.Registered || again.Version != 13 || again.ID != out.ID || again.StepSeq != out.StepSeq ||
			again.Change == nil || again.Change.ID != out.Change.ID || again.ProposalState != "executed" {
			t.Errorf("second call: %+v", again)
		}
		if n := w.reg.Hits("POST /subjects/" + subject + "/versions"); n != 1 {
			t.Errorf("%d registrations", n)
		}
		if len(w.steps(p.ReceiptID)) != 1 || len(w.changes()) != 1 {
			t.Error("a second call wrote again")
		}
		// The executed approval does not stretch to another schema.
		_, err = w.register(v11, p.ID)
		wantErr(t, err, "approved for a different schema")
	})
}

func TestRegisterRefusedWithoutApproval(t *testing.T) {
	engines(t, func(t *testing.T, open func(testing.TB) *store.DB) {
		w := newWorld(t, open)
		p := w.propose(sha(t, v13))
		_, err := w.register(v13, p.ID)
		wantErr(t, err, "dispatch refused", "is pending",
			fmt.Sprintf("ask Olivia Owner (olivia) to approve proposal %s: dw approve %s", p.ID, p.ID), "Nothing was registered")
		if !approvals.IsRefusal(err) {
			t.Errorf("not a refusal: %T", err)
		}
		w.nothingWritten(p)
	})
}

func TestRegisterRefusedForADifferentSchema(t *testing.T) {
	engines(t, func(t *testing.T, open func(testing.TB) *store.DB) {
		w := newWorld(t, open)
		other := strings.Replace(v13, `{"name":"response_kib","type":["null","double"],"default":null},`, "", 1)
		p := w.propose(sha(t, other))
		w.decide(p, approvals.VerdictApprove, "")
		_, err := w.register(v13, p.ID)
		wantErr(t, err, "dispatch refused", "approved for a different schema", sha(t, v13)[:12], "needs its own approval")
		w.nothingWritten(p)

		// Approved on another subject.
		q, err := w.svc.Propose(context.Background(), approvals.NewProposal{
			Kind: approvals.KindSchemaVersion, What: "register member-balances-value v2", Why: "x", Undo: "soft-delete v2",
			Targets: []string{"schema://member-balances-value"}, Proposer: "dw-incidents",
		})
		if err != nil {
			t.Fatal(err)
		}
		w.decide(q, approvals.VerdictApprove, "")
		_, err = w.register(v13, q.ID)
		wantErr(t, err, "approves changes to schema://member-balances-value, not to schema://api-usage-value")

		// A proposal that binds no schema authorises none, whatever its
		// details say.
		r, err := w.svc.Propose(context.Background(), approvals.NewProposal{
			Kind: approvals.KindSchemaVersion, What: "register a new api-usage-value", Why: "x", Undo: "soft-delete it",
			Targets: []string{Asset(subject)}, Proposer: "dw-incidents", Details: map[string]any{"schema_sha256": sha(t, v13)},
		})
		if err != nil {
			t.Fatal(err)
		}
		w.decide(r, approvals.VerdictApprove, "")
		_, err = w.register(v13, r.ID)
		wantErr(t, err, "binds no schema", "schema_sha256")
		w.nothingWritten(p)
	})
}

func TestRegisterRefusedWhenExpiredOrRejected(t *testing.T) {
	engines(t, func(t *testing.T, open func(testing.TB) *store.DB) {
		w := newWorld(t, open)
		p := w.propose(sha(t, v13))
		w.clk.Advance(2*time.Hour + time.Minute)
		_, err := w.register(v13, p.ID)
		wantErr(t, err, "dispatch refused", "is expired", "granted nothing", "propose it again")
		w.nothingWritten(p)

		q := w.propose(sha(t, v13))
		w.decide(q, approvals.VerdictReject, "restore bytes in the gateway instead")
		_, err = w.register(v13, q.ID)
		wantErr(t, err, "dispatch refused", "is rejected", `"restore bytes in the gateway instead"`)
		w.nothingWritten(q)
	})
}

func TestRegisterRefusedUnderOrgStop(t *testing.T) {
	engines(t, func(t *testing.T, open func(testing.TB) *store.DB) {
		w := newWorld(t, open)
		p := w.propose(sha(t, v13))
		w.decide(p, approvals.VerdictApprove, "")
		if _, err := w.svc.Stop(context.Background(), "oncall", "billing pipeline frozen during the audit"); err != nil {
			t.Fatal(err)
		}
		_, err := w.register(v13, p.ID)
		wantErr(t, err, "dispatch refused", "org-wide stop", "billing pipeline frozen during the audit", "dw resume",
			"the approval of "+p.ID+" stays valid")
		w.nothingWritten(p)

		if _, err := w.svc.Resume(context.Background(), w.decider(), "audit done"); err != nil {
			t.Fatal(err)
		}
		out, err := w.register(v13, p.ID)
		if err != nil || !out.Registered || out.Version != 13 {
			t.Fatalf("after resume: %+v %v", out, err)
		}
	})
}

// TestRegisterFinishesAfterAnInterruptedCall: the registry already holds
// the approved schema; the retry confirms it, records one step saying
// nothing new was registered, and executes the proposal.
func TestRegisterFinishesAfterAnInterruptedCall(t *testing.T) {
	engines(t, func(t *testing.T, open func(testing.TB) *store.DB) {
		w := newWorld(t, open)
		p := w.propose(sha(t, v13))
		w.decide(p, approvals.VerdictApprove, "")
		if _, err := w.reg.SeedVersions(subject, "", registrytest.Seeded{Schema: v13}); err != nil {
			t.Fatal(err)
		}
		out, err := w.register(v13, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if out.Registered || out.Version != 13 || out.ProposalState != "executed" || out.StepSeq == 0 {
			t.Errorf("%+v", out)
		}
		steps := w.steps(p.ReceiptID)
		if len(steps) != 1 || !strings.Contains(string(steps[0].Payload), "registered nothing new") {
			t.Errorf("steps: %+v", steps)
		}
		if cs := w.changes(); len(cs) != 1 || !strings.Contains(cs[0].Details["registered_at"], "found already registered") {
			t.Errorf("changes: %+v", cs)
		}
		if n := w.reg.Hits("POST /subjects/" + subject + "/versions"); n != 0 {
			t.Errorf("%d registrations", n)
		}
	})
}

// TestRegisterRefusedByTheRegistry: an approved schema the registry finds
// incompatible is not registered and the approval stays unexecuted and
// unclaimed, so a corrected call is not blocked.
func TestRegisterRefusedByTheRegistry(t *testing.T) {
	engines(t, func(t *testing.T, open func(testing.TB) *store.DB) {
		w := newWorld(t, open)
		bad := strings.Replace(v13, `{"name":"usage_id","type":"string"}`, `{"name":"usage_id","type":"long"}`, 1)
		p := w.propose(sha(t, bad))
		w.decide(p, approvals.VerdictApprove, "")
		_, err := w.register(bad, p.ID)
		wantErr(t, err, "did not register", "409", "stays approved")
		got, _ := w.svc.Get(context.Background(), p.ID)
		if got.State != approvals.StateApproved || len(w.steps(p.ReceiptID)) != 0 || len(w.changes()) != 0 {
			t.Errorf("state %s, steps or changes written", got.State)
		}
		// The claim was let go: the same call is refused by the registry
		// again, not as busy.
		_, err = w.register(bad, p.ID)
		var busy *approvals.BusyError
		if errors.As(err, &busy) {
			t.Errorf("claim kept after a failed registration: %v", err)
		}
		wantErr(t, err, "did not register")
	})
}

// TestRegisterRefusedInAnObservingDomain: an approval does not let an
// agent act in a domain its owner set to L1 (observe).
func TestRegisterRefusedInAnObservingDomain(t *testing.T) {
	engines(t, func(t *testing.T, open func(testing.TB) *store.DB) {
		w := newWorld(t, open)
		p := w.propose(sha(t, v13))
		w.decide(p, approvals.VerdictApprove, "")
		if _, err := w.svc.SetAutonomy(context.Background(), "streaming", "L1", w.decider(), "registry migration this week"); err != nil {
			t.Fatal(err)
		}
		_, err := w.register(v13, p.ID)
		wantErr(t, err, "dispatch refused", "L1 (observe)", "dw autonomy set streaming L2")
		w.nothingWritten(p)
	})
}

// TestRegisterRefusedAtAnotherRegistry: an approval for the same subject
// and schema at another registry does not register here.
func TestRegisterRefusedAtAnotherRegistry(t *testing.T) {
	engines(t, func(t *testing.T, open func(testing.TB) *store.DB) {
		w := newWorld(t, open)
		action, err := approvals.SchemaVersionAction("http://staging-registry.internal:8081", subject, "AVRO", sha(t, v13))
		if err != nil {
			t.Fatal(err)
		}
		p, err := w.svc.Propose(context.Background(), approvals.NewProposal{Kind: approvals.KindSchemaVersion, What: "register v13 on staging",
			Why: "x", Undo: "soft-delete it", Targets: []string{Asset(subject)}, Proposer: "dw-incidents", Action: action})
		if err != nil {
			t.Fatal(err)
		}
		w.decide(p, approvals.VerdictApprove, "")
		_, err = w.register(v13, p.ID)
		wantErr(t, err, "dispatch refused", "approved instance http://staging-registry.internal:8081, requested "+w.reg.URL())
		w.nothingWritten(p)
	})
}

// TestTwoProcessesRegisterOnce: two registrars on separate store handles
// (two agent processes) race to carry out one approval; the registry sees
// one registration, the receipt one step, and every answer names the same
// version.
func TestTwoProcessesRegisterOnce(t *testing.T) {
	engines(t, func(t *testing.T, open func(testing.TB) *store.DB) {
		w := newWorld(t, open)
		procs := []*Registrar{w.r, w.registrar(w.open())}
		p := w.propose(sha(t, v13))
		w.decide(p, approvals.VerdictApprove, "")
		const callers = 10
		var wg sync.WaitGroup
		outs := make([]*Result, callers)
		errs := make([]error, callers)
		for i := range callers {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				outs[i], errs[i] = procs[i%2].Register(context.Background(), Request{Subject: subject, Schema: v13, ProposalID: p.ID})
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
		if n := w.reg.Hits("POST /subjects/" + subject + "/versions"); n != 1 {
			t.Errorf("%d registrations reached the registry, want 1", n)
		}
		if n := len(w.steps(p.ReceiptID)); n != 1 {
			t.Errorf("%d receipt steps, want 1", n)
		}
		for _, r := range procs {
			again, err := r.Register(context.Background(), Request{Subject: subject, Schema: v13, ProposalID: p.ID})
			if err != nil || again.Registered || again.Version != 13 || again.StepSeq == 0 {
				t.Errorf("retry: %+v, %v", again, err)
			}
		}
	})
}
