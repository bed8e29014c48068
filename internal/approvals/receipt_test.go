package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// approvedIncident builds a receipt with a cause, an approved proposal, a
// step and its execution: six entries.
func approvedIncident(t *testing.T, s *Service, clk interface{ Advance(time.Duration) }) *Proposal {
	t.Helper()
	ctx := context.Background()
	if _, err := AppendReceipt(ctx, s.db, s.clk.Now(), "INC-1", EntryCause, "dw-incidents",
		map[string]any{"summary": "schema v12 dropped response_bytes", "rank": 1}); err != nil {
		t.Fatal(err)
	}
	p := mustPropose(t, s, holdDAG())
	clk.Advance(10 * time.Minute)
	if _, err := s.Decide(ctx, p.ID, slackBy(t, s, "U0BOB"), VerdictApprove, "stop the bleeding"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordStep(ctx, p.ID, Step{Actor: "dw-connectors", Description: "paused sync_metered_usage_to_stripe",
		ChecksBefore: []Check{{Name: "dag paused", Passed: false, Detail: "active"}},
		ChecksAfter:  []Check{{Name: "dag paused", Passed: true}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkExecuted(ctx, p.ID, "dw-connectors", ""); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVerifyFindsEditedAndRemovedEntries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		approvedIncident(t, s, clk)
		v, err := Verify(ctx, db, "INC-1")
		if err != nil || !v.OK || v.Entries != 6 {
			t.Fatalf("intact chain: %+v, %v", v, err)
		}

		// Edit the decision's payload in place, as someone with SQL access might.
		if _, err := db.ExecContext(ctx, `UPDATE receipt_entries SET payload = REPLACE(payload, '"bob"', '"carol"') WHERE receipt_id = 'INC-1' AND seq = 4`); err != nil {
			t.Fatal(err)
		}
		v, _ = Verify(ctx, db, "INC-1")
		if v.OK || len(v.Problems) != 1 || !strings.Contains(v.Problems[0], "entry 4 (decision by bob") || !strings.Contains(v.Problems[0], "was edited") {
			t.Errorf("edited payload: %+v", v)
		}
		if _, err := db.ExecContext(ctx, `UPDATE receipt_entries SET payload = REPLACE(payload, '"carol"', '"bob"') WHERE receipt_id = 'INC-1' AND seq = 4`); err != nil {
			t.Fatal(err)
		}
		if v, _ = Verify(ctx, db, "INC-1"); !v.OK {
			t.Fatalf("restored payload should verify: %+v", v)
		}
		// Even a whitespace-only edit shows.
		if _, err := db.ExecContext(ctx, `UPDATE receipt_entries SET payload = payload || ' ' WHERE receipt_id = 'INC-1' AND seq = 2`); err != nil {
			t.Fatal(err)
		}
		if v, _ = Verify(ctx, db, "INC-1"); v.OK {
			t.Error("a trailing space in a payload went unnoticed")
		}
		if _, err := db.ExecContext(ctx, `UPDATE receipt_entries SET payload = RTRIM(payload) WHERE receipt_id = 'INC-1' AND seq = 2`); err != nil {
			t.Fatal(err)
		}

		// Remove a middle entry.
		if _, err := db.ExecContext(ctx, `DELETE FROM receipt_entries WHERE receipt_id = 'INC-1' AND seq = 3`); err != nil {
			t.Fatal(err)
		}
		v, _ = Verify(ctx, db, "INC-1")
		joined := strings.Join(v.Problems, "\n")
		if v.OK || !strings.Contains(joined, "entries 3 missing before entry 4: removed") || !strings.Contains(joined, "entry 4 (decision by bob) does not link") {
			t.Errorf("removed middle entry: %+v", v)
		}

		// Remove the last entry of another intact receipt.
		if _, err := AppendReceipt(ctx, db, s.clk.Now(), "INC-2", EntryCause, "dw-incidents", map[string]any{"summary": "a"}); err != nil {
			t.Fatal(err)
		}
		if _, err := AppendReceipt(ctx, db, s.clk.Now(), "INC-2", EntryCause, "dw-incidents", map[string]any{"summary": "b"}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `DELETE FROM receipt_entries WHERE receipt_id = 'INC-2' AND seq = 2`); err != nil {
			t.Fatal(err)
		}
		all, err := VerifyAll(ctx, db)
		if err != nil || len(all) != 3 {
			t.Fatalf("verify all (INC-1, INC-2 and the org receipt recording billing's approvers): %+v, %v", all, err)
		}
		if all[1].ReceiptID != "INC-2" || all[1].OK || !strings.Contains(all[1].Problems[0], "entries 2 missing at the end") {
			t.Errorf("removed tail entry: %+v", all[1])
		}
	})
}

func TestAppendReceiptConcurrentAppendersKeepOneChain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		const n = 16
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := AppendReceipt(ctx, db, t0.Add(time.Duration(i)*time.Second), "INC-9", "verification", fmt.Sprintf("agent-%d", i), map[string]int{"i": i})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		v, err := Verify(ctx, db, "INC-9")
		if err != nil || !v.OK || v.Entries != n {
			t.Fatalf("after %d concurrent appends: %+v, %v", n, v, err)
		}
	})
}

func TestAppendReceiptInCallersTransaction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		err := db.InTx(ctx, func(tx *store.Tx) error {
			if _, err := AppendReceipt(ctx, tx, t0, "INC-3", EntryCause, "dw-incidents", map[string]string{"summary": "x"}); err != nil {
				return err
			}
			return fmt.Errorf("caller fails after appending")
		})
		if err == nil {
			t.Fatal("want the caller's error")
		}
		if es, _ := Entries(ctx, db, "INC-3"); len(es) != 0 {
			t.Errorf("rolled-back append left %d entries", len(es))
		}
		if _, err := AppendReceipt(ctx, db, t0, "", "cause", "x", nil); err == nil || !IsInputError(err) {
			t.Errorf("empty receipt id: %v", err)
		}
		if _, err := Receipt(ctx, db, "INC-404"); err == nil || !strings.Contains(err.Error(), "no receipt") {
			t.Errorf("unknown receipt: %v", err)
		}
	})
}

func TestHashIsDeterministicOverEquivalentPayloads(t *testing.T) {
	type fact struct {
		B int    `json:"b"`
		A string `json:"a"`
	}
	x, err := canonicalJSON(fact{B: 1, A: "z"})
	if err != nil {
		t.Fatal(err)
	}
	y, _ := canonicalJSON(map[string]any{"a": "z", "b": json.Number("1")})
	if x != y || x != `{"a":"z","b":1}` {
		t.Errorf("canonical forms differ: %s vs %s", x, y)
	}
	h1 := entryHash("R", 1, "cause", "a", 5, "", x)
	if h1 != entryHash("R", 1, "cause", "a", 5, "", y) || h1 == entryHash("R", 2, "cause", "a", 5, "", x) {
		t.Error("hash must depend on the fields and nothing else")
	}
}

func TestRenderMarkdownReadsLikeAReceipt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		p := approvedIncident(t, s, clk)
		doc, err := Receipt(ctx, db, "INC-1")
		if err != nil {
			t.Fatal(err)
		}
		md := RenderMarkdown(doc)
		for _, want := range []string{
			"# Receipt INC-1",
			"Chain: intact, 6 entries",
			"## Cause\n\n- schema v12 dropped response_bytes (recorded by dw-incidents",
			"### " + p.ID + ": Pause the Stripe sync DAG until egress is fixed [executed]",
			"- Blast radius: stripe invoices, sigma://workbook/revenue-today",
			"- Approver: bob (escalation order: bob → carol); copied: alice",
			"- Decision: **approved** by bob via slack at 2026-03-10 15:15 UTC, reason: stop the bleeding; evidence: message_ts=1.2, slack_user=U0BOB",
			"1. 2026-03-10 15:15 UTC by dw-connectors (" + p.ID + "): paused sync_metered_usage_to_stripe",
			"   - check before: FAIL dag paused (active)",
			"   - check after: pass dag paused",
			"## Undo\n\n- " + p.ID + ": unpause the DAG",
			"| 4 | 2026-03-10 15:15:00 | decision | bob | " + p.ID + " approved by bob via slack |",
		} {
			if !strings.Contains(md, want) {
				t.Errorf("markdown lacks %q\n%s", want, md)
			}
		}
		raw, err := json.Marshal(doc)
		if err != nil || !strings.Contains(string(raw), `"chain":{"receipt_id":"INC-1","entries":6,"ok":true`) {
			t.Errorf("JSON form: %s, %v", raw, err)
		}
		if _, err := db.ExecContext(ctx, `DELETE FROM receipt_entries WHERE receipt_id = 'INC-1' AND seq = 2`); err != nil {
			t.Fatal(err)
		}
		doc, _ = Receipt(ctx, db, "INC-1")
		if md := RenderMarkdown(doc); !strings.Contains(md, "Chain: **TAMPERED**") {
			t.Errorf("tampered receipt not flagged:\n%s", md)
		}
	})
}
