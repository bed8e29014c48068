package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
)

// A second local user swaps the config: their login mapped to an owner,
// themselves made an owner, a domain of their own. Changing autonomy and
// lifting the stop follow the approvers recorded in the store, so each is
// refused and changes nothing; a stop stays open to anyone and is recorded
// under the OS account, not the name a swapped config gives it.
func TestAutonomyAndResumeFollowTheRecord(t *testing.T) {
	noAccount := func() error {
		_, err := approvals.LoginForUID(4242, func(string) (*user.User, error) { return nil, user.UnknownUserIdError(4242) })
		return err
	}()
	mapsMeToBob := func(orig string) string {
		return strings.Replace(orig, "os_users: [bob]", "os_users: [bob, mallory]", 1)
	}
	makesMeOwner := func(orig string) string {
		return strings.Replace(strings.Replace(strings.Replace(orig, "owners: [bob]", "owners: [mallory]", 1), "approvers: [bob, carol]", "approvers: [mallory]", 1),
			"people:\n", "people:\n  - {id: mallory, name: Mallory, os_users: [mallory]}\n", 1)
	}
	myOwnDomain := func(orig string) string {
		return strings.Replace(orig, "people:\n", "people:\n  - {id: mallory, name: Mallory, os_users: [mallory]}\n", 1) +
			"  - name: mine\n    assets: [\"mine://*\"]\n    autonomy: L2\n    owners: [mallory]\n"
	}
	cases := []struct {
		name     string
		login    string
		loginErr error
		config   func(string) string
		args     []string
		want     string
	}{
		{"my config maps my login to the owner: autonomy", "mallory", nil, mapsMeToBob, []string{"autonomy", "set", "billing", "L4", "--reason", "x"},
			`OS user "mallory" is not a recorded identity of any approver of domain billing (recorded: bob [os:bob], carol [os:carol])`},
		{"my config maps my login to the owner: resume", "mallory", nil, mapsMeToBob, []string{"resume", "--reason", "x"},
			`OS user "mallory" is not a recorded identity of any approver of any domain (recorded: bob [os:bob], carol [os:carol])`},
		{"my config makes me the owner: autonomy", "mallory", nil, makesMeOwner, []string{"autonomy", "set", "billing", "L4", "--reason", "x"},
			`OS user "mallory" is not a recorded identity of any approver of domain billing`},
		{"my config makes me the owner: reset", "mallory", nil, makesMeOwner, []string{"autonomy", "reset", "billing", "--reason", "x"},
			`OS user "mallory" is not a recorded identity of any approver of domain billing`},
		{"my config makes me the owner: resume", "mallory", nil, makesMeOwner, []string{"resume", "--reason", "x"},
			`OS user "mallory" is not a recorded identity of any approver of any domain`},
		{"a domain of my own: resume", "mallory", nil, myOwnDomain, []string{"resume", "--reason", "x"},
			`OS user "mallory" is not a recorded identity of any approver of any domain`},
		{"a configured person who approves nothing: resume", "dave", nil, nil, []string{"resume", "--reason", "x"},
			`OS user "dave" is not a recorded identity of any approver of any domain`},
		{"uid with no passwd entry: resume", "", noAccount, nil, []string{"resume", "--reason", "x"}, "uid 4242, which has no account"},
		{"uid with no passwd entry: reset", "", noAccount, nil, []string{"autonomy", "reset", "billing", "--reason", "x"}, "uid 4242, which has no account"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, h *harness) {
				ctx := context.Background()
				h.propose() // records billing's approvers: bob, carol
				if _, errs, code := h.dw("bob", "autonomy", "set", "billing", "L3", "--reason", "reruns are safe"); code != 0 {
					t.Fatal(errs)
				}
				if _, errs, code := h.dw("carol", "stop", "--reason", "bad deploy"); code != 0 {
					t.Fatal(errs)
				}
				data := h.data
				if c.config != nil {
					data = []byte(c.config(string(h.data)))
				}
				_, errs, code := h.dwWith(c.login, c.loginErr, data, c.args...)
				expect(t, c.name, errs, code, 1, c.want)
				svc := h.service()
				st, err := svc.StopStatus(ctx)
				if err != nil || !st.Active || st.Reason != "bad deploy" {
					t.Errorf("stop after %q: %+v, %v", c.name, st, err)
				}
				li, err := svc.Level(ctx, "billing")
				if err != nil || li.Level != "L3" || li.SetBy != "bob" {
					t.Errorf("level after %q: %+v, %v", c.name, li, err)
				}
			})
		})
	}
}

// On a store no proposal has recorded approvers in, nobody but the store
// admin may put them on record: bob's first act, and mallory's with a
// config naming herself, are refused naming the admin and the command;
// once the admin pins them, a swapped config is measured against that
// record. A stop is open to anyone and names the OS account.
func TestApproversGetOnRecordOnlyByTheAdmin(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		admin := h.adminLogin()
		_, errs, code := h.dw("bob", "autonomy", "set", "billing", "L3", "--reason", "reruns are safe")
		expect(t, "first act by a non-admin", errs, code, 1, "domain billing has no approvers recorded in this store", "dw approvers pin billing", "OS user "+admin)
		swapped := []byte(strings.Replace(string(h.data), "os_users: [bob]", "os_users: [bob, mallory]", 1))
		_, errs, code = h.dwWith("mallory", nil, swapped, "approvers", "pin", "billing", "--reason", "mine")
		expect(t, "pin by a non-admin", errs, code, 1, "only the store admin, OS user "+admin)
		out, _, code := h.dw("mallory", "approvers", "show", "--json")
		var v approversView
		if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 || len(v.Approvers) != 0 || v.Admin.OSUser != admin {
			t.Fatalf("approvers show before the pin: %+v, %v", v, err)
		}

		out, errs, code = h.dw(admin, "approvers", "pin", "billing", "--reason", "billing goes live")
		expect(t, "pin by the admin", out+errs, code, 0, "Domain billing (standard) approvers recorded: bob, carol")
		out, _, code = h.dw(admin, "approvers", "pin", "billing", "--reason", "again")
		expect(t, "pin again", out, code, 0, "already match this config")
		if _, errs, code := h.dw("bob", "autonomy", "set", "billing", "L3", "--reason", "reruns are safe"); code != 0 {
			t.Fatal(errs)
		}
		// Anyone may stop; the swapped config's name for the login is not
		// what is recorded.
		out, errs, code = h.dwWith("mallory", nil, swapped, "stop", "--reason", "looks wrong")
		expect(t, "stop by anyone", out+errs, code, 0, "by os:mallory")
		st, err := h.service().StopStatus(ctx)
		if err != nil || st.By != "os:mallory" || st.OSUser != "mallory" {
			t.Fatalf("stop recorded as %+v, %v", st, err)
		}
		_, errs, code = h.dwWith("mallory", nil, swapped, "resume", "--reason", "fine")
		expect(t, "resume with a swapped config", errs, code, 1, `OS user "mallory" is not a recorded identity of any approver of any domain (recorded: bob [os:bob], carol [os:carol])`)
		_, errs, code = h.dwWith("mallory", nil, swapped, "autonomy", "set", "billing", "L4", "--reason", "x")
		expect(t, "autonomy with a swapped config", errs, code, 1, `OS user "mallory" is not a recorded identity of any approver of domain billing`)
		out, _, code = h.dw("bob", "resume", "--reason", "checked")
		expect(t, "resume by the recorded owner", out, code, 0, "Stop lifted by bob")

		out, _, code = h.dw("root", "receipt", "show", "org", "--json")
		var doc approvals.ReceiptDoc
		if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || !doc.Chain.OK {
			t.Fatalf("org receipt: %v %s", err, out)
		}
		var kinds []string
		for _, e := range doc.Entries {
			kinds = append(kinds, e.Kind)
		}
		if strings.Join(kinds, ",") != "store_admin,approvers,approvers,autonomy,stop,resume" {
			t.Errorf("org receipt %v", kinds)
		}
		var first struct {
			Domain    string                     `json:"domain"`
			PinnedBy  string                     `json:"pinned_by"`
			Approvers []approvals.ApproverRecord `json:"approvers"`
		}
		if err := json.Unmarshal(doc.Entries[1].Payload, &first); err != nil || first.Domain != "billing" || len(first.Approvers) != 2 || first.PinnedBy != "store admin" ||
			first.Approvers[0].ID != "bob" || strings.Join(first.Approvers[0].OSUsers, ",") != "bob" || doc.Entries[1].Actor != "os:"+admin {
			t.Errorf("recorded approvers %+v, %v", first, err)
		}
	})
}

// DW_CLOCK years ahead on a store not made for replay: a request made now
// is still open, the approve is dated now, and verify stays ok.
func TestReplayedClockAheadAtTheTerminal(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		cfg := h.cfg()
		db := svcDB(t, h)
		real := approvals.New(db, cfg, clock.System{}, nil)
		p, err := real.Propose(ctx, approvals.NewProposal{
			IncidentID: "INC-1", Kind: approvals.KindHold, What: "Pause the Stripe sync", Why: "egress is null",
			Targets: []string{"airflow://dag/sync_metered_usage_to_stripe"}, Undo: "unpause it", Proposer: "dw-incidents",
		})
		if err != nil {
			t.Fatal(err)
		}
		ahead := clock.NewOffset(time.Now().AddDate(5, 0, 0)) // as DW_CLOCK makes it
		run := func(user string, args ...string) (string, string, int) {
			var out, errb bytes.Buffer
			e := &env{stdout: &out, stderr: &errb, osUser: user, clock: ahead,
				loadConfig: func() (*config.Config, error) { return config.Parse(h.path, h.data) },
				log:        slog.New(slog.NewTextHandler(io.Discard, nil))}
			code := run(context.Background(), e, args)
			return out.String(), errb.String(), code
		}
		out, _, code := run("root", "approvals", "list", "--json")
		var list []approvals.Proposal
		if err := json.Unmarshal([]byte(out), &list); err != nil || code != 0 || len(list) != 1 || list[0].State != approvals.StatePending || list[0].Round != 0 {
			t.Fatalf("list under DW_CLOCK ahead: %v %s", err, out)
		}
		if _, errs, code := run("bob", "approve", p.ID); code != 0 {
			t.Fatalf("approve: %s", errs)
		}
		out, _, code = run("root", "receipt", "verify", "--json")
		var rep approvals.AuditReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || rep.Status != approvals.StatusOK {
			t.Fatalf("verify: %v %s", err, out)
		}
		limit := time.Now().Add(time.Minute)
		for _, id := range []string{"INC-1", approvals.OrgReceiptID} {
			es, err := approvals.Entries(ctx, db, id)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				if e.At.After(limit) {
					t.Errorf("%s entry %d (%s) dated %s, in the future", id, e.Seq, e.Kind, e.At)
				}
			}
		}
	})
}
