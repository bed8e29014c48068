package approvals

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// The governance state dispatch acts on (the org-wide stop, each domain's
// autonomy set by a person) is what the sealed org receipt proves. The kv
// rows are only a cache that must agree with the receipt's latest keyed
// stop/resume or autonomy entry: a row edited, added or removed outside
// Data Workers makes the state "tampered", and tampered fails closed
// (dispatch refused as if stopped, the domain at L0). Before that, a read
// checks that the org receipt's chain verifies from the point this
// process last verified (orgchain.go): a chain that does not verify fails
// closed the same way. A read costs the head query and two indexed point
// queries while nothing was appended, and walks only what was appended
// since otherwise; VerifyAll walks the chain and reports the same
// disagreements.

// govEntry is the latest governance entry of the org receipt found for a
// read, already authenticated.
type govEntry struct {
	seq     int64
	kind    string
	actor   string
	at      time.Time
	payload map[string]any
}

const govEntryCols = `seq, kind, actor, at_ms, payload, prev_hash, hash, gseq, gprev`

// rawGovEntry is one row of govEntryCols as stored, not yet checked.
type rawGovEntry struct {
	seq, atMs, gseq                         int64
	kind, actor, payload, prev, hash, gprev string
}

func scanRawGovEntry(sc interface{ Scan(...any) error }) (rawGovEntry, error) {
	var r rawGovEntry
	err := sc.Scan(&r.seq, &r.kind, &r.actor, &r.atMs, &r.payload, &r.prev, &r.hash, &r.gseq, &r.gprev)
	return r, err
}

// check authenticates the entry and decodes it, or says how it was
// tampered with. An entry written before keys existed is accepted only
// while no keyed org entry precedes it; otherwise it was written without
// the key. It runs with no rows open: some drivers allow one statement at
// a time in a transaction.
func (r rawGovEntry) check(ctx context.Context, q store.Querier, ks *keyset) (*govEntry, string, error) {
	where := fmt.Sprintf("org receipt entry %d (%s by %s)", r.seq, r.kind, r.actor)
	if r.gseq > 0 {
		if !macEqual(entryMAC(ks, OrgReceiptID, r.seq, r.kind, r.actor, r.atMs, r.prev, r.payload, r.gseq, r.gprev), r.hash) {
			return nil, where + " does not match its MAC: it was edited", nil
		}
	} else {
		// Rare (stores older than keys): looked up only then, so the
		// common read stays one small statement.
		var keyedBefore int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM receipt_entries
			WHERE receipt_id = ? AND seq < ? AND gseq > 0 LIMIT 1) k`, OrgReceiptID, r.seq).Scan(&keyedBefore); err != nil {
			return nil, "", err
		}
		switch {
		case keyedBefore > 0:
			return nil, where + " carries no MAC but follows keyed entries: it was written without the key", nil
		case entryHash(OrgReceiptID, r.seq, r.kind, r.actor, r.atMs, r.prev, r.payload) != r.hash:
			return nil, where + " does not match its hash: it was edited", nil
		}
	}
	e := &govEntry{seq: r.seq, kind: r.kind, actor: r.actor, at: store.FromMillis(r.atMs)}
	if err := json.Unmarshal([]byte(r.payload), &e.payload); err != nil {
		return nil, where + " has an unreadable payload", nil
	}
	return e, "", nil
}

func (e *govEntry) str(k string) string {
	v, _ := e.payload[k].(string)
	return v
}

// readStop is the org-wide stop as the org receipt proves it, checked
// against the kv cache. gate is the store whose org chain is verified
// first (from its checkpoint); nil skips that, for verify, which walks the
// chain itself.
func readStop(ctx context.Context, q store.Querier, ks *keyset, gate *store.DB) (StopState, error) {
	head := ""
	if gate != nil {
		problem, h, err := walkOrgChain(ctx, q, ks, gate, false)
		if err != nil {
			return StopState{}, fmt.Errorf("org stop: %w", err)
		}
		if problem != "" {
			return StopState{Active: true, Tampered: chainFailure(problem)}, nil
		}
		head = h
	}
	fr, err := cachedFromReceipt(ctx, q, ks, head, "stop", func() (fromReceipt, error) {
		r, err := scanRawGovEntry(q.QueryRowContext(ctx, `SELECT `+govEntryCols+` FROM receipt_entries
			WHERE receipt_id = ? AND kind IN (?, ?) ORDER BY seq DESC LIMIT 1`, OrgReceiptID, EntryStop, EntryResume))
		if errors.Is(err, sql.ErrNoRows) {
			return fromReceipt{}, nil
		}
		if err != nil {
			return fromReceipt{}, err
		}
		var fr fromReceipt
		fr.ent, fr.problem, err = r.check(ctx, q, ks)
		return fr, err
	})
	if err != nil {
		return StopState{}, fmt.Errorf("org stop: %w", err)
	}
	ent, problem := fr.ent, fr.problem
	raw, _, cached, err := store.GetSetting(ctx, q, stopKey)
	if err != nil {
		return StopState{}, err
	}
	var st StopState
	if ent != nil && ent.kind == EntryStop {
		st = StopState{Active: true, By: ent.actor, OSUser: ent.str("os_user"), Reason: ent.str("reason"), Since: ent.at}
	}
	if problem == "" {
		problem = stopDisagreement(st, ent, raw, cached)
	}
	if problem != "" {
		// What the receipt proves, if anything, is kept for messages.
		st.Active, st.Tampered = true, problem
	}
	return st, nil
}

func stopDisagreement(st StopState, ent *govEntry, raw string, cached bool) string {
	switch {
	case !st.Active && cached:
		if ent == nil {
			return "the store holds an org-wide stop that the org receipt never recorded"
		}
		return fmt.Sprintf("the store holds an org-wide stop, but the org receipt's last stop/resume entry (%d) is a resume by %s", ent.seq, ent.actor)
	case st.Active && !cached:
		return fmt.Sprintf("the org-wide stop recorded in org receipt entry %d (by %s at %s) was removed from the store", ent.seq, ent.actor, stamp(ent.at))
	case st.Active:
		var c StopState
		if err := json.Unmarshal([]byte(raw), &c); err != nil {
			return "the store's org-wide stop is unreadable"
		}
		// Since is not compared: stores made before this check may date
		// the row and the entry a clock reading apart; the entry's time is
		// the one shown.
		if c.By != st.By || c.Reason != st.Reason {
			return fmt.Sprintf("the store's org-wide stop (by %s: %q) differs from org receipt entry %d (by %s: %q)", c.By, c.Reason, ent.seq, st.By, st.Reason)
		}
	}
	return ""
}

// readLevel is the autonomy a person set for domain as the org receipt
// proves it, checked against the kv cache; set is false when the domain
// runs at its configured level. A tampered state is returned as problem.
func readLevel(ctx context.Context, q store.Querier, ks *keyset, gate *store.DB, domain string) (o levelOverride, set bool, problem string, err error) {
	head := ""
	if gate != nil {
		p, h, err := walkOrgChain(ctx, q, ks, gate, false)
		if err != nil || p != "" {
			if p != "" {
				p = chainFailure(p)
			}
			return o, false, p, err
		}
		head = h
	}
	fr, err := cachedFromReceipt(ctx, q, ks, head, "autonomy\x00"+domain, func() (fromReceipt, error) {
		return latestAutonomyEntry(ctx, q, ks, domain)
	})
	if err != nil {
		return o, false, "", fmt.Errorf("autonomy of %s: %w", domain, err)
	}
	ent, problem := fr.ent, fr.problem
	raw, _, cached, err := store.GetSetting(ctx, q, autonomyKey(domain))
	if err != nil || problem != "" {
		return o, false, problem, err
	}
	if ent != nil && ent.payload["reset"] != true {
		o, set = levelOverride{Level: ent.str("to"), By: ent.actor, Reason: ent.str("reason"), At: ent.at}, true
		if _, ok := LevelNames[o.Level]; !ok {
			return o, false, fmt.Sprintf("org receipt entry %d sets %s to an unknown level %q", ent.seq, domain, o.Level), nil
		}
	}
	switch {
	case !set && cached:
		return o, false, fmt.Sprintf("the store sets %s's autonomy, but the org receipt records no such change", domain), nil
	case set && !cached:
		return o, false, fmt.Sprintf("the autonomy %s set for %s by %s (org receipt entry %d) was removed from the store", o.Level, domain, o.By, ent.seq), nil
	case set:
		var c levelOverride
		if err := json.Unmarshal([]byte(raw), &c); err != nil {
			return o, false, fmt.Sprintf("the store's autonomy of %s is unreadable", domain), nil
		}
		if c.Level != o.Level || c.By != o.By {
			return o, false, fmt.Sprintf("the store sets %s to %s by %s, but org receipt entry %d records %s by %s", domain, c.Level, c.By, ent.seq, o.Level, o.By), nil
		}
	}
	return o, set, "", nil
}

// governanceProblems compares every governance row in kv, and every domain
// the org receipt ever changed, with what the receipt proves.
func governanceProblems(ctx context.Context, q store.Querier, ks *keyset) ([]string, error) {
	var probs []string
	st, err := readStop(ctx, q, ks, nil)
	if err != nil {
		return nil, err
	}
	if st.Tampered != "" {
		probs = append(probs, "governance: "+st.Tampered)
	}
	domains := map[string]bool{}
	keys, err := store.Strings(ctx, q, `SELECT key FROM kv WHERE key LIKE 'autonomy.%'`)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		domains[strings.TrimPrefix(k, "autonomy.")] = true
	}
	rows, err := q.QueryContext(ctx, `SELECT payload FROM receipt_entries WHERE receipt_id = ? AND kind = ?`, OrgReceiptID, EntryAutonomy)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			rows.Close()
			return nil, err
		}
		var m map[string]any
		if json.Unmarshal([]byte(p), &m) == nil {
			if d, ok := m["domain"].(string); ok {
				domains[d] = true
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(domains))
	for d := range domains {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		_, _, p, err := readLevel(ctx, q, ks, nil, d)
		if err != nil {
			return nil, err
		}
		if p != "" {
			probs = append(probs, "governance: "+p)
		}
	}
	return probs, nil
}

// hasGovernanceRows says whether kv holds a stop or an autonomy level, so
// verify checks the org receipt even when it has no entries at all.
func hasGovernanceRows(ctx context.Context, q store.Querier) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM kv WHERE key = ? OR key LIKE 'autonomy.%'`, stopKey).Scan(&n)
	return n > 0, err
}

var likeEscaper = strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")

// tamperedAdvice ends every tampered-state message.
const tamperedAdvice = "run dw receipt verify to see what was changed"

// fromReceipt is what the org receipt proves about one setting: its
// latest authenticated entry (nil when there is none), or how that entry
// was tampered with.
type fromReceipt struct {
	ent     *govEntry
	problem string
}

// receiptStates caches fromReceipt by the org receipt's head MAC: the
// head covers every entry before it, so while it is unchanged the answer
// is too, and dispatch pays one primary-key read instead of a scan of
// the org receipt. An edit that moves the head misses the cache and is
// judged afresh; the cached entry itself is read again by its key and
// its MAC checked on every hit, so an edit of it shows at once.
var receiptStates = struct {
	sync.Mutex
	m map[string]fromReceipt
}{m: map[string]fromReceipt{}}

// head is the org head MAC the caller's chain check verified through, or
// "" to read it here.
func cachedFromReceipt(ctx context.Context, q store.Querier, ks *keyset, head, what string, load func() (fromReceipt, error)) (fromReceipt, error) {
	if head == "" {
		err := q.QueryRowContext(ctx, `SELECT hash FROM receipt_heads WHERE receipt_id = ?`, OrgReceiptID).Scan(&head)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fromReceipt{}, err
		}
	}
	if head == "" {
		return load()
	}
	var err error
	key := head + "\x00" + what
	receiptStates.Lock()
	fr, ok := receiptStates.m[key]
	receiptStates.Unlock()
	if ok {
		if fr.ent == nil {
			return fr, nil
		}
		r, err := scanRawGovEntry(q.QueryRowContext(ctx, `SELECT `+govEntryCols+` FROM receipt_entries
			WHERE receipt_id = ? AND seq = ?`, OrgReceiptID, fr.ent.seq))
		if errors.Is(err, sql.ErrNoRows) {
			return fromReceipt{problem: fmt.Sprintf("org receipt entry %d (%s by %s) was removed", fr.ent.seq, fr.ent.kind, fr.ent.actor)}, nil
		}
		if err != nil {
			return fromReceipt{}, err
		}
		if _, p, err := r.check(ctx, q, ks); err != nil || p != "" {
			return fromReceipt{problem: p}, err
		}
		return fr, nil
	}
	if fr, err = load(); err != nil {
		return fr, err
	}
	receiptStates.Lock()
	if len(receiptStates.m) >= 4096 {
		clear(receiptStates.m)
	}
	receiptStates.m[key] = fr
	receiptStates.Unlock()
	return fr, nil
}

// latestAutonomyEntry finds the org receipt's latest entry for domain.
func latestAutonomyEntry(ctx context.Context, q store.Querier, ks *keyset, domain string) (fromReceipt, error) {
	// The LIKE narrows the rows to those naming the domain (canonical JSON
	// writes "domain":"x" exactly so, and escapes any quote inside a
	// string); each candidate's domain is compared after decoding. Every
	// candidate read is authenticated.
	name, _ := json.Marshal(domain)
	pat := `%"domain":` + likeEscaper.Replace(string(name)) + `%`
	rows, err := q.QueryContext(ctx, `SELECT `+govEntryCols+` FROM receipt_entries
		WHERE receipt_id = ? AND kind = ? AND payload LIKE ? ESCAPE '!' ORDER BY seq DESC`, OrgReceiptID, EntryAutonomy, pat)
	if err != nil {
		return fromReceipt{}, err
	}
	var seen []rawGovEntry
	for rows.Next() {
		r, err := scanRawGovEntry(rows)
		if err != nil {
			rows.Close()
			return fromReceipt{}, err
		}
		seen = append(seen, r)
		var m struct {
			Domain *string `json:"domain"`
		}
		if json.Unmarshal([]byte(r.payload), &m) != nil || m.Domain == nil || *m.Domain == domain {
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fromReceipt{}, err
	}
	var fr fromReceipt
	for _, r := range seen {
		e, p, err := r.check(ctx, q, ks)
		if err != nil {
			return fromReceipt{}, err
		}
		if p != "" {
			return fromReceipt{problem: p}, nil
		}
		fr.ent = e
	}
	if fr.ent != nil && fr.ent.str("domain") != domain {
		fr.ent = nil
	}
	return fr, nil
}
