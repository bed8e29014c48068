package approvals

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// replayFake is a replayed clock (as DW_CLOCK makes) that moves only when
// told, so replay-store tests can cross a deadline without waiting.
type replayFake struct{ *clock.Fake }

func (replayFake) Replayed() bool { return true }

// allEntries reads every receipt entry in the store.
func allEntries(t *testing.T, db *store.DB) []Entry {
	t.Helper()
	ids, err := ReceiptIDs(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	var out []Entry
	for _, id := range ids {
		es, err := Entries(context.Background(), db, id)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, es...)
	}
	return out
}

// One approvals clock, on a store not made for replay: a replayed clock
// years ahead dates nothing, so the sweep expires no live request, no
// record lands in the future, and the chain still verifies.
func TestReplayedClockAheadOnANormalStore(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		cfg := testCfg(t)
		ahead := replayFake{clock.NewFake(time.Now().AddDate(5, 0, 0))}
		s := New(db, cfg, ahead, nil)
		before := time.Now().UTC()

		live := mustPropose(t, s, schemaV13()) // live class: expiry would expire it outright
		std := mustPropose(t, s, holdDAG())    // standard: expiry would escalate it to carol
		esc, err := s.Sweep(ctx)
		if err != nil || len(esc) != 0 {
			t.Fatalf("sweep with the clock 5 years ahead: %+v, %v; want nothing due", esc, err)
		}
		ahead.Advance(24 * time.Hour)
		if esc, err := s.Sweep(ctx); err != nil || len(esc) != 0 {
			t.Fatalf("sweep a day further ahead: %+v, %v", esc, err)
		}
		for _, id := range []string{live.ID, std.ID} {
			p, err := s.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if p.State != StatePending || p.Round != 0 {
				t.Errorf("%s is %s round %d; want pending round 0 (nothing expired in real time)", id, p.State, p.Round)
			}
			if p.CreatedAt.Before(before.Add(-time.Second)) || p.CreatedAt.After(time.Now().Add(time.Second)) {
				t.Errorf("%s created %s; want the real time (~%s)", id, p.CreatedAt, before)
			}
		}
		// A decision, a step, a notice and an external entry, all under
		// the clock set ahead.
		got, err := s.Decide(ctx, std.ID, term(t, s, "bob"), VerdictApprove, "ok")
		if err != nil {
			t.Fatal(err)
		}
		if got.Decision.At.Before(got.CreatedAt) {
			t.Errorf("decision %s before its proposal %s", got.Decision.At, got.CreatedAt)
		}
		if _, err := s.RecordStep(ctx, std.ID, Step{Actor: "dw-incidents", Description: "paused the DAG"}); err != nil {
			t.Fatal(err)
		}
		ns, err := s.ClaimNotices(ctx, 10)
		if err != nil || len(ns) == 0 {
			t.Fatalf("notices: %+v, %v", ns, err)
		}
		if err := s.NoticePosted(ctx, ns[0], "slack", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := AppendReceipt(ctx, db, ahead.Now(), "INC-1", EntryCause, "dw-incidents", map[string]any{"summary": "dated by the agent's own clock"}); err != nil {
			t.Fatal(err)
		}
		after := time.Now().UTC().Add(time.Second)
		es := allEntries(t, db)
		if len(es) < 8 {
			t.Fatalf("only %d entries written", len(es))
		}
		for _, e := range es {
			if e.At.After(after) {
				t.Errorf("entry %d (%s) dated %s, in the future", e.Seq, e.Kind, e.At)
			}
		}
		rep, err := Audit(ctx, db, "", "")
		if err != nil || rep.Status != StatusOK {
			t.Fatalf("verify: %+v, %v", rep, err)
		}
	})
}

// On a store made for replay the replayed time dates everything, so the
// proposal, its decision and its expiry agree with one another.
func TestReplayStoreUsesTheReplayedTimeThroughout(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		cfg := testCfg(t)
		// Marked as the demo marks its store: at the replayed time, which
		// dates the org receipt's first entry the mark is bound to.
		if err := MarkReplayStore(ctx, db, cfg.Home, t0); err != nil {
			t.Fatal(err)
		}
		replay := replayFake{clock.NewFake(t0)} // 2026-03-10, months before the real now
		s := New(db, cfg, replay, nil)

		p := mustPropose(t, s, holdDAG())
		if !p.CreatedAt.Equal(t0) || !p.ExpiresAt.Equal(t0.Add(4*time.Hour)) {
			t.Fatalf("proposal %s..%s; want %s and 4h later", p.CreatedAt, p.ExpiresAt, t0)
		}
		replay.Advance(time.Hour)
		got, err := s.Decide(ctx, p.ID, term(t, s, "bob"), VerdictApprove, "ok")
		if err != nil {
			t.Fatal(err)
		}
		if !got.Decision.At.Equal(t0.Add(time.Hour)) {
			t.Errorf("decision at %s; want the replayed %s", got.Decision.At, t0.Add(time.Hour))
		}
		// A live request runs out in replayed time, dated by it.
		live := mustPropose(t, s, schemaV13()) // streaming: 2h expiry
		replay.Advance(3 * time.Hour)
		esc, err := s.Sweep(ctx)
		if err != nil || len(esc) != 1 || !esc[0].Expired || !esc[0].At.Equal(t0.Add(4*time.Hour)) {
			t.Fatalf("sweep: %+v, %v; want %s expired at the replayed %s", esc, err, live.ID, t0.Add(4*time.Hour))
		}
		if _, err := s.Decide(ctx, live.ID, term(t, s, "alice"), VerdictApprove, "late"); err == nil {
			t.Fatal("an expired request was decided")
		}
		for _, e := range allEntries(t, db) {
			if e.At.Before(t0) || e.At.After(t0.Add(4*time.Hour)) {
				t.Errorf("entry %d (%s) dated %s; want within the replayed %s..+4h", e.Seq, e.Kind, e.At, t0)
			}
		}
		if rep, err := Audit(ctx, db, "", ""); err != nil || rep.Status != StatusOK {
			t.Fatalf("verify: %+v, %v", rep, err)
		}
	})
}
