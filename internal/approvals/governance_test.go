package approvals

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// The tests in this file take issue 12's hostile cases one by one: each
// row is what a hostile client or a second local user does, and the
// assertion is the refusal (or the verify finding).

// Case 2: the deciding login comes from the uid, never from $USER.
func TestIdentityComesFromTheSystem(t *testing.T) {
	t.Setenv("USER", "bob")
	t.Setenv("LOGNAME", "bob")
	cases := []struct {
		name    string
		lookup  func(string) (*user.User, error)
		want    string
		refused string
	}{
		{"uid without a passwd entry, USER names the approver", func(uid string) (*user.User, error) {
			return nil, user.UnknownUserIdError(4242)
		}, "", "uid 4242, which has no account"},
		{"account with an empty name", func(string) (*user.User, error) { return &user.User{Uid: "4242"}, nil }, "", "no account"},
		{"real account, USER says someone else", func(string) (*user.User, error) { return &user.User{Uid: "4242", Username: "mallory"}, nil }, "mallory", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := LoginForUID(4242, c.lookup)
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) || got != "" {
					t.Fatalf("got %q, %v; want a refusal mentioning %q", got, err, c.refused)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
	// The real lookup ignores $USER too.
	t.Setenv("USER", "not-a-login-on-this-machine")
	if got, err := OSLogin(); err == nil && got == "not-a-login-on-this-machine" {
		t.Errorf("OSLogin took $USER: %q", got)
	}
	if got := config.CurrentOSUser(); got == "not-a-login-on-this-machine" {
		t.Errorf("config.CurrentOSUser took $USER: %q", got)
	}
}

// swappedConfig is the test organisation with an edit, parsed without
// moving DW_HOME (the store's key stays the same).
func swappedConfig(t *testing.T, from, to string) *config.Config {
	t.Helper()
	if !strings.Contains(testConfig, from) {
		t.Fatalf("test config lacks %q", from)
	}
	cfg, err := config.Parse("mine.yaml", []byte(strings.Replace(testConfig, from, to, 1)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Case 3: DW_CONFIG=mine.yaml maps my login to the approver. Decisions
// follow the approvers recorded with the proposal, so it is refused.
func TestDecisionsFollowTheRecordedApprovers(t *testing.T) {
	cases := []struct {
		name string
		from string
		to   string
		by   func(cfg *config.Config) (Decider, error)
	}{
		{"my login added to the approver", "os_users: [bob]", "os_users: [bob, mallory]", func(cfg *config.Config) (Decider, error) {
			return OSUserDecider(cfg, ChannelTerminal, "mallory")
		}},
		{"my login as a new approver of the domain", "approvers: [bob, carol]", "approvers: [dave, bob, carol]", func(cfg *config.Config) (Decider, error) {
			return OSUserDecider(cfg, ChannelTerminal, "dave")
		}},
		{"my Slack id given to the approver", "slack_id: U0BOB", "slack_id: U0MALLORY", func(cfg *config.Config) (Decider, error) {
			return SlackDecider(cfg, "U0MALLORY", nil)
		}},
		{"my login given to the approver in the client", "os_users: [bob]", "os_users: [mallory]", func(cfg *config.Config) (Decider, error) {
			return OSUserDecider(cfg, ChannelElicitation, "mallory")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				s, clk := fixture(t, db)
				p := mustPropose(t, s, holdDAG())
				mine := New(db, swappedConfig(t, c.from, c.to), clk, nil)
				by, err := c.by(mine.cfg)
				if err != nil {
					t.Fatal(err)
				}
				var na *NotApproverError
				if _, err := mine.Decide(ctx, p.ID, by, VerdictApprove, "mine"); !errors.As(err, &na) || !strings.Contains(err.Error(), "recorded") {
					t.Fatalf("decision under a swapped config: %v; want a refusal naming the recorded approvers", err)
				}
				if got, _ := s.Get(ctx, p.ID); got.State != StatePending || got.Decision != nil {
					t.Fatalf("state %s after a refused decision", got.State)
				}
				// The real approver still decides, whichever config is loaded.
				if _, err := mine.Decide(ctx, p.ID, Decider{Channel: ChannelTerminal, OSUser: "bob"}, VerdictApprove, "mine"); err != nil {
					t.Fatalf("bob at the terminal: %v", err)
				}
			})
		})
	}
}

// Changing who approves a domain is itself recorded, in the org receipt.
func TestApproverChangeIsRecorded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		mustPropose(t, s, holdDAG())
		mustPropose(t, s, holdDAG()) // same approvers: nothing new to record
		mine := New(db, swappedConfig(t, "os_users: [bob]", "os_users: [bob, mallory]"), clk, nil)
		p := mustPropose(t, mine, holdDAG())
		es, err := Entries(ctx, db, OrgReceiptID)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, e := range es {
			kinds = append(kinds, e.Kind)
		}
		if strings.Join(kinds, ",") != "store_admin,approvers,approvers" {
			t.Fatalf("org receipt kinds %v; want the first record and the change", kinds)
		}
		var last struct {
			Domain    string           `json:"domain"`
			Proposal  string           `json:"proposal"`
			Approvers []ApproverRecord `json:"approvers"`
			Previous  []ApproverRecord `json:"previous"`
		}
		if err := json.Unmarshal(es[2].Payload, &last); err != nil {
			t.Fatal(err)
		}
		if last.Domain != "billing" || last.Proposal != p.ID || len(last.Previous) != 2 ||
			strings.Join(last.Approvers[0].OSUsers, ",") != "bob,mallory" || strings.Join(last.Previous[0].OSUsers, ",") != "bob" {
			t.Errorf("approver change entry %+v", last)
		}
	})
}

// approveHold proposes the Stripe hold and has bob approve it.
func approveHold(t *testing.T, s *Service) *Proposal {
	t.Helper()
	p := mustPropose(t, s, holdDAG())
	got, err := s.Decide(context.Background(), p.ID, term(t, s, "bob"), VerdictApprove, "ok")
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func exec(t *testing.T, db *store.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func randomKeyset(t *testing.T) *keyset {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return newKeyset(b[:], "attacker")
}

// Case 6: store edits that try to make a proposal dispatch. Dispatch reads
// the sealed decision, not the state column, and verify reports each.
func TestDispatchNeedsASealedDecision(t *testing.T) {
	cases := []struct {
		name string
		// edit tampers with the store and returns the proposal to dispatch.
		edit func(t *testing.T, s *Service, db *store.DB) string
		want string
	}{
		{"state set to approved with no decision", func(t *testing.T, s *Service, db *store.DB) string {
			p := mustPropose(t, s, holdDAG())
			exec(t, db, `UPDATE approval_proposals SET state = 'approved' WHERE id = ?`, p.ID)
			return p.ID
		}, "no decision is recorded"},
		{"decision row written by hand", func(t *testing.T, s *Service, db *store.DB) string {
			p := mustPropose(t, s, holdDAG())
			exec(t, db, `INSERT INTO approval_decisions (proposal_id, verdict, person_id, channel, evidence, reason, round, decided_ms, mac)
				VALUES (?, 'approve', 'bob', 'terminal', '{}', '', 0, ?, '')`, p.ID, store.Millis(t0))
			exec(t, db, `UPDATE approval_proposals SET state = 'approved' WHERE id = ?`, p.ID)
			return p.ID
		}, "before decisions were sealed"},
		{"decision row sealed with a guessed key", func(t *testing.T, s *Service, db *store.DB) string {
			p := mustPropose(t, s, holdDAG())
			sp, _ := checkProposal(context.Background(), db, randomKeyset(t), p.ID)
			row := map[string]any{"proposal_id": p.ID, "verdict": "approve", "person_id": "bob", "channel": "terminal",
				"evidence": "{}", "reason": "", "round": "0", "decided_ms": "1773155100000"}
			exec(t, db, `INSERT INTO approval_decisions (proposal_id, verdict, person_id, channel, evidence, reason, round, decided_ms, mac)
				VALUES (?, 'approve', 'bob', 'terminal', '{}', '', 0, 1773155100000, ?)`, p.ID, decisionSeal(randomKeyset(t), sp.MAC, row))
			exec(t, db, `UPDATE approval_proposals SET state = 'approved' WHERE id = ?`, p.ID)
			return p.ID
		}, "fails its seal"},
		{"rejection edited into an approval", func(t *testing.T, s *Service, db *store.DB) string {
			p := mustPropose(t, s, holdDAG())
			if _, err := s.Decide(context.Background(), p.ID, term(t, s, "bob"), VerdictReject, "no"); err != nil {
				t.Fatal(err)
			}
			exec(t, db, `UPDATE approval_decisions SET verdict = 'approve' WHERE proposal_id = ?`, p.ID)
			exec(t, db, `UPDATE approval_proposals SET state = 'approved' WHERE id = ?`, p.ID)
			return p.ID
		}, "fails its seal"},
		{"decision moved from another proposal", func(t *testing.T, s *Service, db *store.DB) string {
			approved := approveHold(t, s)
			p := mustPropose(t, s, holdDAG())
			exec(t, db, `INSERT INTO approval_decisions (proposal_id, verdict, person_id, channel, evidence, reason, round, decided_ms, mac)
				SELECT ?, verdict, person_id, channel, evidence, reason, round, decided_ms, mac FROM approval_decisions WHERE proposal_id = ?`, p.ID, approved.ID)
			exec(t, db, `UPDATE approval_proposals SET state = 'approved' WHERE id = ?`, p.ID)
			return p.ID
		}, "fails its seal"},
		{"approved proposal's targets widened", func(t *testing.T, s *Service, db *store.DB) string {
			p := approveHold(t, s)
			exec(t, db, `UPDATE approval_proposals SET targets = ? WHERE id = ?`, `["airflow://dag/sync_metered_usage_to_stripe","airflow://dag/evil_dag"]`, p.ID)
			return p.ID
		}, "fails its seal"},
		{"executed proposal set back to approved", func(t *testing.T, s *Service, db *store.DB) string {
			p := approveHold(t, s)
			if _, err := s.MarkExecuted(context.Background(), p.ID, "dw-connectors", "paused"); err != nil {
				t.Fatal(err)
			}
			exec(t, db, `UPDATE approval_proposals SET state = 'approved' WHERE id = ?`, p.ID)
			return p.ID
		}, "records it executed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				s, _ := fixture(t, db)
				// The untouched path dispatches, so the refusal below is the edit's doing.
				ok := approveHold(t, s)
				if _, err := s.MayDispatch(ctx, Action{Kind: KindHold, ProposalID: ok.ID, Asset: ok.Targets[0]}); err != nil {
					t.Fatalf("genuine approval refused: %v", err)
				}
				if rep, err := Audit(ctx, db, "", ""); err != nil || rep.Status != StatusOK {
					t.Fatalf("untouched store: %+v, %v", rep, err)
				}
				id := c.edit(t, s, db)
				_, err := s.MayDispatch(ctx, Action{Kind: KindHold, ProposalID: id, Asset: "airflow://dag/sync_metered_usage_to_stripe"})
				if !IsRefusal(err) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("dispatch after %q: %v; want a refusal saying %q", c.name, err, c.want)
				}
				rep, err := Audit(ctx, db, "", "")
				if err != nil {
					t.Fatal(err)
				}
				if rep.Status != StatusTampered || len(rep.Records.Problems) == 0 {
					t.Errorf("verify after %q: status %s, records %+v", c.name, rep.Status, rep.Records)
				}
			})
		})
	}
}

// The snapshot of approvers is sealed: rewriting it to name me does not
// make me an approver.
func TestApproverSnapshotIsSealed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		p := mustPropose(t, s, holdDAG())
		exec(t, db, `UPDATE approval_proposals SET approvers = ? WHERE id = ?`,
			`[{"id":"bob","os_users":["mallory"],"slack_id":""},{"id":"carol","os_users":["carol"],"slack_id":""}]`, p.ID)
		if _, err := s.Decide(ctx, p.ID, Decider{Channel: ChannelTerminal, OSUser: "mallory"}, VerdictApprove, ""); err == nil || !strings.Contains(err.Error(), "fails its seal") {
			t.Fatalf("decision against an edited snapshot: %v", err)
		}
		if got, _ := s.Get(ctx, p.ID); got.State != StatePending {
			t.Errorf("state %s", got.State)
		}
	})
}

// auditFixture is an approved, executed incident (INC-1), a receipt with
// two causes (INC-2), one with one (INC-3, the last written), and the
// anchor published after them.
func auditFixture(t *testing.T, db *store.DB) (*Service, *Proposal, Anchor) {
	t.Helper()
	s, clk := fixture(t, db)
	p := approvedIncident(t, s, clk)
	for _, r := range []struct{ receipt, sum string }{{"INC-2", "a"}, {"INC-2", "b"}, {"INC-3", "c"}} {
		if _, err := AppendReceipt(context.Background(), db, s.clk.Now(), r.receipt, EntryCause, "dw-incidents", map[string]any{"summary": r.sum}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := CurrentAnchor(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return s, p, a
}

// rewriteChains re-seals every entry in gseq order with seal (nil: plain
// SHA-256 as before keys), fixing every link and head, as someone with
// the store but not the key would.
func rewriteChains(t *testing.T, db *store.DB, ks *keyset) {
	t.Helper()
	ctx := context.Background()
	rows, err := rawRows(ctx, db, `SELECT receipt_id, seq, kind, actor, at_ms, payload, gseq FROM receipt_entries ORDER BY gseq, receipt_id, seq`)
	if err != nil {
		t.Fatal(err)
	}
	prev := map[string]string{}
	gprev := ""
	for _, r := range rows {
		str := func(c string) string { s, _ := r[c].(string); return s }
		rid := str("receipt_id")
		var seq, atMs, gseq int64
		for c, dst := range map[string]*int64{"seq": &seq, "at_ms": &atMs, "gseq": &gseq} {
			if err := json.Unmarshal([]byte(str(c)), dst); err != nil {
				t.Fatal(err)
			}
		}
		var h string
		if ks == nil {
			h = entryHash(rid, seq, str("kind"), str("actor"), atMs, prev[rid], str("payload"))
			exec(t, db, `UPDATE receipt_entries SET prev_hash = ?, hash = ?, gseq = 0, gprev = '' WHERE receipt_id = ? AND seq = ?`, prev[rid], h, rid, seq)
		} else {
			h = entryMAC(ks, rid, seq, str("kind"), str("actor"), atMs, prev[rid], str("payload"), gseq, gprev)
			exec(t, db, `UPDATE receipt_entries SET prev_hash = ?, hash = ?, gprev = ? WHERE receipt_id = ? AND seq = ?`, prev[rid], h, gprev, rid, seq)
		}
		exec(t, db, `UPDATE receipt_heads SET hash = ? WHERE receipt_id = ?`, h, rid)
		prev[rid], gprev = h, h
	}
	if ks == nil {
		exec(t, db, `DELETE FROM receipt_global_head`)
	} else {
		exec(t, db, `UPDATE receipt_global_head SET hash = ?`, gprev)
	}
}

// Case 6 (verify): each edit below is found by `dw receipt verify`.
func TestVerifyFindsStoreEdits(t *testing.T) {
	cases := []struct {
		name string
		edit func(t *testing.T, s *Service, p *Proposal, db *store.DB)
		// status is the verdict without the anchor, anchored with it.
		status, anchored string
		want             string
	}{
		{"nothing changed", func(*testing.T, *Service, *Proposal, *store.DB) {}, StatusOK, StatusOK, ""},
		{"decision row edited", func(t *testing.T, _ *Service, p *Proposal, db *store.DB) {
			exec(t, db, `UPDATE approval_decisions SET person_id = 'carol' WHERE proposal_id = ?`, p.ID)
		}, StatusTampered, StatusTampered, "fails its seal"},
		{"state column set back to approved", func(t *testing.T, _ *Service, p *Proposal, db *store.DB) {
			exec(t, db, `UPDATE approval_proposals SET state = 'approved' WHERE id = ?`, p.ID)
		}, StatusTampered, StatusTampered, "records it executed"},
		{"pending proposal set to approved", func(t *testing.T, s *Service, _ *Proposal, db *store.DB) {
			q := mustPropose(t, s, holdDAG())
			exec(t, db, `UPDATE approval_proposals SET state = 'approved' WHERE id = ?`, q.ID)
		}, StatusTampered, StatusTampered, "no sealed decision approving it"},
		{"proposal text edited", func(t *testing.T, _ *Service, p *Proposal, db *store.DB) {
			exec(t, db, `UPDATE approval_proposals SET what = 'Pause every DAG' WHERE id = ?`, p.ID)
		}, StatusTampered, StatusTampered, "edited after it was made"},
		{"tail truncated with every head rolled back", func(t *testing.T, _ *Service, _ *Proposal, db *store.DB) {
			ctx := context.Background()
			var h string
			if err := db.QueryRowContext(ctx, `SELECT hash FROM receipt_entries WHERE receipt_id = 'INC-2' AND seq = 2`).Scan(&h); err != nil {
				t.Fatal(err)
			}
			exec(t, db, `DELETE FROM receipt_entries WHERE receipt_id = 'INC-3'`)
			exec(t, db, `DELETE FROM receipt_heads WHERE receipt_id = 'INC-3'`)
			exec(t, db, `UPDATE receipt_global_head SET seq = seq - 1, hash = ?`, h)
		}, StatusOK, StatusTampered, "no longer in the store"},
		{"whole chain rewritten with plain SHA-256", func(t *testing.T, _ *Service, _ *Proposal, db *store.DB) {
			rewriteChains(t, db, nil)
		}, StatusTampered, StatusTampered, "has no proposal entry"},
		{"whole chain re-sealed with a guessed key", func(t *testing.T, _ *Service, _ *Proposal, db *store.DB) {
			rewriteChains(t, db, randomKeyset(t))
		}, StatusTampered, StatusTampered, "was edited"},
		{"receipt deleted whole", func(t *testing.T, _ *Service, _ *Proposal, db *store.DB) {
			exec(t, db, `DELETE FROM receipt_entries WHERE receipt_id = 'INC-2'`)
			exec(t, db, `DELETE FROM receipt_heads WHERE receipt_id = 'INC-2'`)
		}, StatusTampered, StatusTampered, "missing from every receipt"},
		{"decision entry deleted from the receipt", func(t *testing.T, _ *Service, _ *Proposal, db *store.DB) {
			exec(t, db, `DELETE FROM receipt_entries WHERE receipt_id = 'INC-1' AND kind = 'decision'`)
		}, StatusTampered, StatusTampered, "no decision entry"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				s, p, anchor := auditFixture(t, db)
				c.edit(t, s, p, db)
				for _, run := range []struct {
					anchor string
					want   string
				}{{"", c.status}, {anchor.String(), c.anchored}} {
					rep, err := Audit(ctx, db, "", run.anchor)
					if err != nil {
						t.Fatal(err)
					}
					if rep.Status != run.want {
						t.Errorf("anchor %q: status %s, want %s\n%+v", run.anchor, rep.Status, run.want, rep)
					}
					if run.want == StatusTampered && c.want != "" && run.anchor != "" {
						raw, _ := json.Marshal(rep)
						if !strings.Contains(string(raw), c.want) {
							t.Errorf("report lacks %q: %s", c.want, raw)
						}
					}
				}
			})
		})
	}
}

// Records and entries written before keys existed are reported as
// unauthenticated: not ok, and not tampered either.
func TestVerifyReportsRecordsWrittenBeforeKeys(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		p := approveHold(t, s)
		rewriteChains(t, db, nil)
		exec(t, db, `UPDATE approval_proposals SET mac = '', mac_columns = ''`)
		exec(t, db, `UPDATE approval_decisions SET mac = ''`)
		rep, err := Audit(ctx, db, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Status != StatusUnauthenticated || len(rep.Records.Problems) > 0 || len(rep.Global.Problems) > 0 {
			t.Fatalf("legacy store: %+v", rep)
		}
		for _, v := range rep.Receipts {
			if v.OK || v.Status != StatusUnauthenticated || v.Unauthenticated != v.Entries {
				t.Errorf("legacy receipt %+v", v)
			}
		}
		if len(rep.Records.Unauthenticated) != 2 || !strings.Contains(rep.Records.Unauthenticated[0], "written before keys") {
			t.Errorf("unauthenticated records %v", rep.Records.Unauthenticated)
		}
		// And an old approval does not dispatch: it cannot be proven.
		if _, err := s.MayDispatch(ctx, Action{Kind: KindHold, ProposalID: p.ID}); !IsRefusal(err) || !strings.Contains(err.Error(), "before proposals were sealed") {
			t.Errorf("legacy approval dispatched: %v", err)
		}
	})
}

// Case 7: DW_CLOCK (a replayed clock) does not date decisions, or
// anything else the approvals write, except on a store made for replay;
// an expired request is never decidable and no decision predates its
// proposal.
func TestDecisionsUseTheRealTime(t *testing.T) {
	cases := []struct {
		name string
		// offset is where the replayed clock stands relative to now.
		offset time.Duration
		replay string // "": normal store; "marked"; "forged"
		// proposed is whose clock made the proposal: "replayed", "real",
		// or "then" (the real time at offset, as if proposed back then).
		proposed string
		want     string // refusal, or "" for a decision
		wantAt   time.Duration
	}{
		{"replayed clock approving an expired request", -10 * time.Hour, "", "then", "", 0},
		{"proposal dated ahead, decided now", time.Hour, "", "then", "never dated before its proposal", 0},
		{"replay store: a decision is dated at its proposal, not before", -time.Hour, "marked", "real", "decided", 0},
		{"forged replay flag", -10 * time.Hour, "forged", "then", "", 0},
		{"store made for replay", -2 * time.Hour, "marked", "replayed", "decided", -2 * time.Hour},
		// One approvals clock: on a normal store the replayed clock dates
		// neither the proposal nor the decision, so they agree.
		{"replayed clock years behind on a normal store", -3 * 365 * 24 * time.Hour, "", "replayed", "decided", 0},
		{"replayed clock years ahead on a normal store", 3 * 365 * 24 * time.Hour, "", "replayed", "decided", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				cfg := testCfg(t)
				replayed := New(db, cfg, clock.NewOffset(time.Now().Add(c.offset)), nil)
				real := New(db, cfg, clock.System{}, nil)
				switch c.replay {
				case "marked":
					if err := MarkReplayStore(ctx, db, cfg.Home, time.Now()); err != nil {
						t.Fatal(err)
					}
				case "forged":
					if err := store.PutSetting(ctx, db, replaySetting, "yes", time.Now()); err != nil {
						t.Fatal(err)
					}
				}
				proposer := replayed
				switch c.proposed {
				case "real":
					proposer = real
				case "then":
					proposer = New(db, cfg, clock.NewFake(time.Now().Add(c.offset)), nil)
				}
				// A live change: only its owner, no escalation to a fresh request.
				p := mustPropose(t, proposer, schemaV13())
				got, err := replayed.Decide(ctx, p.ID, term(t, replayed, "alice"), VerdictApprove, "replayed")
				var dec int
				if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM approval_decisions WHERE proposal_id = ?`, p.ID).Scan(&dec); err != nil {
					t.Fatal(err)
				}
				switch {
				case c.want == "decided":
					if err != nil || got.Decision == nil {
						t.Fatalf("decision on a replay store: %v", err)
					}
					if d := got.Decision.At.Sub(time.Now().Add(c.wantAt)); d > time.Minute || d < -time.Minute {
						t.Errorf("decision dated %s, want %s from now", got.Decision.At, c.wantAt)
					}
					if d := got.CreatedAt.Sub(time.Now().Add(c.wantAt)); c.proposed == "replayed" && (d > time.Minute || d < -time.Minute) {
						t.Errorf("proposal dated %s, want %s from now, like its decision", got.CreatedAt, c.wantAt)
					}
				case c.want != "":
					if err == nil || !strings.Contains(err.Error(), c.want) || dec != 0 {
						t.Fatalf("got %v (%d decisions); want a refusal saying %q", err, dec, c.want)
					}
				default:
					// Proposed 10 hours ago by the replayed clock, its 2h
					// request to alice has run out in real time.
					if err == nil || dec != 0 {
						t.Fatalf("an expired request was decided: %+v", got)
					}
					var state string
					_ = db.QueryRowContext(ctx, `SELECT state FROM approval_proposals WHERE id = ?`, p.ID).Scan(&state)
					if state == string(StateApproved) {
						t.Fatalf("state %s", state)
					}
				}
			})
		})
	}
}

// The key lives outside the store: a 0600 file in DW_HOME, created on
// first use, or the environment. A key file others can read is refused.
func TestReceiptKeyLivesOutsideTheStore(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		// A DW_HOME that does not exist yet: Data Workers creates it.
		t.Setenv("DW_HOME", filepath.Join(t.TempDir(), "new-home"))
		cfg, err := config.Parse("test.yaml", []byte(testConfig))
		if err != nil {
			t.Fatal(err)
		}
		s := New(db, cfg, clock.NewFake(t0), nil)
		approveHold(t, s)
		path := filepath.Join(s.cfg.Home, keyFileName)
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("key file %s: %v, %v", path, fi, err)
		}
		if fi, _ := os.Stat(s.cfg.Home); fi.Mode().Perm() != 0o700 {
			t.Errorf("DW_HOME mode %04o, want 0700", fi.Mode().Perm())
		}
		raw, _ := os.ReadFile(path)
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM kv WHERE value LIKE ?`, "%"+strings.TrimSpace(string(raw))[:16]+"%").Scan(&n); err != nil || n != 0 {
			t.Errorf("the key appears in the store (%d rows, %v)", n, err)
		}
	})

	cases := []struct {
		name  string
		setup func(t *testing.T, home string)
		want  string
	}{
		{"key file readable by others", func(t *testing.T, home string) {
			if err := os.WriteFile(filepath.Join(home, keyFileName), []byte(strings.Repeat("ab", 32)), 0o644); err != nil {
				t.Fatal(err)
			}
			_ = os.Chmod(filepath.Join(home, keyFileName), 0o644)
		}, "readable by other users"},
		{"short key in the environment", func(t *testing.T, home string) { t.Setenv(keyEnv, "abcd") }, "at least 32 are required"},
		{"key in the environment is not hex or base64", func(t *testing.T, home string) { t.Setenv(keyEnv, "not a key!") }, "neither hex nor base64"},
		{"key file named in the environment is a device", func(t *testing.T, home string) {
			t.Setenv(keyFileEnv, "/dev/zero")
		}, "not a regular file"},
		{"key file named in the environment is a directory", func(t *testing.T, home string) {
			t.Setenv(keyFileEnv, home)
		}, "not a regular file"},
		{"key file named in the environment is missing", func(t *testing.T, home string) {
			t.Setenv(keyFileEnv, filepath.Join(home, "nope.key"))
		}, "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			c.setup(t, home)
			if _, err := loadKeys(home); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("loadKeys: %v; want %q", err, c.want)
			}
		})
	}

	t.Run("key from the environment", func(t *testing.T) {
		home := t.TempDir()
		key := strings.Repeat("0f", 32)
		t.Setenv(keyEnv, key)
		ks, err := loadKeys(home)
		if err != nil || ks.source != keyEnv {
			t.Fatalf("%+v, %v", ks, err)
		}
		if _, err := os.Stat(filepath.Join(home, keyFileName)); err == nil {
			t.Error("a key file was created although the environment names the key")
		}
		raw, _ := hex.DecodeString(key)
		if string(ks.receipt) != string(newKeyset(raw, "").receipt) {
			t.Error("keys differ from the environment's")
		}
	})
}

// Processes starting at once on a fresh DW_HOME all end up with one key.
func TestKeyFileCreatedOnceUnderRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "home", keyFileName)
	const n = 8
	keys := make(chan string, n)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			k, err := readKeyFile(path, true)
			keys <- hex.EncodeToString(k)
			errs <- err
		}()
	}
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		seen[<-keys] = true
	}
	if len(seen) != 1 {
		t.Errorf("%d different keys from one key file", len(seen))
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".receipt.key.*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// The org receipt says in words who may approve and what changed.
func TestApproverChangeReadsInTheReceipt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s, clk := fixture(t, db)
		mustPropose(t, s, holdDAG())
		mustPropose(t, New(db, swappedConfig(t, "os_users: [bob]", "os_users: [bob, mallory]"), clk, nil), holdDAG())
		doc, err := Receipt(context.Background(), db, OrgReceiptID)
		if err != nil {
			t.Fatal(err)
		}
		md := RenderMarkdown(doc)
		for _, want := range []string{
			"domain billing (standard) approvers recorded: bob [os:bob slack:U0BOB], carol [os:carol slack:U0CAROL]",
			"domain billing (standard) approvers changed to bob [os:bob os:mallory slack:U0BOB], carol [os:carol slack:U0CAROL], were bob [os:bob slack:U0BOB]",
		} {
			if !strings.Contains(md, want) {
				t.Errorf("org receipt lacks %q:\n%s", want, md)
			}
		}
	})
}
