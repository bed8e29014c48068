package approvals

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dataworkers/dw/internal/store"
)

// The governance reads that gate dispatch (the stop, autonomy levels, the
// recorded approvers and store admin) first check that the org receipt's
// chain verifies: every entry authenticated, linked to the one before,
// numbered without gaps, and ending at the head row. Reading only the
// latest stop or autonomy entry would miss an older entry edited so a
// query no longer finds it, or the tail removed with the head moved back.
//
// The walk is incremental: each process keeps, per store and key, the
// point it has verified through (seq and MAC). The next read checks only
// the entries appended since, linking the first to that MAC, so a read
// costs one head query while nothing changed. A head behind the
// checkpoint, or a different MAC at the checkpoint's seq, is a rollback or
// a rewrite of what was verified, and fails closed. The checkpoint lives
// in memory only: one kept in the store could be replayed by whoever can
// write the store, so a new process walks the chain once from the start.
// An edit, after this process verified it, of an entry other than the one
// a read uses is found by the next new process and by dw receipt verify.

// orgCheckpoint is how far this process has verified one store's org
// receipt: entries 1..seq form a valid chain whose last MAC is hash.
type orgCheckpoint struct {
	seq   int64
	hash  string
	keyed bool // a keyed entry was seen: later unkeyed ones are forged
	// genesis is the first entry's MAC, naming the store in the anchor.
	genesis string
}

type checkpointKey struct {
	db *store.DB
	ks *keyset
}

var orgCheckpoints = struct {
	sync.Mutex
	m map[checkpointKey]orgCheckpoint
}{m: map[checkpointKey]orgCheckpoint{}}

// orgEntriesWalked counts org receipt entries authenticated by chain
// walks, so tests can assert that a repeated read re-walks nothing.
var orgEntriesWalked atomic.Int64

// orgChainProblem verifies the org receipt's chain through its head, from
// the checkpoint kept for db (from the start when db is nil or full is
// set), and says how it fails to verify ("" when it verifies). Only a
// walk on db itself moves the checkpoint: a transaction's view may hold
// entries it has not committed.
func orgChainProblem(ctx context.Context, q store.Querier, ks *keyset, db *store.DB, full bool) (string, error) {
	problem, _, err := walkOrgChain(ctx, q, ks, db, full)
	return problem, err
}

// walkOrgChain is orgChainProblem that also returns the head MAC it
// verified through, so a read keys its cache on it without asking again.
func walkOrgChain(ctx context.Context, q store.Querier, ks *keyset, db *store.DB, full bool) (problem, head string, err error) {
	// One statement, so the head and the last entry come from one snapshot
	// even while another process appends.
	var headSeq, maxSeq int64
	var headHash string
	if err := q.QueryRowContext(ctx, `SELECT
		COALESCE((SELECT seq FROM receipt_heads WHERE receipt_id = ?), 0),
		COALESCE((SELECT hash FROM receipt_heads WHERE receipt_id = ?), ''),
		COALESCE((SELECT MAX(seq) FROM receipt_entries WHERE receipt_id = ?), 0)`,
		OrgReceiptID, OrgReceiptID, OrgReceiptID).Scan(&headSeq, &headHash, &maxSeq); err != nil {
		return "", "", fmt.Errorf("org receipt head: %w", err)
	}
	if maxSeq > headSeq {
		return fmt.Sprintf("org receipt entries after %d were added outside the chain's head (up to entry %d)", headSeq, maxSeq), headHash, nil
	}
	key := checkpointKey{db: db, ks: ks}
	var cp orgCheckpoint
	if db != nil {
		orgCheckpoints.Lock()
		cp = orgCheckpoints.m[key]
		orgCheckpoints.Unlock()
	}
	switch {
	case cp.seq > headSeq:
		return fmt.Sprintf("the org receipt's head was moved back from entry %d, verified earlier, to %d: entries were removed", cp.seq, headSeq), headHash, nil
	case cp.seq > 0 && cp.seq == headSeq && cp.hash != headHash:
		return fmt.Sprintf("the org receipt's last entry %d was rewritten after it was verified", cp.seq), headHash, nil
	}
	if full {
		// Verified afresh, but a rollback below this process's checkpoint
		// (checked above) still counts.
		cp = orgCheckpoint{}
	}
	if cp.seq == headSeq {
		if headSeq == 0 || cp.hash == headHash {
			return "", headHash, nil
		}
	}
	if cp.seq == 0 {
		// A walk from the start (a new process, or a full walk): the head
		// must not be behind what this machine verified before (anchor.go).
		_, genesis, problem, err := anchorProblem(ctx, q, ks, headSeq)
		if err != nil {
			return "", "", err
		}
		if problem != "" {
			return problem, headHash, nil
		}
		cp.genesis = genesis
	}
	rows, err := q.QueryContext(ctx, `SELECT `+govEntryCols+` FROM receipt_entries
		WHERE receipt_id = ? AND seq > ? AND seq <= ? ORDER BY seq`, OrgReceiptID, cp.seq, headSeq)
	if err != nil {
		return "", "", fmt.Errorf("org receipt: %w", err)
	}
	defer rows.Close()
	want, prev, keyed := cp.seq+1, cp.hash, cp.keyed
	for rows.Next() {
		r, err := scanRawGovEntry(rows)
		if err != nil {
			return "", "", err
		}
		orgEntriesWalked.Add(1)
		where := fmt.Sprintf("org receipt entry %d (%s by %s)", r.seq, r.kind, r.actor)
		switch {
		case r.seq != want:
			return fmt.Sprintf("org receipt entries %s are missing before entry %d: removed", seqRange(want, r.seq-1), r.seq), headHash, nil
		case r.prev != prev:
			return where + " does not link to the entry before it: an earlier entry was removed or rewritten", headHash, nil
		case r.gseq > 0:
			keyed = true
			if !macEqual(entryMAC(ks, OrgReceiptID, r.seq, r.kind, r.actor, r.atMs, r.prev, r.payload, r.gseq, r.gprev), r.hash) {
				return where + " does not match its MAC: it was edited", headHash, nil
			}
		case keyed:
			return where + " carries no MAC but follows keyed entries: it was written without the key", headHash, nil
		case entryHash(OrgReceiptID, r.seq, r.kind, r.actor, r.atMs, r.prev, r.payload) != r.hash:
			return where + " does not match its hash: it was edited", headHash, nil
		}
		prev, want = r.hash, r.seq+1
	}
	if err := rows.Err(); err != nil {
		return "", "", err
	}
	if want-1 != headSeq {
		return fmt.Sprintf("org receipt entries %s are missing at the end: removed (the head records %d entries)", seqRange(want, headSeq), headSeq), headHash, nil
	}
	if prev != headHash {
		return fmt.Sprintf("the org receipt's last entry %d does not match the head's MAC: it was rewritten", headSeq), headHash, nil
	}
	if _, onDB := q.(*store.DB); onDB && db != nil {
		orgCheckpoints.Lock()
		if len(orgCheckpoints.m) >= 1024 {
			clear(orgCheckpoints.m)
		}
		if old := orgCheckpoints.m[key]; old.seq <= headSeq {
			orgCheckpoints.m[key] = orgCheckpoint{seq: headSeq, hash: headHash, keyed: keyed, genesis: cp.genesis}
		}
		orgCheckpoints.Unlock()
		noteAnchor(ks, cp.genesis, headSeq, headHash)
	}
	return "", headHash, nil
}

// chainFailurePrefix starts every chainFailure message.
const chainFailurePrefix = "the org receipt does not verify ("

// chainFailure is the message every governance read gives when the org
// receipt does not verify.
func chainFailure(problem string) string {
	return chainFailurePrefix + problem + "), so no governance state can be proven from it"
}

// chainAdvice is what to do about a chain that does not verify: no act
// recorded on top of it can repair it.
const chainAdvice = "no dw act can be recorded on a chain that does not verify: restore the store from a backup, check it with dw receipt verify (--anchor with the last line dw receipt anchor printed), and start the agents again"

// chainBroken reports whether a Tampered message is a chain failure.
func chainBroken(tampered string) bool { return strings.HasPrefix(tampered, chainFailurePrefix) }
