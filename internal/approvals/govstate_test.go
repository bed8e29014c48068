package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// Issue 12: the stop and autonomy levels dispatch acts on are what the
// sealed org receipt proves; an edit of the kv cache is not honoured and
// verify reports it.

func execSQL(t *testing.T, db *store.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// orgVerification is the org receipt's result in VerifyAll, and the
// overall audit status.
func orgVerification(t *testing.T, db *store.DB) (Verification, string) {
	t.Helper()
	ctx := context.Background()
	all, err := VerifyAll(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Audit(ctx, db, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range all {
		if v.ReceiptID == OrgReceiptID {
			return v, rep.Status
		}
	}
	return Verification{ReceiptID: OrgReceiptID, Status: "absent"}, rep.Status
}

func governanceFindings(v Verification) int {
	n := 0
	for _, p := range v.Problems {
		if strings.HasPrefix(p, "governance: ") {
			n++
		}
	}
	return n
}

const forgedL4 = `{"level":"L4","by":"root","reason":"looks official","at":"2026-12-01T14:00:00Z"}`

// The repro: the stop row deleted and a level inserted by hand.
func TestStopDeletedFromStoreStillRefuses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		if _, err := s.Stop(ctx, "ops", "test"); err != nil {
			t.Fatal(err)
		}
		execSQL(t, db, `DELETE FROM kv WHERE key = 'org.stop'`)
		execSQL(t, db, `INSERT INTO kv (key, value, updated_ms) VALUES ('autonomy.streaming', ?, 0)`, forgedL4)

		st, err := s.StopStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Active || st.Tampered == "" {
			t.Fatalf("stop after its row was deleted: %+v; want active and tampered", st)
		}
		_, err = s.MayDispatch(ctx, Action{Domain: "billing", Kind: KindRerun, Reversible: true})
		var r *Refusal
		if !errors.As(err, &r) || !strings.Contains(r.Reason, "tampered") || !strings.Contains(r.Reason, "dw receipt verify") {
			t.Fatalf("dispatch after the stop row was deleted: %v; want a refusal naming the tampering and dw receipt verify", err)
		}
		li, err := s.Level(ctx, "streaming")
		if err != nil {
			t.Fatal(err)
		}
		if li.Level != "L0" || li.Source != "tampered" || li.SetBy == "root" || li.Tampered == "" {
			t.Fatalf("streaming after a forged L4: %+v; want L0, tampered", li)
		}
		v, status := orgVerification(t, db)
		if v.OK || v.Status != StatusTampered || governanceFindings(v) != 2 || status != StatusTampered {
			t.Fatalf("verify: %+v (audit %s); want tampered with 2 governance findings", v, status)
		}
	})
}

// Every way of raising a level through kv alone drops the domain to L0.
func TestAutonomyRaisedByStoreEditNotHonoured(t *testing.T) {
	cases := []struct {
		name   string
		domain string
		setup  func(t *testing.T, s *Service)
		edit   string
		args   []any
	}{
		{name: "row inserted for a domain never set", domain: "billing",
			edit: `INSERT INTO kv (key, value, updated_ms) VALUES ('autonomy.billing', ?, 0)`, args: []any{forgedL4}},
		{name: "genuine row rewritten to a higher level", domain: "streaming",
			setup: func(t *testing.T, s *Service) {
				pinDomains(t, s)
				if _, err := s.SetAutonomy(context.Background(), "streaming", "L3", term(t, s, "alice"), "trial"); err != nil {
					t.Fatal(err)
				}
			},
			edit: `UPDATE kv SET value = ? WHERE key = 'autonomy.streaming'`,
			args: []any{`{"level":"L4","by":"alice","reason":"trial","at":"2026-03-10T15:05:00Z"}`}},
		{name: "genuine lowering deleted so the higher config level returns", domain: "billing",
			setup: func(t *testing.T, s *Service) {
				pinDomains(t, s)
				if _, err := s.SetAutonomy(context.Background(), "billing", "L1", term(t, s, "bob"), "incident week"); err != nil {
					t.Fatal(err)
				}
			},
			edit: `DELETE FROM kv WHERE key = 'autonomy.billing'`},
		{name: "org receipt entry edited to say L4", domain: "streaming",
			setup: func(t *testing.T, s *Service) {
				pinDomains(t, s)
				if _, err := s.SetAutonomy(context.Background(), "streaming", "L3", term(t, s, "alice"), "trial"); err != nil {
					t.Fatal(err)
				}
			},
			edit: `UPDATE receipt_entries SET payload = REPLACE(payload, '"to":"L3"', '"to":"L4"') WHERE receipt_id = 'org'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				s, _ := fixture(t, db)
				if c.setup != nil {
					c.setup(t, s)
				}
				execSQL(t, db, c.edit, c.args...)
				li, err := s.Level(ctx, c.domain)
				if err != nil {
					t.Fatal(err)
				}
				if li.Level != "L0" || li.Source != "tampered" || li.Tampered == "" {
					t.Fatalf("level after %s: %+v; want L0, tampered", c.name, li)
				}
				// A reversible rerun would run at L3 (opened) or L4.
				_, err = s.MayDispatch(ctx, Action{Domain: c.domain, Kind: KindRerun, Reversible: true})
				if !IsRefusal(err) || !strings.Contains(err.Error(), "tampered") {
					t.Fatalf("dispatch: %v; want a refusal naming the tampering", err)
				}
				levels, err := s.Levels(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range levels {
					if l.Domain != c.domain && l.Tampered != "" {
						t.Errorf("untouched domain %s reads tampered: %+v", l.Domain, l)
					}
				}
				v, status := orgVerification(t, db)
				if v.OK || status != StatusTampered || len(v.Problems) == 0 {
					t.Fatalf("verify: %+v (audit %s); want tampered", v, status)
				}
			})
		})
	}
}

// A resume entry forged without the key does not lift a stop.
func TestForgedResumeEntryDoesNotLiftStop(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		if _, err := s.Stop(ctx, "ops", "freeze"); err != nil {
			t.Fatal(err)
		}
		for _, gseq := range []int64{0, 999} {
			execSQL(t, db, `DELETE FROM receipt_entries WHERE receipt_id = 'org' AND kind = 'resume'`)
			execSQL(t, db, `INSERT INTO receipt_entries (receipt_id, seq, kind, actor, at_ms, payload, prev_hash, hash, gseq, gprev)
				VALUES ('org', 100, 'resume', 'bob', 0, '{}', '', ?, ?, '')`,
				entryHash(OrgReceiptID, 100, EntryResume, "bob", 0, "", "{}"), gseq)
			execSQL(t, db, `DELETE FROM kv WHERE key = 'org.stop'`)
			st, err := s.StopStatus(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Active || st.Tampered == "" {
				t.Fatalf("forged resume (gseq %d): %+v; want the stop to hold as tampered", gseq, st)
			}
		}
	})
}

// A healthy stretch through the service: every state is honoured, nothing
// reads tampered, verify stays ok; a person's action over a tampered state
// repairs it and the finding is kept in the receipt.
func TestGenuineGovernanceHonouredAndVerifies(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		pinDomains(t, s)
		quiet := func(step string) {
			t.Helper()
			st, err := s.StopStatus(ctx)
			if err != nil || st.Tampered != "" {
				t.Fatalf("%s: stop %+v, %v", step, st, err)
			}
			levels, err := s.Levels(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range levels {
				if l.Tampered != "" {
					t.Fatalf("%s: %s reads tampered: %s", step, l.Domain, l.Tampered)
				}
			}
			if v, status := orgVerification(t, db); status != StatusOK || (v.Status != "absent" && !v.OK) {
				t.Fatalf("%s: verify %+v (audit %s)", step, v, status)
			}
		}
		quiet("fresh store")
		for i := range 3 {
			clk.Advance(time.Minute)
			if _, err := s.Stop(ctx, "ops", "freeze"); err != nil {
				t.Fatal(err)
			}
			quiet("stopped")
			if _, err := s.MayDispatch(ctx, Action{Domain: "billing", Kind: KindRerun, Reversible: true}); !IsRefusal(err) || strings.Contains(err.Error(), "tampered") {
				t.Fatalf("under a genuine stop: %v", err)
			}
			if _, err := s.Resume(ctx, term(t, s, "bob"), "fixed"); err != nil {
				t.Fatal(err)
			}
			quiet("resumed")
			lvl := []string{"L4", "L1", "L3"}[i]
			if _, err := s.SetAutonomy(ctx, "streaming", lvl, term(t, s, "alice"), "round"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.SetAutonomy(ctx, "billing", "L2", term(t, s, "bob"), "round"); err != nil {
				t.Fatal(err)
			}
			li, err := s.Level(ctx, "streaming")
			if err != nil || li.Level != lvl || li.Source != "set" || li.SetBy != "alice" || li.Reason != "round" {
				t.Fatalf("streaming after a genuine set to %s: %+v, %v", lvl, li, err)
			}
			quiet("levels set")
			if _, err := s.ResetAutonomy(ctx, "billing", term(t, s, "bob"), "back"); err != nil {
				t.Fatal(err)
			}
			quiet("level reset")
		}
		if _, err := s.MayDispatch(ctx, Action{Domain: "billing", Kind: KindRerun, Reversible: true}); err != nil {
			t.Fatalf("billing back at L3 with reruns opened: %v", err)
		}

		// Tampered, then repaired by the people who may: each repair is
		// recorded with what it replaced.
		execSQL(t, db, `INSERT INTO kv (key, value, updated_ms) VALUES ('org.stop', '{"by":"mallory","reason":"x"}', 0)`)
		execSQL(t, db, `INSERT INTO kv (key, value, updated_ms) VALUES ('autonomy.loyalty', ?, 0)`, forgedL4)
		if _, err := s.Resume(ctx, term(t, s, "bob"), "forged stop found by verify"); err != nil {
			t.Fatalf("resume over a forged stop: %v", err)
		}
		if _, err := s.ResetAutonomy(ctx, "loyalty", term(t, s, "carol"), "forged level found by verify"); err != nil {
			t.Fatalf("reset over a forged level: %v", err)
		}
		quiet("repaired")
		es, err := Entries(ctx, db, OrgReceiptID)
		if err != nil {
			t.Fatal(err)
		}
		repairs := 0
		for _, e := range es[len(es)-2:] {
			var m map[string]any
			if err := json.Unmarshal(e.Payload, &m); err != nil {
				t.Fatal(err)
			}
			if r, _ := m["replaces_tampered"].(string); r != "" {
				repairs++
			}
		}
		if repairs != 2 {
			t.Errorf("repairs recorded: %d of 2", repairs)
		}
	})
}

// A store written the way the code before this check wrote it (kv row and
// org entry made side by side, the row dated by a different clock reading)
// keeps working.
func TestGovernanceFromStoreBeforeTheCheck(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		pinDomains(t, s)
		rowAt := t0.Add(-1500 * time.Microsecond)
		old := struct {
			By     string    `json:"by"`
			OSUser string    `json:"os_user"`
			Reason string    `json:"reason"`
			Since  time.Time `json:"since"`
		}{"os:ops", "ops", "old stop", rowAt}
		raw, _ := json.Marshal(old)
		if err := store.PutSetting(ctx, db, stopKey, string(raw), rowAt); err != nil {
			t.Fatal(err)
		}
		if _, err := AppendReceipt(ctx, db, t0, OrgReceiptID, EntryStop, "os:ops", map[string]any{"reason": "old stop", "os_user": "ops"}); err != nil {
			t.Fatal(err)
		}
		lvl, _ := json.Marshal(levelOverride{Level: "L3", By: "alice", Reason: "old", At: rowAt})
		if err := store.PutSetting(ctx, db, autonomyKey("streaming"), string(lvl), rowAt); err != nil {
			t.Fatal(err)
		}
		if _, err := AppendReceipt(ctx, db, t0, OrgReceiptID, EntryAutonomy, "alice", map[string]any{
			"domain": "streaming", "from": "L2", "to": "L3", "reason": "old", "channel": ChannelTerminal,
		}); err != nil {
			t.Fatal(err)
		}
		st, err := s.StopStatus(ctx)
		if err != nil || !st.Active || st.Tampered != "" || st.By != "os:ops" || st.Reason != "old stop" {
			t.Fatalf("old stop: %+v, %v", st, err)
		}
		li, err := s.Level(ctx, "streaming")
		if err != nil || li.Level != "L3" || li.Source != "set" || li.Tampered != "" {
			t.Fatalf("old level: %+v, %v", li, err)
		}
		if v, status := orgVerification(t, db); !v.OK || status != StatusOK {
			t.Fatalf("verify: %+v (audit %s)", v, status)
		}
		if _, err := s.Resume(ctx, term(t, s, "bob"), "done"); err != nil {
			t.Fatal(err)
		}
		if st, err := s.StopStatus(ctx); err != nil || st.Active {
			t.Fatalf("after resume: %+v, %v", st, err)
		}
	})
}

// BenchmarkGovernanceRead measures what dispatch reads on every call (the
// stop and one domain's level, each checked against the org receipt) on a
// store whose org receipt holds 600 governance entries, against one
// settings read: the ratio stays flat as the receipt grows because a read
// checks the latest entries and walks only the chain appended since this
// process's checkpoint (nothing, here, after the first read).
func BenchmarkGovernanceRead(b *testing.B) {
	ctx := context.Background()
	db := storetest.SQLite(b)
	s, _ := fixture(b, db)
	err := db.InTx(ctx, func(tx *store.Tx) error {
		for i := range 200 {
			at := t0.Add(time.Duration(i) * time.Second)
			for _, d := range []string{"streaming", "billing"} {
				if _, err := s.appendEntry(ctx, tx, at, OrgReceiptID, EntryAutonomy, "alice",
					map[string]any{"domain": d, "from": "L2", "to": "L3", "reason": "bench"}); err != nil {
					return err
				}
			}
			kind := EntryStop
			if i%2 == 1 {
				kind = EntryResume
			}
			if _, err := s.appendEntry(ctx, tx, at, OrgReceiptID, kind, "alice", map[string]any{"reason": "bench"}); err != nil {
				return err
			}
		}
		lvl, _ := json.Marshal(levelOverride{Level: "L3", By: "alice", Reason: "bench", At: t0})
		return store.PutSetting(ctx, tx, autonomyKey("streaming"), string(lvl), t0)
	})
	if err != nil {
		b.Fatal(err)
	}
	// billing's last entry also set L3, but its row is missing: tampered,
	// which is found just as cheaply.
	base := baseline(b, func() {
		if _, _, _, err := store.GetSetting(ctx, db, stopKey); err != nil {
			b.Fatal(err)
		}
	})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := s.StopStatus(ctx)
		if err != nil || st.Active {
			b.Fatal(st, err)
		}
		li, err := s.Level(ctx, "streaming")
		if err != nil || li.Level != "L3" || li.Tampered != "" {
			b.Fatal(li, err)
		}
		if li, err = s.Level(ctx, "loyalty"); err != nil || li.Source != "config" {
			b.Fatal(li, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed())/float64(base), "x_settings_read")
}

// A stop recorded before keys existed (plain SHA-256 entry) still holds,
// but the same unkeyed entry after keyed ones is a forgery.
func TestUnkeyedStopEntry(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		payload := `{"os_user":"ops","reason":"old"}`
		h1 := entryHash(OrgReceiptID, 1, EntryStop, "os:ops", 0, "", payload)
		execSQL(t, db, `INSERT INTO receipt_entries (receipt_id, seq, kind, actor, at_ms, payload, prev_hash, hash, gseq, gprev)
			VALUES ('org', 1, 'stop', 'os:ops', 0, ?, '', ?, 0, '')`, payload, h1)
		execSQL(t, db, `INSERT INTO receipt_heads (receipt_id, seq, hash, updated_ms) VALUES ('org', 1, ?, 0)`, h1)
		raw, _ := json.Marshal(StopState{By: "os:ops", OSUser: "ops", Reason: "old"})
		execSQL(t, db, `INSERT INTO kv (key, value, updated_ms) VALUES ('org.stop', ?, 0)`, string(raw))
		st, err := s.StopStatus(ctx)
		if err != nil || !st.Active || st.Tampered != "" || st.Reason != "old" {
			t.Fatalf("pre-key stop: %+v, %v", st, err)
		}
		// A keyed entry before it makes an unkeyed one a forgery.
		e2, err := AppendReceipt(ctx, db, t0, OrgReceiptID, EntryApprovers, "dw", map[string]any{"domain": "x"})
		if err != nil {
			t.Fatal(err)
		}
		h3 := entryHash(OrgReceiptID, 3, EntryStop, "os:ops", 0, e2.Hash, payload)
		execSQL(t, db, `INSERT INTO receipt_entries (receipt_id, seq, kind, actor, at_ms, payload, prev_hash, hash, gseq, gprev)
			VALUES ('org', 3, 'stop', 'os:ops', 0, ?, ?, ?, 0, '')`, payload, e2.Hash, h3)
		execSQL(t, db, `UPDATE receipt_heads SET seq = 3, hash = ? WHERE receipt_id = 'org'`, h3)
		st, err = s.StopStatus(ctx)
		if err != nil || !st.Active || !strings.Contains(st.Tampered, "carries no MAC but follows keyed entries") {
			t.Fatalf("unkeyed stop after keyed entries: %+v, %v; want tampered", st, err)
		}
	})
}
