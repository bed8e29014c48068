package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dataworkers/dw/internal/store"
)

// Bounds on a receipt view: an answer an agent reads stays small however
// long the chain grows; the full record stays in the store and
// `dw receipt show <id> --json` prints it.
const (
	ViewHeadEntries  = 15    // first entries shown (the cause and proposals)
	ViewTailEntries  = 15    // last entries shown (the steps and verification)
	maxFactsChars    = 10000 // one entry's facts shown in full
	factsBudget      = 30000 // all shown entries' facts together
	maxMarkdownChars = 16000
	maxProblems      = 20
)

// ViewEntry is one shown entry of a receipt with its facts decoded; facts
// too long for the view are replaced by their size and keys.
type ViewEntry struct {
	Entry
	Facts map[string]any
}

// ReceiptView is a receipt bounded for an agent's answer: the chain's
// first and last entries, counts over the whole chain, the first problems
// found and the rendered receipt cut to size, each cut saying where the
// whole is.
type ReceiptView struct {
	Doc *ReceiptDoc
	// Entries are the first ViewHeadEntries and the last ViewTailEntries.
	Entries []ViewEntry
	// EntriesTotal, EntriesOmitted and EntryKinds describe the whole chain.
	EntriesTotal   int
	EntriesOmitted int
	EntryKinds     map[string]int
	// Problems are the chain's first problems, then how many more.
	Problems []string
	Markdown string
	// Verify and Full are the commands that check the chain and print the
	// whole receipt as JSON.
	Verify string
	Full   string
}

// ReadReceiptView reads the receipt an incident id or proposal id names
// (inc-3 and p-… accepted for INC-3 and P-…) and bounds it (View). An empty
// id is refused before the store is opened.
func ReadReceiptView(ctx context.Context, open func(context.Context) (*store.DB, error), id string) (*ReceiptView, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return nil, errors.New("id is empty: give an incident id (INC-3) or a proposal id (P-7K3M9QXA)")
	}
	db, err := open(ctx)
	if err != nil {
		return nil, err
	}
	doc, err := Receipt(ctx, db, id)
	if errors.Is(err, ErrNotFound) && strings.ToUpper(id) != id {
		// Incident and proposal ids are upper case; accept inc-3 and p-….
		doc, err = Receipt(ctx, db, strings.ToUpper(id))
	}
	if err != nil {
		return nil, err
	}
	return doc.View(), nil
}

// View bounds the receipt for an answer. Facts are shown in full newest
// first (the verification and the steps that led to it matter most) while
// the budget lasts; older ones beyond it show their size and keys.
func (d *ReceiptDoc) View() *ReceiptView {
	full := "dw receipt show " + d.ID + " --json"
	v := &ReceiptView{Doc: d, Entries: []ViewEntry{}, EntryKinds: map[string]int{}, EntriesTotal: len(d.Entries),
		Markdown: cutText(RenderMarkdown(d), maxMarkdownChars, "dw receipt show "+d.ID),
		Verify:   "dw receipt verify " + d.ID, Full: full}
	// Clipped, so the note appended below never overwrites a problem in
	// the document's own list.
	v.Problems = slices.Clip(d.Chain.Problems[:min(len(d.Chain.Problems), maxProblems)])
	if n := len(d.Chain.Problems) - len(v.Problems); n > 0 {
		v.Problems = append(v.Problems, fmt.Sprintf("… and %d more: %s", n, full))
	}
	var shown []int
	for i, en := range d.Entries {
		v.EntryKinds[en.Kind]++
		if i >= ViewHeadEntries && i < len(d.Entries)-ViewTailEntries {
			v.EntriesOmitted++
			continue
		}
		shown = append(shown, i)
	}
	facts := make([]map[string]any, len(shown))
	used := 0
	for k := len(shown) - 1; k >= 0; k-- {
		p := d.Entries[shown[k]].Payload
		whole := len(p) <= maxFactsChars && used+len(p) <= factsBudget
		if whole {
			used += len(p)
		}
		facts[k] = entryFacts(p, whole)
	}
	for k, i := range shown {
		v.Entries = append(v.Entries, ViewEntry{Entry: d.Entries[i], Facts: facts[k]})
	}
	return v
}

// Summary is the receipt in one line: whether the chain is intact, how
// many proposals it records, and the command that checks it.
func (v *ReceiptView) Summary() string {
	d := v.Doc
	chain := fmt.Sprintf("intact, %d entries, head %s", d.Chain.Entries, short(d.Chain.Head))
	if !d.Chain.OK {
		chain = fmt.Sprintf("TAMPERED: %s", strings.Join(d.Chain.Problems, "; "))
	}
	return fmt.Sprintf("Receipt %s: chain %s; %d proposal(s). Check it yourself: dw receipt verify %s.", d.ID, chain, len(d.Proposals), d.ID)
}

// entryFacts decodes an entry's payload for a view; unless whole, it is
// replaced by its size and keys (a whole diff, a long list).
func entryFacts(payload []byte, whole bool) map[string]any {
	facts := map[string]any{}
	if err := json.Unmarshal(payload, &facts); err != nil {
		facts = map[string]any{"raw": cutText(string(payload), maxFactsChars, "")}
	}
	if whole {
		return facts
	}
	keys := make([]string, 0, len(facts))
	for k := range facts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return map[string]any{"omitted": fmt.Sprintf("%d bytes of facts; dw receipt show <id> --json prints them", len(payload)), "keys": keys}
}

// cutText shortens s to at most max bytes (at a line break when one is
// near), saying where the rest is.
func cutText(s string, max int, where string) string {
	if len(s) <= max {
		return s
	}
	cut := s[:max]
	if i := strings.LastIndexByte(cut, '\n'); i > max/2 {
		cut = cut[:i]
	}
	cut = strings.ToValidUTF8(cut, "")
	note := fmt.Sprintf("\n\n… cut at %d of %d characters", len(cut), len(s))
	if where != "" {
		note += "; " + where + " prints it whole"
	}
	return cut + note
}
