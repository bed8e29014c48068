package approvals

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dataworkers/dw/internal/store"
)

// The audit behind `dw receipt verify`: every receipt's chain, the global
// chain across receipts, the sealed proposals and decisions and the steps
// that carry them out, each against the others, and optionally a head
// published outside the store (an anchor).

// GlobalCheck is the result of checking the chain that numbers every keyed
// receipt entry across receipts.
type GlobalCheck struct {
	Entries  int64    `json:"entries" jsonschema:"keyed entries across all receipts"`
	Head     string   `json:"head,omitempty" jsonschema:"anchor of the last keyed entry (seq:MAC)"`
	OK       bool     `json:"ok"`
	Problems []string `json:"problems,omitempty"`
}

// RecordCheck is the result of checking proposals, decisions and steps.
type RecordCheck struct {
	Proposals int `json:"proposals"`
	Decisions int `json:"decisions"`
	Steps     int `json:"steps"`
	// Unauthenticated lists records written before keys existed.
	Unauthenticated []string `json:"unauthenticated,omitempty" jsonschema:"records written before keys existed: not provable"`
	Problems        []string `json:"problems,omitempty" jsonschema:"each edited, forged or missing record found"`
}

// AnchorCheck is the result of checking a published head.
type AnchorCheck struct {
	Anchor  string `json:"anchor"`
	OK      bool   `json:"ok"`
	Problem string `json:"problem,omitempty"`
}

// AuditReport is everything `dw receipt verify` checked.
type AuditReport struct {
	// Status is ok, tampered, or unauthenticated (nothing edited, but some
	// records predate keys and prove nothing).
	Status   string         `json:"status"`
	Receipts []Verification `json:"receipts"`
	Records  RecordCheck    `json:"records"`
	Global   GlobalCheck    `json:"global"`
	Anchor   *AnchorCheck   `json:"anchor,omitempty"`
	KeyFrom  string         `json:"key_from" jsonschema:"where the verifying key came from"`
}

// Audit checks the receipts (one, or all when receiptID is ""), the
// records they cover, the global chain and, when anchor is not "", that
// the chain still holds that published head.
func Audit(ctx context.Context, q store.Querier, receiptID, anchor string) (*AuditReport, error) {
	ks, err := keysForQuerier(q)
	if err != nil {
		return nil, err
	}
	rep := &AuditReport{KeyFrom: ks.source}
	var ids []string
	if receiptID != "" {
		ids = []string{receiptID}
	} else if ids, err = ReceiptIDs(ctx, q); err != nil {
		return nil, err
	}
	for _, id := range ids {
		v, err := verifyReceipt(ctx, q, ks, id)
		if err != nil {
			return nil, err
		}
		rep.Receipts = append(rep.Receipts, v)
	}
	if rep.Records, err = verifyRecords(ctx, q, ks, receiptID); err != nil {
		return nil, err
	}
	if rep.Global, err = verifyGlobal(ctx, q); err != nil {
		return nil, err
	}
	if anchor != "" {
		ac, err := checkAnchor(ctx, q, anchor)
		if err != nil {
			return nil, err
		}
		rep.Anchor = &ac
	}
	tampered := len(rep.Records.Problems) > 0 || !rep.Global.OK || (rep.Anchor != nil && !rep.Anchor.OK)
	unauth := len(rep.Records.Unauthenticated) > 0
	for _, v := range rep.Receipts {
		tampered = tampered || v.Status == StatusTampered
		unauth = unauth || v.Status == StatusUnauthenticated
	}
	switch {
	case tampered:
		rep.Status = StatusTampered
	case unauth:
		rep.Status = StatusUnauthenticated
	default:
		rep.Status = StatusOK
	}
	return rep, nil
}

// Anchor is a published head of the global chain: the number of the last
// keyed entry and its MAC. Posted outside the store (Slack, a ticket), it
// lets verify notice a tail removed with every head row rolled back.
type Anchor struct {
	Seq  int64
	Hash string
}

// String is the anchor as posted: dw1:<seq>:<mac>.
func (a Anchor) String() string { return fmt.Sprintf("dw1:%d:%s", a.Seq, a.Hash) }

// ParseAnchor reads an anchor printed by `dw receipt anchor`.
func ParseAnchor(s string) (Anchor, error) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != 3 || parts[0] != "dw1" {
		return Anchor{}, invalid("anchor %q is malformed; want dw1:<seq>:<mac> as printed by dw receipt anchor", s)
	}
	seq, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || seq < 1 {
		return Anchor{}, invalid("anchor %q: the sequence must be a positive number", s)
	}
	if len(parts[2]) != 64 {
		return Anchor{}, invalid("anchor %q: the MAC must be 64 hex characters", s)
	}
	return Anchor{Seq: seq, Hash: strings.ToLower(parts[2])}, nil
}

// CurrentAnchor is the head of the global chain now.
func CurrentAnchor(ctx context.Context, q store.Querier) (Anchor, error) {
	var a Anchor
	err := q.QueryRowContext(ctx, `SELECT gseq, hash FROM receipt_entries WHERE gseq > 0 ORDER BY gseq DESC LIMIT 1`).Scan(&a.Seq, &a.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		return a, invalid("the store holds no keyed receipt entries yet: there is nothing to anchor")
	}
	return a, err
}

func checkAnchor(ctx context.Context, q store.Querier, s string) (AnchorCheck, error) {
	ac := AnchorCheck{Anchor: strings.TrimSpace(s)}
	a, err := ParseAnchor(s)
	if err != nil {
		return ac, err
	}
	var hash string
	err = q.QueryRowContext(ctx, `SELECT hash FROM receipt_entries WHERE gseq = ?`, a.Seq).Scan(&hash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		ac.Problem = fmt.Sprintf("the anchored entry %d is no longer in the store: entries up to it were removed (the tail was truncated and the heads rolled back)", a.Seq)
	case err != nil:
		return ac, err
	case !macEqual(hash, a.Hash):
		ac.Problem = fmt.Sprintf("entry %d is not the anchored one (MAC %s, anchored %s): the chain was rewritten from there", a.Seq, short16(hash), short16(a.Hash))
	default:
		ac.OK = true
	}
	return ac, nil
}

func short16(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	return h
}

// verifyGlobal checks the numbering and links of every keyed entry across
// receipts, and the global head for a removed tail. Each entry's MAC
// covers its number and link, so they cannot be renumbered without the key.
func verifyGlobal(ctx context.Context, q store.Querier) (GlobalCheck, error) {
	var g GlobalCheck
	rows, err := q.QueryContext(ctx, `SELECT receipt_id, seq, gseq, gprev, hash FROM receipt_entries WHERE gseq > 0 ORDER BY gseq, receipt_id, seq`)
	if err != nil {
		return g, err
	}
	var want int64 = 1
	prev := ""
	var lastSeq int64
	for rows.Next() {
		var rid, gprev, hash string
		var seq, gseq int64
		if err := rows.Scan(&rid, &seq, &gseq, &gprev, &hash); err != nil {
			rows.Close()
			return g, err
		}
		g.Entries++
		switch {
		case gseq > want:
			g.Problems = append(g.Problems, fmt.Sprintf("keyed entries %s are missing from every receipt: removed (a deleted entry or a whole deleted receipt)", seqRange(want, gseq-1)))
		case gseq < want:
			g.Problems = append(g.Problems, fmt.Sprintf("keyed entry %d appears twice (again in %s entry %d)", gseq, rid, seq))
		}
		if gseq == want && gprev != prev {
			g.Problems = append(g.Problems, fmt.Sprintf("keyed entry %d (%s entry %d) does not link to keyed entry %d", gseq, rid, seq, gseq-1))
		}
		prev, want, lastSeq = hash, gseq+1, gseq
		g.Head = Anchor{Seq: gseq, Hash: hash}.String()
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return g, err
	}
	rows.Close()
	var headSeq int64
	var headHash string
	err = q.QueryRowContext(ctx, `SELECT seq, hash FROM receipt_global_head WHERE id = 1`).Scan(&headSeq, &headHash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if g.Entries > 0 {
			g.Problems = append(g.Problems, "the global head row is missing: it was removed")
		}
	case err != nil:
		return g, err
	case headSeq > lastSeq:
		g.Problems = append(g.Problems, fmt.Sprintf("keyed entries %s are missing at the end: removed (the global head records %d)", seqRange(lastSeq+1, headSeq), headSeq))
	case headSeq < lastSeq:
		g.Problems = append(g.Problems, fmt.Sprintf("keyed entries after %d were added outside the global head", headSeq))
	case headSeq > 0 && !macEqual(headHash, prev):
		g.Problems = append(g.Problems, fmt.Sprintf("keyed entry %d does not match the global head: it was rewritten", lastSeq))
	}
	g.OK = len(g.Problems) == 0
	return g, nil
}

// rawRows reads every row's columns by name, as portable scalar values.
func rawRows(ctx context.Context, q store.Querier, query string, args ...any) ([]map[string]any, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		m := make(map[string]any, len(cols))
		for i, c := range cols {
			m[strings.ToLower(c)] = portable(vals[i])
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// verifyRecords checks each proposal's and decision's seal, that the
// state column agrees with the sealed decision, that the receipt holds the
// entries each record implies, and that every step belongs to an approval.
func verifyRecords(ctx context.Context, q store.Querier, ks *keyset, receiptID string) (RecordCheck, error) {
	var rc RecordCheck
	where, args := "", []any{}
	if receiptID != "" {
		where, args = " WHERE receipt_id = ?", []any{receiptID}
	}
	props, err := rawRows(ctx, q, `SELECT * FROM approval_proposals`+where+` ORDER BY id`, args...)
	if err != nil {
		return rc, err
	}
	decs, err := rawRows(ctx, q, `SELECT `+decisionColumns+` FROM approval_decisions ORDER BY proposal_id`)
	if err != nil {
		return rc, err
	}
	decByID := map[string]map[string]any{}
	for _, d := range decs {
		id, _ := d["proposal_id"].(string)
		decByID[id] = d
	}
	// What the receipts say about each proposal, from keyed entries only.
	type fact struct{ kind, proposal string }
	seen := map[fact]string{}
	var steps []struct{ receipt, proposal string }
	erows, err := rawRows(ctx, q, `SELECT receipt_id, kind, payload FROM receipt_entries WHERE gseq > 0 AND kind IN ('proposal', 'decision', 'step', 'executed')`)
	if err != nil {
		return rc, err
	}
	for _, e := range erows {
		rid, _ := e["receipt_id"].(string)
		kind, _ := e["kind"].(string)
		body, _ := e["payload"].(string)
		var pl struct {
			Proposal string `json:"proposal"`
			Verdict  string `json:"verdict"`
			Person   string `json:"person"`
		}
		_ = json.Unmarshal([]byte(body), &pl)
		if pl.Proposal == "" {
			continue
		}
		val := rid
		if kind == EntryDecision {
			val = rid + "|" + pl.Verdict + "|" + pl.Person
		}
		seen[fact{kind, pl.Proposal}] = val
		if kind == EntryStep && (receiptID == "" || rid == receiptID) {
			steps = append(steps, struct{ receipt, proposal string }{rid, pl.Proposal})
		}
	}
	approvedOK := map[string]bool{}
	inScope := map[string]bool{}
	for _, row := range props {
		rc.Proposals++
		str := func(c string) string { s, _ := row[c].(string); return s }
		id, rid, state := str("id"), str("receipt_id"), State(str("state"))
		inScope[id] = true
		sp := checkProposalRow(ks, row)
		d, hasDec := decByID[id]
		var cd checkedDecision
		if hasDec {
			rc.Decisions++
			cd = checkDecisionRow(ks, sp.MAC, d)
		}
		if sp.Status == RecordUnsealed {
			rc.Unauthenticated = append(rc.Unauthenticated, fmt.Sprintf("proposal %s (written before keys)", id))
			if hasDec {
				rc.Unauthenticated = append(rc.Unauthenticated, fmt.Sprintf("decision on %s (written before keys)", id))
			}
			continue
		}
		if sp.Status == RecordEdited {
			rc.Problems = append(rc.Problems, fmt.Sprintf("proposal %s was edited after it was made: its fixed fields (what, targets, action, approvers, …) no longer match its seal", id))
		}
		if _, ok := seen[fact{EntryProposal, id}]; !ok {
			rc.Problems = append(rc.Problems, fmt.Sprintf("receipt %s has no proposal entry for %s: it was removed", rid, id))
		}
		if hasDec {
			switch cd.Status {
			case RecordUnsealed:
				rc.Problems = append(rc.Problems, fmt.Sprintf("the decision on %s carries no seal although its proposal is sealed: it was written outside Decide", id))
			case RecordEdited:
				rc.Problems = append(rc.Problems, fmt.Sprintf("the decision on %s (%s by %s) fails its seal: it was edited, or moved from another proposal", id, cd.Verdict, cd.PersonID))
			}
			want := rid + "|" + string(cd.Verdict) + "|" + cd.PersonID
			if got, ok := seen[fact{EntryDecision, id}]; !ok {
				rc.Problems = append(rc.Problems, fmt.Sprintf("receipt %s has no decision entry for %s: it was removed", rid, id))
			} else if got != want && cd.Status == RecordOK {
				rc.Problems = append(rc.Problems, fmt.Sprintf("the decision on %s does not match the receipt's decision entry", id))
			}
		}
		sealedApprove := hasDec && cd.Status == RecordOK && cd.Verdict == VerdictApprove && sp.Status == RecordOK
		approvedOK[id] = sealedApprove
		switch state {
		case StateApproved, StateExecuted, StateUndone:
			if !sealedApprove {
				rc.Problems = append(rc.Problems, fmt.Sprintf("proposal %s is marked %s but has no sealed decision approving it: the state was set outside Decide", id, state))
			}
			_, executed := seen[fact{EntryExecuted, id}]
			switch {
			case state != StateApproved && !executed:
				rc.Problems = append(rc.Problems, fmt.Sprintf("proposal %s is marked %s but its receipt records no execution", id, state))
			case state == StateApproved && executed:
				// Set back from executed: it would let the approval run twice.
				rc.Problems = append(rc.Problems, fmt.Sprintf("proposal %s is marked approved but its receipt records it executed: the state was reset outside Data Workers", id))
			}
		case StateRejected:
			if !hasDec || cd.Status != RecordOK || cd.Verdict != VerdictReject {
				rc.Problems = append(rc.Problems, fmt.Sprintf("proposal %s is marked rejected but has no sealed decision rejecting it", id))
			}
		case StatePending, StateEscalated, StateExpired:
			if hasDec {
				rc.Problems = append(rc.Problems, fmt.Sprintf("proposal %s is marked %s but a decision is recorded for it: the state was reset outside Decide", id, state))
			}
		}
	}
	if receiptID == "" {
		for id := range decByID {
			if !inScope[id] {
				rc.Decisions++
				rc.Problems = append(rc.Problems, fmt.Sprintf("a decision is recorded for %s, but no such proposal exists: the proposal was removed", id))
			}
		}
	}
	for _, st := range steps {
		rc.Steps++
		ok, sealed := approvedOK[st.proposal]
		switch {
		case !inScope[st.proposal]:
			if receiptID == "" {
				rc.Problems = append(rc.Problems, fmt.Sprintf("receipt %s records a step for %s, but no such proposal exists", st.receipt, st.proposal))
			}
		case sealed && !ok:
			rc.Problems = append(rc.Problems, fmt.Sprintf("receipt %s records a step for %s, which has no sealed approval", st.receipt, st.proposal))
		}
	}
	sort.Strings(rc.Problems)
	return rc, nil
}
