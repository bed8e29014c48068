package approvals

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// A store writer without the key cannot forge an entry, but can remove the
// org receipt's tail and roll its head rows back: the entry that stopped
// every write (dw stop) is gone, and what remains still verifies. A new
// process has no memory of the head it would have seen. So each machine
// keeps a local anchor: the highest org receipt head it has verified (seq
// and MAC) per store, in a 0600 file beside the receipt key, which the
// store's writers cannot touch. A store whose org head is behind its
// anchor, or whose entry at the anchored seq has another MAC, has been
// rolled back or rewritten: governance reads fail closed (dispatch is
// refused) and dw receipt verify reports it.
//
// A store is known by its org receipt's first entry's MAC (its genesis,
// which carries a random store id), which nobody without the key can
// forge. Removing the whole org receipt leaves no genesis to look up; the
// global chain and a posted anchor (dw receipt anchor) still show that.

const anchorFileName = "receipt.anchor"

// anchorPoint is the highest org head this machine verified for a store.
type anchorPoint struct {
	Seq     int64     `json:"seq"`
	MAC     string    `json:"mac"`
	Updated time.Time `json:"updated"`
}

type anchorDoc struct {
	// OrgHeads is keyed by the org receipt's genesis MAC.
	OrgHeads map[string]anchorPoint `json:"org_heads"`
}

// maxAnchoredStores bounds the file; the least recently advanced go first.
const maxAnchoredStores = 1024

// anchorWritten is, per anchor file and store, the seq this process last
// wrote, so a read that moved nothing writes nothing.
var anchorWritten = struct {
	sync.Mutex
	m map[string]int64
}{m: map[string]int64{}}

// anchorPathFor is where the anchor lives for a key: beside the key file,
// or in the data directory when the key comes from the environment.
func anchorPathFor(keyFile, home string) string {
	if keyFile != "" {
		return filepath.Join(filepath.Dir(keyFile), anchorFileName)
	}
	if home != "" {
		return filepath.Join(home, anchorFileName)
	}
	return ""
}

func readAnchorDoc(path string) (anchorDoc, error) {
	doc := anchorDoc{OrgHeads: map[string]anchorPoint{}}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return doc, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > 1<<20 {
		return doc, fmt.Errorf("receipt anchor %s is not a regular file of at most 1 MiB", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return doc, err
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return doc, fmt.Errorf("receipt anchor %s: %w", path, err)
	}
	if doc.OrgHeads == nil {
		doc.OrgHeads = map[string]anchorPoint{}
	}
	return doc, nil
}

// loadAnchor is the anchored head of the store whose genesis is given;
// ok is false when this machine has none.
func loadAnchor(path, genesis string) (anchorPoint, bool, error) {
	if path == "" || genesis == "" {
		return anchorPoint{}, false, nil
	}
	doc, err := readAnchorDoc(path)
	if err != nil {
		return anchorPoint{}, false, err
	}
	a, ok := doc.OrgHeads[genesis]
	return a, ok, nil
}

// advanceAnchor records seq/mac as the store's anchor unless the file
// already holds a higher one. Two processes advancing at once are
// serialised by a lock file; the file is written aside and renamed into
// place, so a reader never sees half of it.
func advanceAnchor(path, genesis string, seq int64, hash string) error {
	if path == "" || genesis == "" || seq <= 0 {
		return nil
	}
	memo := path + "\x00" + genesis
	anchorWritten.Lock()
	done := anchorWritten.m[memo] >= seq
	anchorWritten.Unlock()
	if done {
		return nil
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	doc, err := readAnchorDoc(path)
	if err != nil {
		return err
	}
	if cur, ok := doc.OrgHeads[genesis]; ok && cur.Seq >= seq {
		anchorWritten.Lock()
		anchorWritten.m[memo] = cur.Seq
		anchorWritten.Unlock()
		return nil
	}
	doc.OrgHeads[genesis] = anchorPoint{Seq: seq, MAC: hash, Updated: time.Now().UTC()}
	if len(doc.OrgHeads) > maxAnchoredStores {
		keys := make([]string, 0, len(doc.OrgHeads))
		for k := range doc.OrgHeads {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return doc.OrgHeads[keys[i]].Updated.Before(doc.OrgHeads[keys[j]].Updated) })
		for _, k := range keys[:len(keys)-maxAnchoredStores] {
			delete(doc.OrgHeads, k)
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".receipt.anchor.*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	anchorWritten.Lock()
	if len(anchorWritten.m) >= 1024 {
		clear(anchorWritten.m)
	}
	anchorWritten.m[memo] = seq
	anchorWritten.Unlock()
	return nil
}

// orgGenesis is the MAC of the org receipt's first entry, "" when it has
// none.
func orgGenesis(ctx context.Context, q store.Querier) (string, error) {
	var h string
	err := q.QueryRowContext(ctx, `SELECT hash FROM receipt_entries WHERE receipt_id = ? AND seq = 1`, OrgReceiptID).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return h, err
}

// anchorProblem compares a store's org head with this machine's anchor:
// "" when the head is at or past it. atAnchor is the MAC of the store's
// entry at the anchored seq ("" to look it up).
func anchorProblem(ctx context.Context, q store.Querier, ks *keyset, headSeq int64) (anchorPoint, string, string, error) {
	genesis, err := orgGenesis(ctx, q)
	if err != nil || genesis == "" {
		return anchorPoint{}, genesis, "", err
	}
	a, ok, err := loadAnchor(ks.anchor, genesis)
	if err != nil {
		// The anchor exists but this process cannot read it: whether the
		// org receipt was rolled back cannot be told, so governance fails
		// closed, as it does for a chain that does not verify. On a
		// shared store a second account otherwise dispatches straight
		// through a stop cut out of the store that the anchor's owner
		// would refuse.
		slog.Warn("receipt anchor unreadable", "path", ks.anchor, "err", err)
		return anchorPoint{}, genesis, fmt.Sprintf("the receipt anchor %s exists but cannot be read by this account (%v), so whether the org receipt was rolled back cannot be checked; "+
			"make it readable to every account that runs dw against this store, or give this account its own key location (DW_HOME)", ks.anchor, err), nil
	}
	if !ok {
		return anchorPoint{}, genesis, "", nil
	}
	if a.Seq > headSeq {
		return a, genesis, fmt.Sprintf("the org receipt ends at entry %d, but this machine verified it up to entry %d (anchor %s): entries were removed and the head rolled back; "+
			"only if you restored this store from an older backup on purpose, remove that file to accept it", headSeq, a.Seq, ks.anchor), nil
	}
	var h string
	err = q.QueryRowContext(ctx, `SELECT hash FROM receipt_entries WHERE receipt_id = ? AND seq = ?`, OrgReceiptID, a.Seq).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		return a, genesis, fmt.Sprintf("org receipt entry %d, which this machine verified (anchor %s), is missing: removed", a.Seq, ks.anchor), nil
	}
	if err != nil {
		return a, genesis, "", err
	}
	if !macEqual(h, a.MAC) {
		return a, genesis, fmt.Sprintf("org receipt entry %d is not the one this machine verified (anchor %s): the receipt was rewritten", a.Seq, ks.anchor), nil
	}
	return a, genesis, "", nil
}

// noteAnchor advances the anchor after a verified read, logging (not
// failing on) a file it cannot write: the store's state is still proven.
func noteAnchor(ks *keyset, genesis string, seq int64, hash string) {
	if err := advanceAnchor(ks.anchor, genesis, seq, hash); err != nil {
		slog.Warn("receipt anchor not advanced", "path", ks.anchor, "err", err)
	}
}

// anchorOrg verifies the org receipt's new entries after this process
// appended some, which advances the anchor; a chain that does not verify
// is left for the next governance read to refuse.
func (s *Service) anchorOrg(ctx context.Context) {
	ks, err := s.keys()
	if err != nil {
		return
	}
	if _, err := orgChainProblem(ctx, s.db, ks, s.db, false); err != nil {
		slog.Warn("receipt anchor: org receipt not read", "err", err)
	}
}
