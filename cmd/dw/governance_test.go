package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/storeconfig"
)

// dwWith runs dw with a chosen identity outcome and config, as main would
// build them: login and loginErr come from the uid lookup, data is the
// config the caller named (DW_CONFIG).
func (h *harness) dwWith(login string, loginErr error, data []byte, args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, osUser: login, osUserErr: loginErr, clock: h.clk,
		loadConfig: func() (*config.Config, error) { return config.Parse(h.path, data) },
		log:        slog.New(slog.NewTextHandler(io.Discard, nil))}
	code = run(context.Background(), e, args)
	return out.String(), errb.String(), code
}

// Issue 12 cases 2 and 3 at the terminal: an account the system does not
// know, and a config of one's own mapping one's login to the approver.
func TestTerminalIdentityCannotBeBorrowed(t *testing.T) {
	noAccount := func() error {
		_, err := approvals.LoginForUID(4242, func(string) (*user.User, error) { return nil, user.UnknownUserIdError(4242) })
		return err
	}()
	cases := []struct {
		name     string
		login    string
		loginErr error
		config   func(orig string) string
		args     []string
		want     string
	}{
		{"uid with no passwd entry approves", "", noAccount, nil, []string{"approve", "ID"}, "uid 4242, which has no account"},
		{"uid with no passwd entry rejects", "", noAccount, nil, []string{"reject", "ID", "--reason", "x"}, "uid 4242, which has no account"},
		{"uid with no passwd entry sets autonomy", "", noAccount, nil, []string{"autonomy", "set", "billing", "L4", "--reason", "x"}, "uid 4242, which has no account"},
		{"uid with no passwd entry records a step", "", noAccount, nil, []string{"step", "ID", "--did", "x"}, "uid 4242, which has no account"},
		{"my config maps my login to the approver", "mallory", nil, func(orig string) string {
			return strings.Replace(orig, "os_users: [bob]", "os_users: [bob, mallory]", 1)
		}, []string{"approve", "ID"}, `OS user "mallory" is not mapped to bob in the approvers recorded with`},
		{"my config makes me the approver", "mallory", nil, func(orig string) string {
			return strings.Replace(strings.Replace(orig, "approvers: [bob, carol]", "approvers: [mallory]", 1),
				"people:\n", "people:\n  - {id: mallory, name: Mallory, os_users: [mallory]}\n", 1)
		}, []string{"approve", "ID"}, "mallory may not decide"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, h *harness) {
				p := h.propose()
				args := append([]string(nil), c.args...)
				for i := range args {
					if args[i] == "ID" {
						args[i] = p.ID
					}
				}
				data := h.data
				if c.config != nil {
					data = []byte(c.config(string(h.data)))
				}
				_, errs, code := h.dwWith(c.login, c.loginErr, data, args...)
				expect(t, c.name, errs, code, 1, c.want)
				got, err := h.service().Get(context.Background(), p.ID)
				if err != nil || got.State != approvals.StatePending || got.Decision != nil {
					t.Fatalf("after %q: %+v, %v", c.name, got, err)
				}
			})
		})
	}
}

// `dw receipt anchor` prints the head; `dw receipt verify --anchor` finds a
// tail removed with every head rolled back, which nothing else can.
func TestReceiptAnchorCatchesTruncation(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		p := h.propose()
		if _, errs, code := h.dw("bob", "approve", p.ID); code != 0 {
			t.Fatal(errs)
		}
		// A last entry that no record depends on, then the anchor.
		if _, err := approvals.AppendReceipt(context.Background(), svcDB(t, h), h.clk.Now(), "INC-2", approvals.EntryCause, "dw-incidents", map[string]any{"summary": "late"}); err != nil {
			t.Fatal(err)
		}
		anchor, errs, code := h.dw("root", "receipt", "anchor")
		anchor = strings.TrimSpace(anchor)
		if code != 0 || !strings.HasPrefix(anchor, "dw1:") {
			t.Fatalf("anchor: %q %s", anchor, errs)
		}
		out, _, code := h.dw("root", "receipt", "verify", "--anchor", anchor)
		expect(t, "verify with a fresh anchor", out, code, 0, "ok        anchor  "+anchor)

		db := svcDB(t, h)
		ctx := context.Background()
		var prev string
		if err := db.QueryRowContext(ctx, `SELECT hash FROM receipt_entries WHERE gseq = (SELECT MAX(gseq) - 1 FROM receipt_entries)`).Scan(&prev); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`DELETE FROM receipt_entries WHERE receipt_id = 'INC-2'`,
			`DELETE FROM receipt_heads WHERE receipt_id = 'INC-2'`,
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.ExecContext(ctx, `UPDATE receipt_global_head SET seq = seq - 1, hash = ?`, prev); err != nil {
			t.Fatal(err)
		}
		// Without the anchor nothing shows: that is what anchors are for.
		out, _, code = h.dw("root", "receipt", "verify")
		expect(t, "verify without the anchor", out, code, 0, "ok        global chain")
		out, errs, code = h.dw("root", "receipt", "verify", "--anchor", anchor)
		expect(t, "verify against the anchor", out+errs, code, 1, "TAMPERED  anchor", "no longer in the store")
		_, errs, code = h.dw("root", "receipt", "verify", "--anchor", "dw1:x:y")
		expect(t, "malformed anchor", errs, code, 1, "the sequence must be a positive number")
	})
}

// The key file is made in DW_HOME, private, and verify names it.
func TestReceiptKeyIsPrivate(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		h.propose()
		out, _, code := h.dw("root", "receipt", "verify")
		key := filepath.Join(os.Getenv("DW_HOME"), "receipt.key")
		expect(t, "verify", out, code, 0, "Key: "+key)
		fi, err := os.Stat(key)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("key file: %v %v", fi, err)
		}
	})
}

// svcDB opens the harness's store directly, as someone with access to it.
func svcDB(t *testing.T, h *harness) *store.DB {
	t.Helper()
	db, err := storeconfig.Open(context.Background(), h.cfg())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
