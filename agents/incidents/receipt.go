package incidents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	ID        string                 `json:"id" jsonschema:"receipt id"`
	Intact    bool                   `json:"intact" jsonschema:"true when no entry was edited or removed"`
	Head      string                 `json:"head" jsonschema:"hash of the last entry; anchor it elsewhere to notice a rewrite"`
	Problems  []string               `json:"problems,omitempty" jsonschema:"each edited or missing entry found"`
	Entries   []ReceiptEntry         `json:"entries" jsonschema:"every entry in chain order"`
	Proposals []ProposalState        `json:"proposals" jsonschema:"current state of the proposals it records"`
	Markdown  string                 `json:"markdown" jsonschema:"the receipt for people: chain, cause, proposals and decisions, steps with checks, undo, log"`
	Verify    string                 `json:"verify" jsonschema:"the command a person runs to check the chain themselves"`
	Chain     approvals.Verification `json:"chain" jsonschema:"the chain check"`
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
	out := &ReceiptOut{ID: doc.ID, Intact: doc.Chain.OK, Head: doc.Chain.Head, Problems: doc.Chain.Problems, Chain: doc.Chain,
		Entries: []ReceiptEntry{}, Proposals: []ProposalState{}, Markdown: approvals.RenderMarkdown(doc),
		Verify: "dw receipt verify " + doc.ID}
	for _, en := range doc.Entries {
		facts := map[string]any{}
		if err := json.Unmarshal(en.Payload, &facts); err != nil {
			facts = map[string]any{"raw": string(en.Payload)}
		}
		out.Entries = append(out.Entries, ReceiptEntry{Seq: en.Seq, Kind: en.Kind, Actor: en.Actor, At: en.At, Facts: facts,
			PrevHash: en.PrevHash, Hash: en.Hash})
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

func shortHash(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	return h
}
