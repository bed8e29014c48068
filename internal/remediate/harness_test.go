package remediate

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
	"github.com/dataworkers/dw/internal/warehouses"
)

// day is the incident's day, a Tuesday; the bad hour is 14:00.
var (
	day = time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	bad = day.Add(14 * time.Hour)
)

// fixture is one team as a new user would set it up: a real DuckDB file
// as the warehouse, a SQLite store, one domain owned by one person (the
// login running the test, so the terminal channel can decide as them).
type fixture struct {
	t      *testing.T
	ctx    context.Context
	cfg    *config.Config
	clk    *clock.Fake
	db     *store.DB
	whPath string
	env    *Env
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	home := t.TempDir()
	t.Setenv("DW_HOME", home)
	whPath := filepath.Join(home, "wh.duckdb")
	cfg, err := config.Parse("dw.yaml", []byte(fmt.Sprintf(`home: %s
warehouses:
  - {name: wh, kind: duckdb, path: %q}
people:
  - {id: pat, name: Pat Owner, os_users: [%q]}
domains:
  - {name: shop, assets: ["duckdb://*"], owners: [pat], autonomy: L2}
`, home, whPath, config.CurrentOSUser())))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(bad.Add(65 * time.Minute))
	db, err := store.OpenSQLite(ctx, filepath.Join(home, "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var opened []warehouse.Warehouse
	t.Cleanup(func() {
		for _, w := range opened {
			w.Close()
		}
	})
	open := func(ctx context.Context, name string) (warehouse.Warehouse, error) {
		wc, err := cfg.Warehouse(name)
		if err != nil {
			return nil, err
		}
		w, err := warehouses.Open(ctx, cfg, wc, clk)
		if err == nil {
			opened = append(opened, w)
		}
		return w, err
	}
	g := lineage.New(db, clk)
	svc := &incidents.Service{DB: db, Clock: clk, Graph: incidents.LineageGraph(g), OpenWarehouse: open}
	env := &Env{DB: db, Config: cfg, Clock: clk, Incidents: svc, Approvals: approvals.New(db, cfg, clk, nil), Warehouse: open,
		Agent: "dw-incidents", Tool: "remediate"}
	f := &fixture{t: t, ctx: ctx, cfg: cfg, clk: clk, db: db, whPath: whPath, env: env}
	return f
}

// exec runs statements on the warehouse file as the team's pipeline would.
func (f *fixture) exec(stmts ...string) {
	f.t.Helper()
	w, err := duckdb.OpenWrite(f.ctx, f.whPath, 30*time.Second)
	if err != nil {
		f.t.Fatal(err)
	}
	defer func(w *sql.DB) { w.Close() }(w)
	w.SetMaxOpenConns(1)
	for _, s := range stmts {
		if _, err := w.ExecContext(f.ctx, s); err != nil {
			f.t.Fatalf("%s: %v", s, err)
		}
	}
}

func (f *fixture) checksEnv() checks.Env {
	f.t.Helper()
	w, err := f.env.Warehouse(f.ctx, "wh")
	if err != nil {
		f.t.Fatal(err)
	}
	return checks.Env{DB: f.db, Warehouse: w, Clock: f.clk, Agent: "dw-quality", Tool: "set_quality_expectations"}
}

func (f *fixture) expect(table string, e checks.Expectations) {
	f.t.Helper()
	if _, err := checks.SetExpectations(f.ctx, f.checksEnv(), checks.ExpectationsRequest{Table: table, Expectations: e}); err != nil {
		f.t.Fatal(err)
	}
}

// incident opens an incident from the symptoms, diagnoses it and sends
// the proposals; each is approved by its approver unless leftOpen.
func (f *fixture) incident(symptoms []incidents.Symptom, props ...approvals.NewProposal) (string, []*approvals.Proposal) {
	f.t.Helper()
	rep, err := f.env.Incidents.ReportSymptoms(f.ctx, incidents.ReportParams{Symptoms: symptoms, Actor: "dw-quality"})
	if err != nil {
		f.t.Fatal(err)
	}
	if len(rep.Incidents) != 1 {
		f.t.Fatalf("symptoms opened %d incidents, want 1", len(rep.Incidents))
	}
	id := rep.Incidents[0].ID
	if _, err := f.env.Incidents.Diagnose(f.ctx, incidents.DiagnoseParams{IncidentID: id}); err != nil {
		f.t.Fatal(err)
	}
	var ids []string
	var out []*approvals.Proposal
	for _, np := range props {
		np.IncidentID, np.Proposer = id, "dw-incidents"
		p, err := f.env.Approvals.Propose(f.ctx, np)
		if err != nil {
			f.t.Fatal(err)
		}
		ids = append(ids, p.ID)
		out = append(out, p)
	}
	if _, err := f.env.Incidents.MarkProposed(f.ctx, id, ids, "dw-incidents"); err != nil {
		f.t.Fatal(err)
	}
	return id, out
}

func (f *fixture) approve(p *approvals.Proposal) {
	f.t.Helper()
	by, err := approvals.OSUserDecider(f.cfg, approvals.ChannelTerminal, config.CurrentOSUser())
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.env.Approvals.Decide(f.ctx, p.ID, by, approvals.VerdictApprove, "checked"); err != nil {
		f.t.Fatal(err)
	}
}

// hold is a proposal people carry out themselves.
func hold(target string) approvals.NewProposal {
	return approvals.NewProposal{Kind: approvals.KindHold, What: "Pause the downstream sync until the table is fixed", Why: "it reads the bad rows",
		Targets: []string{target}, Undo: "resume the sync"}
}

func (f *fixture) verify(id string) *Result {
	f.t.Helper()
	res, err := Verify(f.ctx, f.env, Params{IncidentID: id, Note: "fixed"})
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}
