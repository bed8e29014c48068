package incidents

import (
	"context"
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
	Proposals      []ProposalState        `json:"proposals" jsonschema:"current state of the proposals it records: the latest 30 (proposals_total counts them all)"`
	ProposalsTotal int                    `json:"proposals_total,omitempty" jsonschema:"proposals it records, in all"`
	Markdown       string                 `json:"markdown" jsonschema:"the receipt for people: chain, cause, proposals and decisions, steps with checks, undo, log; a long one is cut, and dw receipt show <id> prints it whole"`
	Verify         string                 `json:"verify" jsonschema:"the command a person runs to check the chain themselves"`
	Full           string                 `json:"full" jsonschema:"the command that prints the whole receipt as JSON"`
	Chain          approvals.Verification `json:"chain" jsonschema:"the chain check"`
}

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
	v, err := approvals.ReadReceiptView(ctx, h.d.Store, in.ID)
	if err != nil {
		return nil, "", err
	}
	doc := v.Doc
	out := &ReceiptOut{ID: doc.ID, Intact: doc.Chain.OK, Head: doc.Chain.Head, Chain: doc.Chain,
		Problems: v.Problems, Entries: make([]ReceiptEntry, 0, len(v.Entries)), EntriesTotal: v.EntriesTotal,
		EntriesOmitted: v.EntriesOmitted, EntryKinds: v.EntryKinds, Proposals: make([]ProposalState, 0, len(doc.Proposals)),
		Markdown: v.Markdown, Verify: v.Verify, Full: v.Full}
	out.Chain.Problems = v.Problems
	for _, en := range v.Entries {
		out.Entries = append(out.Entries, ReceiptEntry{Seq: en.Seq, Kind: en.Kind, Actor: en.Actor, At: en.At,
			Facts: en.Facts, PrevHash: en.PrevHash, Hash: en.Hash})
	}
	for i := range doc.Proposals {
		out.Proposals = append(out.Proposals, proposalState(&doc.Proposals[i]))
	}
	out.Proposals, out.ProposalsTotal = latestProposals(out.Proposals)
	return out, v.Summary(), nil
}
