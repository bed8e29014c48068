package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/storeconfig"
)

// adminLogin is the store admin of the harness's stores: the account
// running the tests, which owns the SQLite file and seals the org receipt.
func (h *harness) adminLogin() string {
	h.t.Helper()
	login, err := approvals.OSLogin()
	if err != nil {
		h.t.Skipf("the test account has no login: %v", err)
	}
	return login
}

// pin has the store admin record a domain's approvers from the config.
func (h *harness) pin(domain string) {
	h.t.Helper()
	if _, errs, code := h.dw(h.adminLogin(), "approvers", "pin", domain, "--reason", "test setup"); code != 0 {
		h.t.Fatalf("dw approvers pin %s: %s", domain, errs)
	}
}

// A level forged for a domain the config does not name is cleared with
// dw autonomy reset by the store admin; anyone else is refused.
func TestAutonomyResetClearsAnUnconfiguredDomain(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.pin("billing")
		db, err := storeconfig.Open(ctx, h.cfg())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO kv (key, value, updated_ms) VALUES ('autonomy.ghost', ?, 0)`,
			`{"level":"L4","by":"root","reason":"looks official","at":"2026-12-01T14:00:00Z"}`); err != nil {
			t.Fatal(err)
		}
		db.Close()
		out, _, code := h.dw("bob", "receipt", "verify", "--json")
		var rep approvals.AuditReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Status != approvals.StatusTampered || code != 1 {
			t.Fatalf("verify with a forged ghost level: %v, %d %s", err, code, out)
		}
		_, errs, code := h.dw("bob", "autonomy", "reset", "ghost", "--reason", "cleanup")
		expect(t, "reset by a non-admin", errs, code, 1, "domain ghost is not in the config", "cleared only by its recorded approvers")
		out, errs, code = h.dw(h.adminLogin(), "autonomy", "reset", "ghost", "--reason", "forged row found by verify")
		expect(t, "reset by the admin", out+errs, code, 0, "Domain ghost is not in the config; the level the store held for it is cleared by os:"+h.adminLogin())
		out, _, code = h.dw("bob", "receipt", "verify", "--json")
		if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Status != approvals.StatusOK || code != 0 {
			t.Fatalf("verify after clearing: %v, %d %s", err, code, out)
		}
	})
}
