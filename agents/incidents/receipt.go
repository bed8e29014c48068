package incidents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// ReceiptIn names a receipt.
type ReceiptIn struct {
	ID string `json:"id" jsonschema:"incident id (INC-3) or proposal id (P-7K3M9QXA); a proposal's receipt is its incident's"`
}

// ReceiptEntry is one link of the hash chain.
type ReceiptEntry struct {
	Seq      int64          `json:"seq" jsonschema:"position in the chain, from 1"`
	Kind     string         `json:"kind" jsonschema:"cause, proposal, request, decision, step, executed, verification, …"`
	Actor    string         `json:"actor" jsonschema:"person or agent that caused the entry"`
	At       time.Time      `json:"at" jsonschema:"when"`
	Facts    map[string]any `json:"facts" jsonschema:"the entry's recorded facts"`
	PrevHash string         `json:"prev_hash" jsonschema:"hash of the entry before"`
	Hash     string         `json:"hash" jsonschema:"SHA-256 over this entry and the previous hash"`
}

// ReceiptOut is a receipt as an auditor reads it.
type ReceiptOut struct {
	ID       string         `json:"id" jsonschema:"receipt id"`
	Intact   bool           `json:"intact" jsonschema:"true when no entry was edited or removed"`
	Head     string         `json:"head" jsonschema:"hash of the last entry; anchor it elsewhere to notice a rewrite"`
	Problems []string       `json:"problems,omitempty" jsonschema:"edited or missing entries found (the first 20)"`
	Entries  []ReceiptEntry `json:"entries" jsonschema:"the chain's entries in order; a long chain shows its first and last entries only (see entries_omitted)"`
	// EntriesTotal, EntriesOmitted and EntryKinds describe the whole chain
	// when a long one is shown in part.
	EntriesTotal   int                    `json:"entries_total" jsonschema:"entries in the whole chain"`
	EntriesOmitted int                    `json:"entries_omitted,omitempty" jsonschema:"middle entries left out of entries; dw receipt show <id> --json prints them all"`
	EntryKinds     map[string]int         `json:"entry_kinds" jsonschema:"entries in the whole chain by kind"`
	Proposals      []ProposalState        `json:"proposals" jsonschema:"current state of the proposals it records"`
	Markdown       string                 `json:"markdown" jsonschema:"the receipt for people: chain, cause, proposals and decisions, steps with checks, undo, log; a long one is cut, and dw receipt show <id> prints it whole"`
	Verify         string                 `json:"verify" jsonschema:"the command a person runs to check the chain themselves"`
	Full           string                 `json:"full" jsonschema:"the command that prints the whole receipt as JSON"`
	Chain          approvals.Verification `json:"chain" jsonschema:"the chain check"`
}

// Bounds on get_receipt's answer; the full record stays in the store and
// `dw receipt show <id> --json` prints it.
const (
	receiptHeadEntries = 15
	receiptTailEntries = 15
	maxFactsChars      = 10000 // one entry's facts shown in full
	factsBudget        = 40000 // all shown entries' facts together
	maxMarkdownChars   = 20000
	maxProblems        = 20
)

var getReceiptTool = mcpserver.Tool{
	Name:        "get_receipt",
	Title:       "Show a receipt",
	Description: "Shows the append-only, hash-chained receipt of an incident (or of the incident a proposal belongs to): the cause, every proposal with its approver and decision, the steps with their checks, the verification with checks before and after, and the undo, with the chain checked for edited or removed entries. `dw receipt verify <id>` checks it from the terminal.",
	ReadOnly:    true,
	Destructive: false,
	Idempotent:  true,
	OpenWorld:   false,
}

func (h *handlers) getReceipt(ctx context.Context, in ReceiptIn) (*ReceiptOut, string, error) {
	id := strings.TrimSpace(in.ID)
	if id == "" {
		return nil, "", errors.New("id is empty: give an incident id (INC-3) or a proposal id (P-7K3M9QXA)")
	}
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	doc, err := approvals.Receipt(ctx, e.db, id)
	if errors.Is(err, approvals.ErrNotFound) && strings.ToUpper(id) != id {
		// Incident and proposal ids are upper case; accept inc-3 and p-….
		doc, err = approvals.Receipt(ctx, e.db, strings.ToUpper(id))
	}
	if err != nil {
		return nil, "", err
	}
	full := "dw receipt show " + doc.ID + " --json"
	out := &ReceiptOut{ID: doc.ID, Intact: doc.Chain.OK, Head: doc.Chain.Head, Chain: doc.Chain,
		Entries: []ReceiptEntry{}, EntryKinds: map[string]int{}, Proposals: []ProposalState{},
		Markdown: cutText(approvals.RenderMarkdown(doc), maxMarkdownChars, "dw receipt show "+doc.ID),
		Verify:   "dw receipt verify " + doc.ID, Full: full}
	out.Problems = doc.Chain.Problems[:min(len(doc.Chain.Problems), maxProblems)]
	if n := len(doc.Chain.Problems) - len(out.Problems); n > 0 {
		out.Problems = append(out.Problems, fmt.Sprintf("… and %d more: %s", n, full))
	}
	out.Chain.Problems = out.Problems
	out.EntriesTotal = len(doc.Entries)
	var shown []int
	for i, en := range doc.Entries {
		out.EntryKinds[en.Kind]++
		if i >= receiptHeadEntries && i < len(doc.Entries)-receiptTailEntries {
			out.EntriesOmitted++
			continue
		}
		shown = append(shown, i)
	}
	// Facts are shown in full newest first (the verification and the
	// steps that led to it matter most) while the budget lasts.
	facts := make([]map[string]any, len(shown))
	used := 0
	for k := len(shown) - 1; k >= 0; k-- {
		p := doc.Entries[shown[k]].Payload
		full := len(p) <= maxFactsChars && used+len(p) <= factsBudget
		if full {
			used += len(p)
		}
		facts[k] = entryFacts(p, full)
	}
	for k, i := range shown {
		en := doc.Entries[i]
		out.Entries = append(out.Entries, ReceiptEntry{Seq: en.Seq, Kind: en.Kind, Actor: en.Actor, At: en.At,
			Facts: facts[k], PrevHash: en.PrevHash, Hash: en.Hash})
	}
	for i := range doc.Proposals {
		out.Proposals = append(out.Proposals, proposalState(&doc.Proposals[i]))
	}
	chain := fmt.Sprintf("intact, %d entries, head %s", doc.Chain.Entries, shortHash(doc.Chain.Head))
	if !doc.Chain.OK {
		chain = fmt.Sprintf("TAMPERED: %s", strings.Join(doc.Chain.Problems, "; "))
	}
	summary := fmt.Sprintf("Receipt %s: chain %s; %d proposal(s). Check it yourself: dw receipt verify %s.", doc.ID, chain, len(doc.Proposals), doc.ID)
	return out, summary, nil
}

// entryFacts decodes an entry's payload for the answer; unless full, it
// is replaced by its size and keys (a whole diff, a long list).
func entryFacts(payload []byte, full bool) map[string]any {
	facts := map[string]any{}
	if err := json.Unmarshal(payload, &facts); err != nil {
		facts = map[string]any{"raw": cutText(string(payload), maxFactsChars, "")}
	}
	if full {
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

func shortHash(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	return h
}
