package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestReceiptViewBoundsALongChain: a 100-entry chain with 25 problems shows
// its first and last 15 entries, counts the whole chain, keeps facts whole
// newest first while the budget lasts (never one over the per-entry cap),
// lists 20 problems and how many more, and leaves the document untouched.
func TestReceiptViewBoundsALongChain(t *testing.T) {
	const n = 100
	doc := &ReceiptDoc{ID: "INC-1", Chain: Verification{ReceiptID: "INC-1", Entries: n, Status: StatusTampered, Head: strings.Repeat("ab", 32)}}
	for i := 1; i <= n; i++ {
		kind := EntryStep
		if i == 1 {
			kind = EntryCause
		}
		// Each step's facts are 3,000 bytes, so the 40,000-byte budget
		// holds the newest 13; entry 99 is over the per-entry cap.
		size := 3000
		if i == 99 {
			size = maxFactsChars + 1
		}
		head := fmt.Sprintf(`{"i":%d,"pad":"`, i)
		payload := head + strings.Repeat("x", size-len(head)-2) + `"}`
		doc.Entries = append(doc.Entries, Entry{Seq: int64(i), Kind: kind, Actor: "dw-incidents", At: t0.Add(time.Duration(i) * time.Minute),
			Payload: json.RawMessage(payload), Hash: fmt.Sprintf("h%d", i)})
	}
	for i := 1; i <= 25; i++ {
		doc.Chain.Problems = append(doc.Chain.Problems, fmt.Sprintf("entry %d was edited", i))
	}
	before := slices.Clone(doc.Chain.Problems)

	v := doc.View()
	var seqs []int64
	for _, e := range v.Entries {
		seqs = append(seqs, e.Seq)
	}
	var want []int64
	for i := int64(1); i <= n; i++ {
		if i <= ViewHeadEntries || i > n-ViewTailEntries {
			want = append(want, i)
		}
	}
	if !slices.Equal(seqs, want) || v.EntriesTotal != n || v.EntriesOmitted != n-ViewHeadEntries-ViewTailEntries {
		t.Fatalf("shown %v total %d omitted %d", seqs, v.EntriesTotal, v.EntriesOmitted)
	}
	if v.EntryKinds[EntryCause] != 1 || v.EntryKinds[EntryStep] != n-1 || len(v.EntryKinds) != 2 {
		t.Errorf("kinds over the whole chain: %v", v.EntryKinds)
	}
	var whole []int64
	for _, e := range v.Entries {
		if _, cut := e.Facts["omitted"]; cut {
			if keys, _ := e.Facts["keys"].([]string); !slices.Equal(keys, []string{"i", "pad"}) {
				t.Errorf("entry %d: omitted facts name their keys: %v", e.Seq, e.Facts)
			}
			continue
		}
		if e.Facts["i"] != float64(e.Seq) {
			t.Errorf("entry %d: whole facts decoded: %v", e.Seq, e.Facts["i"])
		}
		whole = append(whole, e.Seq)
	}
	// Newest first: 100, then 98 down to 90 (99 is over the cap); 10 × 3,000 fits 30,000.
	wantWhole := []int64{90, 91, 92, 93, 94, 95, 96, 97, 98, 100}
	if !slices.Equal(whole, wantWhole) {
		t.Errorf("facts shown whole: %v, want %v", whole, wantWhole)
	}

	if len(v.Problems) != maxProblems+1 || !slices.Equal(v.Problems[:maxProblems], before[:maxProblems]) ||
		v.Problems[maxProblems] != "… and 5 more: dw receipt show INC-1 --json" {
		t.Errorf("problems: %q", v.Problems)
	}
	if !slices.Equal(doc.Chain.Problems, before) {
		t.Errorf("the view changed the document's problems: %q", doc.Chain.Problems)
	}
	if v.Verify != "dw receipt verify INC-1" || v.Full != "dw receipt show INC-1 --json" {
		t.Errorf("commands: %q, %q", v.Verify, v.Full)
	}
	if !strings.HasPrefix(v.Summary(), "Receipt INC-1: chain TAMPERED: entry 1 was edited; ") ||
		!strings.HasSuffix(v.Summary(), "entry 25 was edited; 0 proposal(s). Check it yourself: dw receipt verify INC-1.") {
		t.Errorf("summary: %q", v.Summary())
	}
}

// TestCutTextSaysWhereTheRestIs: a long text is cut at a line break near
// the limit, never inside a character, with the sizes and the command.
func TestCutTextSaysWhereTheRestIs(t *testing.T) {
	if got := cutText("short", 10, "dw x"); got != "short" {
		t.Errorf("short text: %q", got)
	}
	s := strings.Repeat("line é\n", 100) // 8 bytes a line
	got := cutText(s, 60, "dw receipt show INC-1")
	body, note, ok := strings.Cut(got, "\n\n")
	if !ok || body != strings.Repeat("line é\n", 6)+"line é" || note != fmt.Sprintf("… cut at %d of %d characters; dw receipt show INC-1 prints it whole", len(body), len(s)) {
		t.Errorf("cut: body %q note %q", body, note)
	}
	// No line break near the limit: cut at the byte limit, a split
	// character dropped.
	got = cutText(strings.Repeat("é", 10), 5, "")
	if body, note, _ := strings.Cut(got, "\n\n"); body != "éé" || note != "… cut at 4 of 20 characters" {
		t.Errorf("mid-character cut: %q", got)
	}
}

// TestReadReceiptView reads an incident's receipt by a lower-case incident
// id and by a proposal id, refuses an empty id before opening the store,
// and names the closest receipts for an unknown one.
func TestReadReceiptView(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		p := approvedIncident(t, s, clk)
		open := func(context.Context) (*store.DB, error) { return db, nil }

		v, err := ReadReceiptView(ctx, open, " inc-1 ")
		if err != nil {
			t.Fatal(err)
		}
		if v.Doc.ID != "INC-1" || v.EntriesTotal != 6 || len(v.Entries) != 6 || v.EntriesOmitted != 0 || len(v.Problems) != 0 ||
			v.EntryKinds[EntryCause] != 1 || v.EntryKinds[EntryDecision] != 1 || len(v.Doc.Proposals) != 1 {
			t.Fatalf("view: %+v", v)
		}
		for _, e := range v.Entries {
			if _, cut := e.Facts["omitted"]; cut || len(e.Facts) == 0 {
				t.Errorf("entry %d of a short chain shows its facts whole: %v", e.Seq, e.Facts)
			}
		}
		if v.Markdown != RenderMarkdown(v.Doc) {
			t.Errorf("a short receipt's markdown is not cut")
		}
		want := fmt.Sprintf("Receipt INC-1: chain intact, 6 entries, head %s; 1 proposal(s). Check it yourself: dw receipt verify INC-1.", short(v.Doc.Chain.Head))
		if v.Summary() != want {
			t.Errorf("summary: %q, want %q", v.Summary(), want)
		}

		byProposal, err := ReadReceiptView(ctx, open, strings.ToLower(p.ID))
		if err != nil || byProposal.Doc.ID != "INC-1" {
			t.Fatalf("by proposal: %+v, %v", byProposal, err)
		}

		refuse := func(context.Context) (*store.DB, error) { return nil, errors.New("store opened for an empty id") }
		if _, err := ReadReceiptView(ctx, refuse, "  "); err == nil || !strings.HasPrefix(err.Error(), "id is empty") {
			t.Errorf("empty id: %v", err)
		}
		if _, err := ReadReceiptView(ctx, open, "INC-404"); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown id: %v", err)
		}
	})
}
