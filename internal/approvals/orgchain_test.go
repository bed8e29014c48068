package approvals

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// Issue 12: the governance reads that gate dispatch verify the org chain
// (from this process's checkpoint), so an edit of an older entry, or the
// tail removed with the head moved back, fails closed at dispatch, not
// only under dw receipt verify.

// forgetCheckpoints makes the next read behave as a new process's.
func forgetCheckpoints() {
	orgCheckpoints.Lock()
	clear(orgCheckpoints.m)
	orgCheckpoints.Unlock()
}

// failsClosed asserts that dispatch is refused as if stopped, naming the
// chain, and that billing (L3, reruns open) reads L0.
func failsClosed(t *testing.T, s *Service, want string) {
	t.Helper()
	ctx := context.Background()
	_, err := s.MayDispatch(ctx, Action{Domain: "billing", Kind: KindRerun, Reversible: true})
	if !IsRefusal(err) || !strings.Contains(err.Error(), "org receipt does not verify") || !strings.Contains(err.Error(), want) {
		t.Fatalf("dispatch: %v; want a refusal: the org receipt does not verify (%s)", err, want)
	}
	st, err := s.StopStatus(ctx)
	if err != nil || !st.Active || !strings.Contains(st.Tampered, want) {
		t.Fatalf("stop: %+v, %v; want active, tampered naming %q", st, err, want)
	}
	li, err := s.Level(ctx, "billing")
	if err != nil || li.Level != "L0" || li.Source != "tampered" || !strings.Contains(li.Tampered, want) {
		t.Fatalf("billing: %+v, %v; want L0, tampered", li, err)
	}
}

// governedStore: approvers pinned, a stop pulled and lifted, billing
// lowered to L1 and back, the stop pulled again.
func governedStore(t *testing.T, db *store.DB) (*Service, []Entry) {
	t.Helper()
	ctx := context.Background()
	s, clk := fixture(t, db)
	pinDomains(t, s)
	steps := []func() error{
		func() error { _, err := s.Stop(ctx, "ops", "bad deploy"); return err },
		func() error { _, err := s.Resume(ctx, term(t, s, "bob"), "rolled back"); return err },
		func() error {
			_, err := s.SetAutonomy(ctx, "billing", "L1", term(t, s, "bob"), "incident week")
			return err
		},
		func() error { _, err := s.ResetAutonomy(ctx, "billing", term(t, s, "bob"), "over"); return err },
		func() error { _, err := s.Stop(ctx, "ops", "second deploy"); return err },
	}
	for _, step := range steps {
		clk.Advance(time.Minute)
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	es, err := Entries(ctx, db, OrgReceiptID)
	if err != nil {
		t.Fatal(err)
	}
	return s, es
}

func seqOf(t *testing.T, es []Entry, kind string, nth int) int64 {
	t.Helper()
	for _, e := range es {
		if e.Kind == kind {
			if nth == 0 {
				return e.Seq
			}
			nth--
		}
	}
	t.Fatalf("no %s entry", kind)
	return 0
}

func TestOrgChainEditsFailClosedAtDispatch(t *testing.T) {
	cases := []struct {
		name string
		// fresh reads as a new process would: no checkpoint kept.
		fresh bool
		// elsewhere reads on another machine: no anchor file either.
		elsewhere bool
		tamper    func(t *testing.T, db *store.DB, es []Entry)
		want      string
	}{
		{name: "latest stop's kind edited so an older resume reads as the latest", fresh: true,
			tamper: func(t *testing.T, db *store.DB, es []Entry) {
				execSQL(t, db, `UPDATE receipt_entries SET kind = 'cause' WHERE receipt_id = 'org' AND seq = ?`, seqOf(t, es, EntryStop, 1))
				execSQL(t, db, `DELETE FROM kv WHERE key = 'org.stop'`)
			}, want: "does not match its MAC: it was edited"},
		{name: "stop removed from the tail, head and global head rolled back",
			tamper: func(t *testing.T, db *store.DB, es []Entry) {
				last := es[len(es)-1]
				prev := es[len(es)-2]
				execSQL(t, db, `DELETE FROM receipt_entries WHERE receipt_id = 'org' AND seq = ?`, last.Seq)
				execSQL(t, db, `UPDATE receipt_heads SET seq = ?, hash = ? WHERE receipt_id = 'org'`, prev.Seq, prev.Hash)
				execSQL(t, db, `UPDATE receipt_global_head SET seq = seq - 1, hash = ? WHERE id = 1`, prev.Hash)
				execSQL(t, db, `DELETE FROM kv WHERE key = 'org.stop'`)
			}, want: "head was moved back"},
		{name: "older lowering edited to L4 and the tail after it rolled back",
			tamper: func(t *testing.T, db *store.DB, es []Entry) {
				lower := seqOf(t, es, EntryAutonomy, 0)
				execSQL(t, db, `UPDATE receipt_entries SET payload = REPLACE(payload, '"to":"L1"', '"to":"L4"') WHERE receipt_id = 'org' AND seq = ?`, lower)
				var h string
				if err := db.QueryRowContext(context.Background(), `SELECT hash FROM receipt_entries WHERE receipt_id = 'org' AND seq = ?`, lower).Scan(&h); err != nil {
					t.Fatal(err)
				}
				execSQL(t, db, `DELETE FROM receipt_entries WHERE receipt_id = 'org' AND seq > ?`, lower)
				execSQL(t, db, `UPDATE receipt_heads SET seq = ?, hash = ? WHERE receipt_id = 'org'`, lower, h)
				execSQL(t, db, `DELETE FROM kv WHERE key = 'org.stop'`)
				execSQL(t, db, `INSERT INTO kv (key, value, updated_ms) VALUES ('autonomy.billing', ?, 0)`, `{"level":"L4","by":"bob","reason":"incident week","at":"2026-03-10T15:08:00Z"}`)
			}, want: "head was moved back"},
		{name: "same, read by a new process on another machine", fresh: true, elsewhere: true,
			tamper: func(t *testing.T, db *store.DB, es []Entry) {
				lower := seqOf(t, es, EntryAutonomy, 0)
				execSQL(t, db, `UPDATE receipt_entries SET payload = REPLACE(payload, '"to":"L1"', '"to":"L4"') WHERE receipt_id = 'org' AND seq = ?`, lower)
				var h string
				if err := db.QueryRowContext(context.Background(), `SELECT hash FROM receipt_entries WHERE receipt_id = 'org' AND seq = ?`, lower).Scan(&h); err != nil {
					t.Fatal(err)
				}
				execSQL(t, db, `DELETE FROM receipt_entries WHERE receipt_id = 'org' AND seq > ?`, lower)
				execSQL(t, db, `UPDATE receipt_heads SET seq = ?, hash = ? WHERE receipt_id = 'org'`, lower, h)
				execSQL(t, db, `DELETE FROM kv WHERE key = 'org.stop'`)
			}, want: "does not match its MAC"},
		{name: "an entry in the middle removed", fresh: true,
			tamper: func(t *testing.T, db *store.DB, es []Entry) {
				execSQL(t, db, `DELETE FROM receipt_entries WHERE receipt_id = 'org' AND seq = ?`, seqOf(t, es, EntryResume, 0))
			}, want: "missing before entry"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				s, es := governedStore(t, db)
				// The honest state first: stopped, billing at its L3.
				if st, err := s.StopStatus(ctx); err != nil || !st.Active || st.Tampered != "" {
					t.Fatalf("before: %+v, %v", st, err)
				}
				c.tamper(t, db, es)
				if c.fresh {
					forgetCheckpoints()
				}
				if c.elsewhere {
					if err := os.Remove(filepath.Join(s.cfg.Home, anchorFileName)); err != nil {
						t.Fatal(err)
					}
					cacheReset()
				}
				failsClosed(t, s, c.want)
				// A governance act over it is refused too: the chain cannot
				// be built on.
				if _, err := s.Resume(ctx, term(t, s, "bob"), "looks fine"); !isInput(err) || !strings.Contains(err.Error(), "org receipt does not verify") {
					t.Errorf("resume over a broken chain: %v", err)
				}
			})
		})
	}
}

// The checkpoint keeps reads incremental: a second read walks nothing,
// a read after one append walks that one entry.
func TestOrgChainCheckpointWalksOnlyWhatIsNew(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		pinDomains(t, s)
		for i := range 40 {
			clk.Advance(time.Minute)
			lvl := []string{"L1", "L3"}[i%2]
			if _, err := s.SetAutonomy(ctx, "billing", lvl, term(t, s, "bob"), "round"); err != nil {
				t.Fatal(err)
			}
		}
		n := int64(orgEntryCount(t, db))
		forgetCheckpoints()
		walked := func(read func()) int64 {
			t.Helper()
			before := orgEntriesWalked.Load()
			read()
			return orgEntriesWalked.Load() - before
		}
		dispatchReads := func() {
			if _, err := s.StopStatus(ctx); err != nil {
				t.Fatal(err)
			}
			if li, err := s.Level(ctx, "billing"); err != nil || li.Level != "L3" || li.Tampered != "" {
				t.Fatalf("billing: %+v, %v", li, err)
			}
			if _, err := s.MayDispatch(ctx, Action{Domain: "billing", Kind: KindRerun, Reversible: true}); err != nil {
				t.Fatal(err)
			}
		}
		if w := walked(dispatchReads); w != n {
			t.Errorf("first reads walked %d entries; want the whole chain, %d", w, n)
		}
		for range 5 {
			if w := walked(dispatchReads); w != 0 {
				t.Errorf("repeated reads walked %d entries; want 0", w)
			}
		}
		if _, err := s.Stop(ctx, "ops", "one more entry"); err != nil {
			t.Fatal(err)
		}
		// Stop's own read inside its transaction may walk the new entry
		// too; after it, the next reads walk at most that one.
		if w := walked(func() { _, _ = s.StopStatus(ctx) }); w > 1 {
			t.Errorf("a read after one append walked %d entries; want at most 1", w)
		}
		if w := walked(func() { _, _ = s.StopStatus(ctx) }); w != 0 {
			t.Errorf("the read after that walked %d entries; want 0", w)
		}
	})
}
