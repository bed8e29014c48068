package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dataworkers/dw/internal/approvals"
)

// Issue 12 repro through the CLI: the stop row deleted and a level
// inserted by hand. dw status shows the stop as tampered and billing at
// L0; dw receipt verify fails.
func TestStatusAndVerifyShowGovernanceTampering(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		if _, errs, code := h.dw("root", "stop", "--reason", "test"); code != 0 {
			t.Fatal(errs)
		}
		db := svcDB(t, h)
		ctx := context.Background()
		for _, q := range []string{
			`DELETE FROM kv WHERE key = 'org.stop'`,
			`INSERT INTO kv (key, value, updated_ms) VALUES ('autonomy.billing', '{"level":"L4","by":"root","reason":"looks official","at":"2026-12-01T14:00:00Z"}', 0)`,
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		out, errs, code := h.dw("root", "status", "--json")
		if code != 0 {
			t.Fatalf("status: %s", errs)
		}
		var st status
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		if !st.Stop.Active || st.Stop.Tampered == "" {
			t.Errorf("status stop: %+v; want active and tampered", st.Stop)
		}
		for _, l := range st.Levels {
			if l.Domain == "billing" && (l.Level != "L0" || l.Source != "tampered" || l.SetBy == "root") {
				t.Errorf("billing: %+v; want L0, tampered", l)
			}
		}
		out, _, code = h.dw("root", "receipt", "verify", "--json")
		var rep approvals.AuditReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if code != 1 || rep.Status != approvals.StatusTampered {
			t.Fatalf("verify: exit %d, status %s; want 1, tampered", code, rep.Status)
		}
	})
}
