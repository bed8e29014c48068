package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/storeconfig"
)

const orgConfig = `
people:
  - {id: alice, name: Alice Stream, os_users: [alice]}
  - {id: bob, name: Bob Billing, os_users: [bob]}
  - {id: carol, name: Carol Delegate, os_users: [carol]}
  - {id: dave, name: Dave Bystander, os_users: [dave]}
domains:
  - name: billing
    assets: ["airflow://dag/*"]
    autonomy: L2
    owners: [bob]
    approvers: [bob, carol]
`

// harness runs dw in-process against one store, as a chosen OS user.
type harness struct {
	t    *testing.T
	path string
	data []byte
	clk  *clock.Fake
}

// eachStore runs fn with dw configured for a fresh SQLite file and for a
// fresh PostgreSQL schema, so the CLI is proven on both engines.
func eachStore(t *testing.T, fn func(t *testing.T, h *harness)) {
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		fn(t, newHarness(t, fmt.Sprintf("store:\n  path: %s\n", filepath.Join(dir, "state", "dw.db"))))
	})
	t.Run("postgres", func(t *testing.T) {
		fn(t, newHarness(t, fmt.Sprintf("store:\n  driver: postgres\n  url: %s\n", storetest.PostgresSchemaURL(t))))
	})
}

func newHarness(t *testing.T, storeYAML string) *harness {
	t.Setenv("DW_HOME", t.TempDir())
	path := filepath.Join(t.TempDir(), "dw.yaml")
	data := []byte(storeYAML + orgConfig)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, path: path, data: data, clk: clock.NewFake(time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC))}
}

func (h *harness) cfg() *config.Config {
	cfg, err := config.Parse(h.path, h.data)
	if err != nil {
		h.t.Fatal(err)
	}
	return cfg
}

func (h *harness) dw(user string, args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, osUser: user, clock: h.clk,
		loadConfig: func() (*config.Config, error) { return config.Parse(h.path, h.data) },
		log:        slog.New(slog.NewTextHandler(io.Discard, nil))}
	code = run(context.Background(), e, args)
	return out.String(), errb.String(), code
}

// service opens the store directly, as an agent would.
func (h *harness) service() *approvals.Service {
	cfg := h.cfg()
	db, err := storeconfig.Open(context.Background(), cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { db.Close() })
	return approvals.New(db, cfg, h.clk, nil)
}

func (h *harness) propose() *approvals.Proposal {
	p, err := h.service().Propose(context.Background(), approvals.NewProposal{
		IncidentID: "INC-1", Kind: approvals.KindHold, What: "Pause the Stripe sync", Why: "egress is null",
		Targets: []string{"airflow://dag/sync_metered_usage_to_stripe"}, Undo: "unpause it", Proposer: "dw-incidents",
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func expect(t *testing.T, what string, got string, code, wantCode int, wants ...string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("%s: exit %d, want %d\n%s", what, code, wantCode, got)
	}
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s: output lacks %q\n%s", what, w, got)
		}
	}
}

func TestDecideAtTerminal(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		p := h.propose()
		out, _, code := h.dw("root", "approvals", "list")
		expect(t, "list", out, code, 0, p.ID, "pending", "billing", "bob", "Pause the Stripe sync")

		_, errs, code := h.dw("root", "approve", p.ID)
		expect(t, "unmapped login", errs, code, 1, `OS user "root" is not a recorded identity of any approver of `+p.ID)
		_, errs, code = h.dw("dave", "approve", p.ID)
		expect(t, "not the approver", errs, code, 1, "dave may not decide "+p.ID+": only the named approver bob may")
		_, errs, code = h.dw("bob", "reject", p.ID)
		expect(t, "reject without reason", errs, code, 1, "--reason is required to reject")

		out, _, code = h.dw("bob", "approve", strings.ToLower(p.ID), "--reason", "stop the bleeding")
		expect(t, "approve", out, code, 0, "Approved "+p.ID+": Pause the Stripe sync", "Bob Billing (bob) via terminal (OS user bob) in receipt INC-1")
		_, errs, code = h.dw("bob", "reject", p.ID, "--reason", "changed my mind")
		expect(t, "second decision", errs, code, 1, "already decided: approved by bob via terminal")

		out, _, code = h.dw("root", "approvals", "show", p.ID, "--json")
		var got approvals.Proposal
		if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 {
			t.Fatalf("show --json: %v\n%s", err, out)
		}
		d := got.Decision
		if got.State != approvals.StateApproved || d.Channel != approvals.ChannelTerminal || d.Evidence["os_user"] != "bob" || d.Evidence["host"] == "" || d.Reason != "stop the bleeding" {
			t.Errorf("recorded %+v", got)
		}
		out, _, code = h.dw("root", "approvals", "show", p.ID)
		expect(t, "show", out, code, 0, "Decision:", "approve by Bob Billing (bob) via terminal", "dw receipt show INC-1")
	})
}

func TestStopResumeStatus(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.pin("billing")
		_, errs, code := h.dw("root", "stop")
		expect(t, "stop without reason", errs, code, 1, "a reason is required")
		out, _, code := h.dw("root", "stop", "--reason", "bad deploy")
		expect(t, "stop", out, code, 0, `Org-wide stop in force since 2026-03-10 15:05 UTC by os:root: "bad deploy"`)
		out, _, code = h.dw("root", "status")
		expect(t, "status", out, code, 0, `STOPPED since 2026-03-10 15:05 UTC by os:root: "bad deploy"`, "billing", "L2 propose")

		_, err := h.service().MayDispatch(ctx, approvals.Action{Domain: "billing", Kind: approvals.KindRerun, Reversible: true})
		if !approvals.IsRefusal(err) || !strings.Contains(err.Error(), `"bad deploy"`) {
			t.Errorf("dispatch under stop: %v", err)
		}
		_, errs, code = h.dw("root", "resume")
		expect(t, "resume by an unmapped login", errs, code, 1, `OS user "root" is not a recorded identity of any approver of any domain`)
		// alice is a person in the config but approves no domain.
		_, errs, code = h.dw("alice", "resume", "--reason", "rolled back")
		expect(t, "resume by a person who approves nothing", errs, code, 1, `OS user "alice" is not a recorded identity of any approver of any domain`)
		out, _, code = h.dw("bob", "resume", "--reason", "rolled back")
		expect(t, "resume", out, code, 0, "Stop lifted by bob")
		out, _, code = h.dw("bob", "status", "--json")
		var st status
		if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || st.Stop.Active || st.Person != "bob" {
			t.Errorf("status --json: %+v, %v", st, err)
		}
		out, _, code = h.dw("root", "receipt", "show", "org")
		expect(t, "org receipt", out, code, 0, `org-wide stop: "bad deploy"`, `stop lifted: "rolled back"`)
	})
}

func TestReceiptShowAndVerify(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		p := h.propose()
		if _, errs, code := h.dw("bob", "approve", p.ID); code != 0 {
			t.Fatal(errs)
		}
		out, _, code := h.dw("root", "receipt", "show", "INC-1")
		expect(t, "show", out, code, 0, "# Receipt INC-1", "Chain: intact, 3 entries", "- Decision: **approved** by bob via terminal", "## Undo\n\n- "+p.ID+": unpause it")
		out, _, code = h.dw("root", "receipt", "show", p.ID, "--json")
		var doc approvals.ReceiptDoc
		if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || doc.ID != "INC-1" || len(doc.Entries) != 3 {
			t.Fatalf("show --json: %+v, %v", doc, err)
		}
		out, _, code = h.dw("root", "receipt", "verify")
		expect(t, "verify", out, code, 0, "ok        INC-1  3 entries")

		db, err := storeconfig.Open(context.Background(), h.cfg())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(context.Background(), `UPDATE receipt_entries SET actor = 'carol' WHERE receipt_id = 'INC-1' AND seq = 3`); err != nil {
			t.Fatal(err)
		}
		db.Close()
		out, errs, code := h.dw("root", "receipt", "verify", "INC-1")
		expect(t, "verify tampered", out+errs, code, 1, "TAMPERED  INC-1", "entry 3 (decision by carol", "verification failed: the store was changed outside Data Workers")
		_, errs, code = h.dw("root", "receipt", "show", "INC-404")
		expect(t, "unknown receipt", errs, code, 1, `no receipt "INC-404"; closest: INC-1`)
	})
}

func TestAutonomyFromTheTerminal(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		h.pin("billing")
		_, errs, code := h.dw("carol", "autonomy", "set", "billing", "L4", "--reason", "faster")
		expect(t, "not an owner", errs, code, 1, "carol does not own domain billing")
		_, errs, code = h.dw("bob", "autonomy", "set", "biling", "L3", "--reason", "x")
		expect(t, "typo", errs, code, 1, "closest: billing")
		out, _, code := h.dw("bob", "autonomy", "set", "billing", "L3", "--reason", "reruns are safe")
		expect(t, "set", out, code, 0, "Domain billing is now L3 (act reversibly), set by bob; its config says L2")
		out, _, code = h.dw("root", "autonomy", "show", "--json")
		var levels []approvals.LevelInfo
		if err := json.Unmarshal([]byte(out), &levels); err != nil || code != 0 || levels[0].Level != "L3" || levels[0].Source != "set" {
			t.Errorf("show: %+v, %v", levels, err)
		}
		out, _, code = h.dw("bob", "autonomy", "reset", "billing", "--reason", "trial over")
		expect(t, "reset", out, code, 0, "back at its configured level L2")
	})
}

func TestUsageErrors(t *testing.T) {
	h := newHarness(t, fmt.Sprintf("store:\n  path: %s\n", filepath.Join(t.TempDir(), "dw.db")))
	_, errs, code := h.dw("root", "recipt", "show")
	expect(t, "unknown", errs, code, 2, `unknown command "recipt show"; closest: receipt show`)
	_, errs, code = h.dw("bob", "approve")
	expect(t, "no id", errs, code, 2, "usage: dw approve ID [--reason …]")
	_, errs, code = h.dw("root", "approvals", "list", "--bogus")
	expect(t, "bad flag", errs, code, 2, "flag provided but not defined: -bogus", "usage: dw approvals list")
	out, _, code := h.dw("root", "help")
	expect(t, "help", out, code, 0, "dw receipt verify", "dw stop --reason")
	_, errs, code = h.dw("root")
	expect(t, "no args", errs, code, 2, "Usage:")
}

func TestRegisterIsOneLine(t *testing.T) {
	var got []string
	register("demo ping", "[ARGS]", "test command", func(_ context.Context, e *env, args []string) error {
		got = args
		fmt.Fprintln(e.stdout, "pong")
		return nil
	})
	t.Cleanup(func() { delete(commands, "demo ping") })
	h := newHarness(t, "")
	out, _, code := h.dw("root", "demo", "ping", "a", "--b")
	if code != 0 || out != "pong\n" || strings.Join(got, " ") != "a --b" {
		t.Errorf("demo ping: %d %q %v", code, out, got)
	}
}
