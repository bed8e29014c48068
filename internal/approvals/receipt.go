package approvals

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/suggest"
)

// Receipt entry kinds written by this package. Other packages append their
// own (incidents add "cause" and "verification").
const (
	EntryProposal  = "proposal"
	EntryRequest   = "request"
	EntryNotified  = "notified"
	EntryEscalated = "escalated"
	EntryExpired   = "expired"
	EntryDecision  = "decision"
	EntryStep      = "step"
	EntryExecuted  = "executed"
	EntryUndone    = "undone"
	EntryStop      = "stop"
	EntryResume    = "resume"
	EntryAutonomy  = "autonomy"
	EntryCause     = "cause"
	// EntryApprovers records who may approve a domain's proposals, each
	// time that differs from the last proposal's (org receipt).
	EntryApprovers = "approvers"
)

// OrgReceiptID is the receipt of organisation-wide changes: stops,
// resumes and autonomy levels set by people.
const OrgReceiptID = "org"

// Entry is one link of a receipt's hash chain.
type Entry struct {
	Seq      int64           `json:"seq" jsonschema:"position in the chain, from 1"`
	Kind     string          `json:"kind" jsonschema:"cause, proposal, request, notified, escalated, expired, decision, step, executed, undone, …"`
	Actor    string          `json:"actor" jsonschema:"person or agent that caused the entry"`
	At       time.Time       `json:"at"`
	Payload  json.RawMessage `json:"payload" jsonschema:"the entry's facts (canonical JSON)"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
}

// Verification is the result of checking a receipt's chain.
type Verification struct {
	ReceiptID string `json:"receipt_id"`
	Entries   int    `json:"entries"`
	OK        bool   `json:"ok" jsonschema:"true when every entry is keyed and none was edited or removed"`
	// Status is ok, tampered, or unauthenticated (entries written before
	// keys existed, which prove nothing).
	Status string `json:"status" jsonschema:"ok, tampered, or unauthenticated (written before keys)"`
	// Unauthenticated counts entries sealed with plain SHA-256 before keys.
	Unauthenticated int      `json:"unauthenticated,omitempty" jsonschema:"entries written before keys existed: not provable"`
	Head            string   `json:"head,omitempty" jsonschema:"MAC of the last entry"`
	Problems        []string `json:"problems,omitempty" jsonschema:"each edited or missing entry found"`
}

// Verification statuses.
const (
	StatusOK              = "ok"
	StatusTampered        = "tampered"
	StatusUnauthenticated = "unauthenticated"
)

// ReceiptDoc is a receipt as an auditor reads it: every entry in order,
// the current state of the proposals it records, and the chain check.
type ReceiptDoc struct {
	ID        string       `json:"id"`
	Entries   []Entry      `json:"entries"`
	Proposals []Proposal   `json:"proposals,omitempty"`
	Chain     Verification `json:"chain"`
}

// AppendReceipt adds an entry to the end of a receipt's chain. The entry's
// hash is an HMAC-SHA256, under the key kept outside the store (see
// keys.go), of the receipt id, sequence number, kind, actor, time,
// previous hash, the canonical JSON of payload and the entry's place in
// the global chain, so editing, removing or re-sealing any entry without
// the key shows. q may be the DB (the append gets its own transaction) or
// a Tx (the append commits with the caller's other writes).
//
// at should come from Service.Now, the approvals clock. A caller dating
// with its own clock cannot put an entry in the future: on a store not
// made for replay, a time after the real wall clock is recorded as the
// real time (a DW_CLOCK set ahead dates nothing there).
func AppendReceipt(ctx context.Context, q store.Querier, at time.Time, receiptID, kind, actor string, payload any) (Entry, error) {
	ks, err := keysForQuerier(q)
	if err != nil {
		return Entry{}, err
	}
	if real := time.Now().UTC(); at.After(real) {
		replay, err := isReplayStore(ctx, q, ks)
		if err != nil {
			return Entry{}, err
		}
		if !replay {
			at = real
		}
	}
	return appendReceipt(ctx, q, ks, at, receiptID, kind, actor, payload)
}

// appendEntry appends with the service's key; inside a transaction the
// store handle alone cannot name the key, so the service's code uses this.
func (s *Service) appendEntry(ctx context.Context, q store.Querier, at time.Time, receiptID, kind, actor string, payload any) (Entry, error) {
	ks, err := s.keys()
	if err != nil {
		return Entry{}, err
	}
	return appendReceipt(ctx, q, ks, at, receiptID, kind, actor, payload)
}

func appendReceipt(ctx context.Context, q store.Querier, ks *keyset, at time.Time, receiptID, kind, actor string, payload any) (Entry, error) {
	if strings.TrimSpace(receiptID) == "" || strings.TrimSpace(kind) == "" || strings.TrimSpace(actor) == "" {
		return Entry{}, invalid("a receipt entry needs a receipt id, a kind and an actor (got %q, %q, %q)", receiptID, kind, actor)
	}
	body, err := canonicalJSON(payload)
	if err != nil {
		return Entry{}, fmt.Errorf("receipt %s: payload of %s entry: %w", receiptID, kind, err)
	}
	if db, ok := q.(*store.DB); ok {
		var e Entry
		err := db.InTx(ctx, func(tx *store.Tx) error {
			var err error
			e, err = appendSealed(ctx, tx, ks, at, receiptID, kind, actor, body)
			return err
		})
		return e, err
	}
	return appendSealed(ctx, q, ks, at, receiptID, kind, actor, body)
}

// appendSealed is appendTx, the org receipt opening with the store's
// trust root (storeadmin.go) before its first entry of any other kind.
func appendSealed(ctx context.Context, q store.Querier, ks *keyset, at time.Time, receiptID, kind, actor, body string) (Entry, error) {
	if receiptID == OrgReceiptID && kind != EntryStoreAdmin {
		if err := recordFoundingAdmin(ctx, q, ks, at); err != nil {
			return Entry{}, fmt.Errorf("receipt %s: record the store admin: %w", receiptID, err)
		}
	}
	return appendTx(ctx, q, ks, at, receiptID, kind, actor, body)
}

// appendTx must run inside a transaction. The global head is taken first,
// so two transactions appending to several receipts always lock in the
// same order; the receipt's head row then keeps seq and prev_hash in step.
func appendTx(ctx context.Context, q store.Querier, ks *keyset, at time.Time, receiptID, kind, actor, body string) (Entry, error) {
	atMs := store.Millis(at)
	if _, err := q.ExecContext(ctx, `INSERT INTO receipt_global_head (id, seq, hash) VALUES (1, 0, '') ON CONFLICT (id) DO NOTHING`); err != nil {
		return Entry{}, fmt.Errorf("receipt %s: %w", receiptID, err)
	}
	var gseq int64
	var gprev string
	if err := q.QueryRowContext(ctx, `UPDATE receipt_global_head SET seq = seq + 1 WHERE id = 1 RETURNING seq, hash`).Scan(&gseq, &gprev); err != nil {
		return Entry{}, fmt.Errorf("receipt %s: advance global head: %w", receiptID, err)
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO receipt_heads (receipt_id, seq, hash, updated_ms) VALUES (?, 0, '', ?)
		ON CONFLICT (receipt_id) DO NOTHING`, receiptID, atMs); err != nil {
		return Entry{}, fmt.Errorf("receipt %s: %w", receiptID, err)
	}
	var seq int64
	var prev string
	if err := q.QueryRowContext(ctx, `UPDATE receipt_heads SET seq = seq + 1, updated_ms = ? WHERE receipt_id = ? RETURNING seq, hash`,
		atMs, receiptID).Scan(&seq, &prev); err != nil {
		return Entry{}, fmt.Errorf("receipt %s: advance head: %w", receiptID, err)
	}
	h := entryMAC(ks, receiptID, seq, kind, actor, atMs, prev, body, gseq, gprev)
	if _, err := q.ExecContext(ctx, `INSERT INTO receipt_entries (receipt_id, seq, kind, actor, at_ms, payload, prev_hash, hash, gseq, gprev)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, receiptID, seq, kind, actor, atMs, body, prev, h, gseq, gprev); err != nil {
		return Entry{}, fmt.Errorf("receipt %s: append %s: %w", receiptID, kind, err)
	}
	if _, err := q.ExecContext(ctx, `UPDATE receipt_heads SET hash = ? WHERE receipt_id = ?`, h, receiptID); err != nil {
		return Entry{}, fmt.Errorf("receipt %s: set head: %w", receiptID, err)
	}
	if _, err := q.ExecContext(ctx, `UPDATE receipt_global_head SET hash = ? WHERE id = 1`, h); err != nil {
		return Entry{}, fmt.Errorf("receipt %s: set global head: %w", receiptID, err)
	}
	return Entry{Seq: seq, Kind: kind, Actor: actor, At: store.FromMillis(atMs), Payload: json.RawMessage(body), PrevHash: prev, Hash: h}, nil
}

// canonicalJSON encodes v with object keys sorted and numbers kept as
// written, so the same facts always hash the same.
func canonicalJSON(v any) (string, error) {
	if v == nil {
		return "{}", nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return "", err
	}
	out, err := json.Marshal(x)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// entryHash is plain SHA-256 over a JSON array of the entry's fields: how
// entries were sealed before keys existed. Anyone can recompute it, so an
// entry that only matches it is reported as unauthenticated, never ok.
func entryHash(receiptID string, seq int64, kind, actor string, atMs int64, prev, payload string) string {
	b, _ := json.Marshal([]any{receiptID, seq, kind, actor, atMs, prev, payload})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// entryMAC is HMAC-SHA256 over the entry's fields and its place in the
// global chain. The payload goes in as a string, byte for byte, so even a
// whitespace edit of the stored text shows.
func entryMAC(ks *keyset, receiptID string, seq int64, kind, actor string, atMs int64, prev, payload string, gseq int64, gprev string) string {
	b, _ := json.Marshal([]any{"receipt-entry", receiptID, seq, kind, actor, atMs, prev, payload, gseq, gprev})
	return mac(ks.receipt, b)
}

// Entries reads a receipt's entries in chain order.
func Entries(ctx context.Context, q store.Querier, receiptID string) ([]Entry, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, kind, actor, at_ms, payload, prev_hash, hash FROM receipt_entries
		WHERE receipt_id = ? ORDER BY seq`, receiptID)
	if err != nil {
		return nil, fmt.Errorf("receipt %s: %w", receiptID, err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var atMs int64
		var payload string
		if err := rows.Scan(&e.Seq, &e.Kind, &e.Actor, &atMs, &payload, &e.PrevHash, &e.Hash); err != nil {
			return nil, err
		}
		e.At = store.FromMillis(atMs)
		e.Payload = json.RawMessage(payload)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Verify checks one receipt's chain: every entry's MAC against its
// contents, each link against the entry before, the sequence for gaps and
// the head row for entries removed from the end. Entries written before
// keys existed are counted as unauthenticated: their plain SHA-256 can be
// recomputed by anyone, so they prove nothing and the receipt is not OK.
//
// A receipt removed whole, or a tail removed together with its head rows,
// is found by VerifyGlobal and VerifyAnchor, not here.
func Verify(ctx context.Context, q store.Querier, receiptID string) (Verification, error) {
	ks, err := keysForQuerier(q)
	if err != nil {
		return Verification{ReceiptID: receiptID}, err
	}
	return verifyReceipt(ctx, q, ks, receiptID)
}

func verifyReceipt(ctx context.Context, q store.Querier, ks *keyset, receiptID string) (Verification, error) {
	v := Verification{ReceiptID: receiptID}
	rows, err := q.QueryContext(ctx, `SELECT seq, kind, actor, at_ms, payload, prev_hash, hash, gseq, gprev FROM receipt_entries
		WHERE receipt_id = ? ORDER BY seq`, receiptID)
	if err != nil {
		return v, fmt.Errorf("receipt %s: %w", receiptID, err)
	}
	var prevHash string
	var want int64 = 1
	keyedSeen := false
	for rows.Next() {
		var seq, atMs, gseq int64
		var kind, actor, payload, prev, hash, gprev string
		if err := rows.Scan(&seq, &kind, &actor, &atMs, &payload, &prev, &hash, &gseq, &gprev); err != nil {
			rows.Close()
			return v, err
		}
		v.Entries++
		if seq != want {
			if seq > want {
				v.Problems = append(v.Problems, fmt.Sprintf("entries %s missing before entry %d: removed", seqRange(want, seq-1), seq))
			} else {
				v.Problems = append(v.Problems, fmt.Sprintf("entry %d is out of sequence", seq))
			}
		}
		if prev != prevHash {
			v.Problems = append(v.Problems, fmt.Sprintf("entry %d (%s by %s) does not link to the entry before it: an earlier entry was removed or rewritten", seq, kind, actor))
		}
		switch {
		case gseq > 0:
			keyedSeen = true
			if !macEqual(entryMAC(ks, receiptID, seq, kind, actor, atMs, prev, payload, gseq, gprev), hash) {
				v.Problems = append(v.Problems, fmt.Sprintf("entry %d (%s by %s at %s) was edited: its contents no longer match its MAC", seq, kind, actor, stamp(store.FromMillis(atMs))))
			}
		case entryHash(receiptID, seq, kind, actor, atMs, prev, payload) != hash:
			v.Problems = append(v.Problems, fmt.Sprintf("entry %d (%s by %s at %s) was edited: its contents no longer match its hash", seq, kind, actor, stamp(store.FromMillis(atMs))))
		case keyedSeen:
			// Entries are keyed from the moment a key exists; an unkeyed
			// one after a keyed one was written without the key.
			v.Problems = append(v.Problems, fmt.Sprintf("entry %d (%s by %s) carries no MAC but follows keyed entries: it was written or re-sealed without the key", seq, kind, actor))
		default:
			v.Unauthenticated++
		}
		prevHash = hash
		want = seq + 1
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return v, err
	}
	rows.Close()
	v.Head = prevHash
	var headSeq int64
	var headHash string
	err = q.QueryRowContext(ctx, `SELECT seq, hash FROM receipt_heads WHERE receipt_id = ?`, receiptID).Scan(&headSeq, &headHash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if v.Entries > 0 {
			v.Problems = append(v.Problems, "the receipt's head row is missing: it was removed")
		}
	case err != nil:
		return v, err
	default:
		last := want - 1
		if headSeq > last {
			v.Problems = append(v.Problems, fmt.Sprintf("entries %s missing at the end: removed (the head records %d entries)", seqRange(last+1, headSeq), headSeq))
		} else if headSeq < last {
			v.Problems = append(v.Problems, fmt.Sprintf("entries after %d were added outside the chain's head", headSeq))
		} else if headHash != prevHash {
			v.Problems = append(v.Problems, fmt.Sprintf("the last entry %d does not match the head's hash: it was rewritten", last))
		}
	}
	if receiptID == OrgReceiptID {
		// A tail removed with the head rolled back verifies on its own;
		// this machine's anchor of the org head shows it (anchor.go).
		_, genesis, problem, err := anchorProblem(ctx, q, ks, want-1)
		if err != nil {
			return v, err
		}
		if problem != "" {
			v.Problems = append(v.Problems, problem)
		} else if len(v.Problems) == 0 && v.Unauthenticated == 0 {
			noteAnchor(ks, genesis, want-1, prevHash)
		}
		// The stop and autonomy levels dispatch acts on must be what this
		// receipt proves (govstate.go).
		probs, err := governanceProblems(ctx, q, ks)
		if err != nil {
			return v, err
		}
		v.Problems = append(v.Problems, probs...)
	}
	v.finish()
	return v, nil
}

// finish sets OK and Status from what was found.
func (v *Verification) finish() {
	switch {
	case len(v.Problems) > 0:
		v.Status = StatusTampered
	case v.Unauthenticated > 0:
		v.Status = StatusUnauthenticated
	default:
		v.Status = StatusOK
	}
	v.OK = v.Status == StatusOK
}

func seqRange(a, b int64) string {
	if a == b {
		return fmt.Sprint(a)
	}
	return fmt.Sprintf("%d-%d", a, b)
}

// ReceiptIDs lists every receipt in the store.
func ReceiptIDs(ctx context.Context, q store.Querier) ([]string, error) {
	ids, err := store.Strings(ctx, q, `SELECT receipt_id FROM receipt_heads UNION SELECT DISTINCT receipt_id FROM receipt_entries`)
	if err != nil {
		return nil, err
	}
	// A stop or level stored with no org receipt at all is still checked.
	if !slices.Contains(ids, OrgReceiptID) {
		gov, err := hasGovernanceRows(ctx, q)
		if err != nil {
			return nil, err
		}
		if gov {
			ids = append(ids, OrgReceiptID)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// VerifyAll checks every receipt in the store.
func VerifyAll(ctx context.Context, q store.Querier) ([]Verification, error) {
	ks, err := keysForQuerier(q)
	if err != nil {
		return nil, err
	}
	ids, err := ReceiptIDs(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]Verification, 0, len(ids))
	for _, id := range ids {
		v, err := verifyReceipt(ctx, q, ks, id)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// ResolveReceiptID maps an id to the receipt that holds it: a receipt id
// as is, a proposal id to its proposal's receipt (the incident's, when it
// has one).
func ResolveReceiptID(ctx context.Context, q store.Querier, id string) (string, error) {
	id = strings.TrimSpace(id)
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM receipt_heads WHERE receipt_id = ?`, id).Scan(&n); err != nil {
		return "", err
	}
	if n > 0 {
		return id, nil
	}
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM receipt_entries WHERE receipt_id = ?`, id).Scan(&n); err != nil {
		return "", err
	}
	if n > 0 {
		return id, nil
	}
	var rid string
	err := q.QueryRowContext(ctx, `SELECT receipt_id FROM approval_proposals WHERE id = ?`, strings.ToUpper(id)).Scan(&rid)
	if err == nil {
		return rid, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", err
	}
	ids, lerr := ReceiptIDs(ctx, q)
	if lerr != nil {
		return "", lerr
	}
	if len(ids) == 0 {
		return "", fmt.Errorf("no receipt %q: the store holds no receipts yet: %w", id, ErrNotFound)
	}
	return "", fmt.Errorf("no receipt %q; closest: %s: %w", id, strings.Join(suggest.Closest(id, ids, 3), ", "), ErrNotFound)
}

// Receipt reads a receipt by receipt id or proposal id, with the current
// state of its proposals and the result of verifying its chain.
func Receipt(ctx context.Context, q store.Querier, id string) (*ReceiptDoc, error) {
	rid, err := ResolveReceiptID(ctx, q, id)
	if err != nil {
		return nil, err
	}
	entries, err := Entries(ctx, q, rid)
	if err != nil {
		return nil, err
	}
	ver, err := Verify(ctx, q, rid)
	if err != nil {
		return nil, err
	}
	props, err := listProposals(ctx, q, `WHERE receipt_id = ? ORDER BY created_ms, id`, rid)
	if err != nil {
		return nil, err
	}
	if entries == nil {
		entries = []Entry{}
	}
	return &ReceiptDoc{ID: rid, Entries: entries, Proposals: props, Chain: ver}, nil
}
