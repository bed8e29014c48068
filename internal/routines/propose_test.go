package routines_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/demo/tables"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/packload"
	"github.com/dataworkers/dw/internal/routines"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouses"
)

// billingWatch is the billing pack as a team runs it (the warehouse in a
// DuckDB file, the graph and change log in a SQLite store, dw.yaml with
// the pack's people and domains) and a routine watching its usage table
// at 15:05, when the nulls are in: the run opens an incident and drafts a
// hold of the Stripe sync for bea (billing, L2).
type billingWatch struct {
	ctx context.Context
	db  *store.DB
	cfg *config.Config
	clk *clock.Fake
	r   *routines.Runner
}

func newBillingWatch(t *testing.T) *billingWatch {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)
	home := t.TempDir()
	t.Setenv("DW_HOME", home)
	path := filepath.Join(home, "demo.duckdb")
	cfg, err := config.Parse("dw.yaml", []byte(fmt.Sprintf("warehouses:\n  - {name: demo, kind: duckdb, path: %q}\n", path)))
	if err != nil {
		t.Fatal(err)
	}
	if err := tables.LoadWarehouse(ctx, path, "billing", now); err != nil {
		t.Fatal(err)
	}
	p, _, err := packload.Read("billing", now)
	if err != nil {
		t.Fatal(err)
	}
	cfg.People, cfg.Domains = p.People, p.Domains
	cfg.Routines = []config.Routine{{Name: "usage-billing", Cron: "5 * * * *",
		Checks: []config.RoutineCheck{{Table: "usage.usage_hourly", Period: "today", Bucket: "hour", HistoryDays: 21}}}}
	clk := clock.NewFake(now)
	db := storetest.SQLite(t)
	if _, err := packload.LoadStore(ctx, db, clk, p, "demo"); err != nil {
		t.Fatal(err)
	}
	var w warehouse.Warehouse
	t.Cleanup(func() {
		if w != nil {
			w.Close()
		}
	})
	open := func(ctx context.Context, name string) (warehouse.Warehouse, error) {
		if w == nil {
			wc, err := cfg.Warehouse(name)
			if err != nil {
				return nil, err
			}
			if w, err = warehouses.Open(ctx, cfg, wc, clk); err != nil {
				return nil, err
			}
		}
		return w, nil
	}
	r, err := routines.New(routines.Options{DB: db, Config: cfg, Graph: lineage.New(db, clk), Clock: clk, Warehouse: open, Log: benchLog, Parallel: 1, Watcher: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return &billingWatch{ctx: ctx, db: db, cfg: cfg, clk: clk, r: r}
}

// run runs the routine once and returns the run and the incident it opened.
func (b *billingWatch) run(t *testing.T) (*routines.Run, *incidents.Incident) {
	t.Helper()
	ran, err := b.r.RunDue(b.ctx, b.clk.Now().Truncate(time.Minute))
	if err != nil || len(ran) != 1 || len(ran[0].Incidents) != 1 || !ran[0].Incidents[0].Opened {
		t.Fatalf("run: %v %+v", err, ran)
	}
	inc, err := (&incidents.Service{DB: b.db, Clock: b.clk}).GetIncident(b.ctx, ran[0].Incidents[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return ran[0], inc
}

func (b *billingWatch) proposalRows(t *testing.T) []string {
	t.Helper()
	rows, err := b.db.QueryContext(b.ctx, `SELECT id FROM approval_proposals ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// The routine's hold is written with the incident's move to proposed:
// the stored proposal is the one the incident lists, and the incident's
// receipt reads the cause before the proposal.
func TestRoutineProposesThroughTheIncidentWorkflow(t *testing.T) {
	b := newBillingWatch(t)
	run, inc := b.run(t)
	var sent []routines.Proposal
	for _, p := range run.Proposals {
		if p.ID != "" {
			sent = append(sent, p)
		}
	}
	if len(sent) != 1 || sent[0].Target != "airflow://dag/sync_metered_usage_to_stripe" || sent[0].Approver != "bea" || sent[0].Incident != inc.ID {
		t.Fatalf("proposals %+v: want one hold of the Stripe sync for bea", run.Proposals)
	}
	rows := b.proposalRows(t)
	if inc.Status != incidents.StatusProposed || len(inc.Proposals) != 1 || inc.Proposals[0] != sent[0].ID || len(rows) != 1 || rows[0] != sent[0].ID {
		t.Fatalf("incident %s lists %v; stored proposals %v; run drafted %s", inc.Status, inc.Proposals, rows, sent[0].ID)
	}
	entries, err := approvals.Entries(b.ctx, b.db, inc.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range entries {
		kinds = append(kinds, e.Kind)
	}
	if len(kinds) < 2 || kinds[0] != approvals.EntryCause || kinds[1] != approvals.EntryProposal {
		t.Fatalf("receipt %v: want the cause, then the proposal", kinds)
	}
	p, err := approvals.New(b.db, b.cfg, b.clk, nil).Get(b.ctx, sent[0].ID)
	if err != nil || p.Proposer != "dw watch" || p.State != approvals.StatePending {
		t.Fatalf("proposal %+v %v: want a pending proposal from dw watch", p, err)
	}
}

// failWrites makes the store refuse the writes to table that match when,
// as a disk or constraint failure midway through the proposing would.
func failWrites(t *testing.T, db *store.DB, table, when string) {
	t.Helper()
	for _, op := range []string{"INSERT", "UPDATE"} {
		q := `CREATE TRIGGER dw_injected_` + op + ` BEFORE ` + op + ` ON ` + table + ` WHEN ` + when + ` BEGIN SELECT RAISE(ABORT, 'injected failure'); END`
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("install trigger: %v", err)
		}
	}
}

// A failure midway leaves nothing half-proposed: when the proposal's row
// or the incident's move to proposed fails, there is neither a proposal
// without its incident pointing at it nor an incident proposed without
// proposals, and the run says nothing was proposed.
func TestRoutineProposingIsAllOrNothing(t *testing.T) {
	for _, tc := range []struct{ name, table, when string }{
		{"the proposal's row", "approval_proposals", "1"},
		{"the incident's move to proposed", "incidents", "NEW.status = 'proposed'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBillingWatch(t)
			failWrites(t, b.db, tc.table, tc.when)
			run, inc := b.run(t)
			if rows := b.proposalRows(t); len(rows) != 0 {
				t.Fatalf("proposals %v stored for incident %s (%s)", rows, inc.ID, inc.Status)
			}
			if inc.Status != incidents.StatusDiagnosed || len(inc.Proposals) != 0 {
				t.Fatalf("incident %s is %s listing %v with no proposal stored", inc.ID, inc.Status, inc.Proposals)
			}
			if ids, err := approvals.ReceiptIDs(b.ctx, b.db); err != nil || len(ids) != 0 {
				t.Fatalf("receipts %v (%v) written for a proposal that was not", ids, err)
			}
			if len(run.Proposals) != 1 || run.Proposals[0].ID != "" || run.Proposals[0].Target != "airflow://dag/sync_metered_usage_to_stripe" {
				t.Fatalf("run records %+v: want the hold not drafted", run.Proposals)
			}
		})
	}
}

// One hold approvals refuses does not silence the others: a second
// scheduled outbound sync reads the table, in a domain that names no one
// who could approve it, so its hold is left out with approvals' reason and
// the Stripe hold is proposed alone, the incident pointing at it.
func TestRoutineLeavesOutARefusedHold(t *testing.T) {
	b := newBillingWatch(t)
	const hubspot = "airflow://dag/sync_usage_to_hubspot"
	if _, err := lineage.New(b.db, b.clk).RecordLineage(b.ctx, lineage.Note{Path: []string{"duckdb://usage.usage_hourly", hubspot},
		Assets: []lineage.NoteAsset{{ID: hubspot, Owner: "Hal Marketing", Tags: []string{"outbound"}, Schedule: &lineage.Schedule{Cron: "0 23 * * *"}}}}); err != nil {
		t.Fatal(err)
	}
	// First match wins: the sync is marketing's, which names no owners or
	// approvers, and its catalog owner is no configured person.
	b.cfg.Domains = append([]config.Domain{{Name: "marketing", Assets: []string{hubspot}, Autonomy: "L2"}}, b.cfg.Domains...)
	run, inc := b.run(t)
	byTarget := map[string]routines.Proposal{}
	for _, p := range run.Proposals {
		byTarget[p.Target] = p
	}
	stripe, refused := byTarget["airflow://dag/sync_metered_usage_to_stripe"], byTarget[hubspot]
	if stripe.ID == "" || stripe.Approver != "bea" || refused.ID != "" || len(run.Proposals) != 2 {
		t.Fatalf("run records %+v: want the Stripe hold drafted and the HubSpot hold not", run.Proposals)
	}
	if !strings.HasPrefix(refused.Note, "not drafted: domain marketing names no owners or approvers") {
		t.Fatalf("refused hold's note %q, want approvals' reason", refused.Note)
	}
	rows := b.proposalRows(t)
	if inc.Status != incidents.StatusProposed || len(inc.Proposals) != 1 || inc.Proposals[0] != stripe.ID || len(rows) != 1 || rows[0] != stripe.ID {
		t.Fatalf("incident %s lists %v; stored %v; want only %s", inc.Status, inc.Proposals, rows, stripe.ID)
	}
}
