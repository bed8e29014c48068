package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// asUID makes this process look like it runs as uid, then restores it.
func asUID(uid int) func() {
	old := processUID
	processUID = func() int { return uid }
	return func() { processUID = old }
}

// Hostile review F1: a second user with write access to a shared store and
// the shared key starts an agent with her own config naming her billing's
// approver. Her proposal goes to the approvers on record, the difference is
// only noted, and she cannot decide it.
func TestNonAdminAgentConfigDoesNotReRecordApprovers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		// The store admin's agent records billing's approvers (bob, carol).
		mustPropose(t, s, holdDAG())
		malCfg, err := config.Parse("mine.yaml", []byte(strings.NewReplacer(
			"  - {id: dave,", "  - {id: mallory, name: Mallory, os_users: [mallory]}\n  - {id: dave,",
			"owners: [bob]\n    approvers: [bob, carol]", "owners: [mallory]\n    approvers: [mallory]",
		).Replace(testConfig)))
		if err != nil {
			t.Fatal(err)
		}
		mine := New(db, malCfg, clk, nil)
		defer asUID(4242)()

		p, err := mine.Propose(ctx, holdDAG())
		if err != nil {
			t.Fatalf("mallory's agent proposing on billing: %v", err)
		}
		if p.Approver != "bob" || strings.Join(p.ApproverOrder, ",") != "bob,carol" {
			t.Fatalf("mallory's proposal went to %s (order %v); want the recorded bob, carol", p.Approver, p.ApproverOrder)
		}
		recs, err := s.DomainRecords(ctx, "billing")
		if err != nil || len(recs) != 1 || recs[0].Approvers[0].ID != "bob" {
			t.Fatalf("billing's records after mallory's proposal: %+v, %v", recs, err)
		}
		es, err := Entries(ctx, db, OrgReceiptID)
		if err != nil {
			t.Fatal(err)
		}
		last := es[len(es)-1]
		var note struct {
			Domain   string           `json:"domain"`
			Proposal string           `json:"proposal"`
			Config   []ApproverRecord `json:"config_approvers"`
			Recorded []ApproverRecord `json:"recorded_approvers"`
			UID      string           `json:"uid"`
			Note     string           `json:"note"`
		}
		if err := json.Unmarshal(last.Payload, &note); err != nil || last.Kind != EntryApproversDiffer || note.Proposal != p.ID ||
			note.Config[0].ID != "mallory" || note.Recorded[0].ID != "bob" || note.UID != "4242" || !strings.Contains(note.Note, "dw approvers pin billing") {
			t.Fatalf("org receipt's last entry: %s %+v (%v); want the config difference noted", last.Kind, note, err)
		}
		// She cannot decide her own proposal: it records bob and carol.
		mal := Decider{PersonID: "mallory", Channel: ChannelTerminal, OSUser: "mallory", Evidence: map[string]string{"uid": "4242"}}
		var na *NotApproverError
		if _, err := mine.Decide(ctx, p.ID, mal, VerdictApprove, "mine"); !errors.As(err, &na) {
			t.Fatalf("mallory deciding: %v; want NotApproverError", err)
		}
		if _, err := mine.SetAutonomy(ctx, "billing", "L4", mal, "mine"); !isInput(err) {
			t.Fatalf("mallory setting billing's autonomy: %v", err)
		}
		// Nothing on record for streaming: refused, naming the admin and
		// the command, with nothing written.
		before := orgEntryCount(t, db)
		admin := adminBy(t)
		_, err = mine.Propose(ctx, schemaV13())
		if !isInput(err) || !strings.Contains(err.Error(), "dw approvers pin streaming") || !strings.Contains(err.Error(), admin.OSUser) ||
			!strings.Contains(err.Error(), "uid 4242") {
			t.Fatalf("mallory's agent on streaming: %v; want a refusal naming the admin and dw approvers pin streaming", err)
		}
		if n := orgEntryCount(t, db); n != before {
			t.Fatalf("a refused proposal wrote %d org entries", n-before)
		}
		var props int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM approval_proposals WHERE domain = 'streaming'`).Scan(&props); err != nil || props != 0 {
			t.Fatalf("streaming proposals after the refusal: %d, %v", props, err)
		}
		if v, status := orgVerification(t, db); !v.OK || status != StatusOK {
			t.Fatalf("verify: %+v (audit %s)", v, status)
		}
		// The admin accepts the config: mallory's agent is then routed to
		// mallory, and no difference is noted.
		if _, err := mine.PinDomain(ctx, "billing", admin, "mallory takes billing"); err != nil {
			t.Fatalf("admin pinning mallory's config: %v", err)
		}
		p2, err := mine.Propose(ctx, holdDAG())
		if err != nil || p2.Approver != "mallory" {
			t.Fatalf("after the pin: %+v, %v", p2, err)
		}
		if k := entryKinds(t, s, OrgReceiptID); k[len(k)-1] != EntryApprovers {
			t.Fatalf("after the pin the last org entry is %s", k[len(k)-1])
		}
	})
}

// The single-user flow: an agent running as the store admin records a
// changed config, as before.
func TestAdminAgentRecordsChangedApprovers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		mustPropose(t, s, holdDAG())
		changed := New(db, swappedConfig(t, "approvers: [bob, carol]", "approvers: [carol, bob]"), clk, nil)
		p, err := changed.Propose(ctx, holdDAG())
		if err != nil || p.Approver != "carol" {
			t.Fatalf("admin's agent with a changed config: %+v, %v", p, err)
		}
		recs, err := s.DomainRecords(ctx, "billing")
		if err != nil || len(recs) != 1 || recs[0].Approvers[0].ID != "carol" || recs[0].By != "dw-incidents" {
			t.Fatalf("billing's records: %+v, %v", recs, err)
		}
		// A new domain's first proposal records it too.
		if _, err := s.Propose(ctx, schemaV13()); err != nil {
			t.Fatalf("admin's agent on streaming: %v", err)
		}
		admin, err := s.StoreAdmin(ctx)
		if err != nil || admin.UID != strconv.Itoa(processUID()) {
			t.Fatalf("store admin: %+v, %v", admin, err)
		}
	})
}
