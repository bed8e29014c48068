package approvals

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func cacheReset() {
	anchorWritten.Lock()
	clear(anchorWritten.m)
	anchorWritten.Unlock()
}

// Hostile review F2: a store writer without the key deletes the final stop
// entry, rolls the head rows back and deletes the kv stop. A fresh process
// on this machine finds the head behind its anchor: dispatch is refused
// and verify reports it.
func TestStopUndoneByRollbackIsCaughtByTheAnchor(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		admin := adminBy(t)
		if _, err := s.Stop(ctx, admin.OSUser, "real stop"); err != nil {
			t.Fatal(err)
		}
		// dw stop anchors the head, stop included, before it returns.
		var seq int64
		var head string
		if err := db.QueryRowContext(ctx, `SELECT seq, hash FROM receipt_heads WHERE receipt_id = ?`, OrgReceiptID).Scan(&seq, &head); err != nil {
			t.Fatal(err)
		}
		g, err := orgGenesis(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if a, ok, err := loadAnchor(filepath.Join(s.cfg.Home, anchorFileName), g); err != nil || !ok || a.Seq != seq || a.MAC != head {
			t.Fatalf("anchor after dw stop: %+v %v %v; want entry %d", a, ok, err, seq)
		}
		if v, status := orgVerification(t, db); !v.OK || status != StatusOK {
			t.Fatalf("verify after the stop: %+v (audit %s)", v, status)
		}
		info, err := os.Stat(filepath.Join(s.cfg.Home, anchorFileName))
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("anchor file: %v, %v; want 0600 beside the key", info, err)
		}
		execSQL(t, db, `DELETE FROM receipt_entries WHERE receipt_id = ? AND seq = ?`, OrgReceiptID, seq)
		execSQL(t, db, `UPDATE receipt_heads SET seq = ?, hash = (SELECT hash FROM receipt_entries WHERE receipt_id = ? AND seq = ?) WHERE receipt_id = ?`,
			seq-1, OrgReceiptID, seq-1, OrgReceiptID)
		execSQL(t, db, `UPDATE receipt_global_head SET seq = seq - 1, hash = (SELECT hash FROM receipt_entries WHERE gseq = (SELECT seq - 1 FROM receipt_global_head))`)
		execSQL(t, db, `DELETE FROM kv WHERE key = ?`, stopKey)
		forgetCheckpoints()
		cacheReset()

		st, err := s.StopStatus(ctx)
		if err != nil || !st.Active || !strings.Contains(st.Tampered, "this machine verified it up to entry") {
			t.Fatalf("stop after the rollback: %+v, %v; want active, tampered by the anchor", st, err)
		}
		v, status := orgVerification(t, db)
		if v.OK || status == StatusOK || !strings.Contains(strings.Join(v.Problems, "; "), fmt.Sprintf("verified it up to entry %d", seq)) {
			t.Fatalf("verify after the rollback: %+v (audit %s); want the anchor's finding", v, status)
		}
	})
}

// Two processes advancing one anchor file at once keep the higher head.
func TestAnchorAdvanceKeepsTheMax(t *testing.T) {
	path := filepath.Join(t.TempDir(), anchorFileName)
	var wg sync.WaitGroup
	for i := 1; i <= 40; i++ {
		wg.Add(1)
		go func(seq int64) {
			defer wg.Done()
			// Each goroutine as a process of its own: no memo.
			if err := advanceAnchor(path, "g", seq, fmt.Sprintf("mac%d", seq)); err != nil {
				t.Error(err)
			}
			cacheReset()
		}(int64(i))
	}
	wg.Wait()
	a, ok, err := loadAnchor(path, "g")
	if err != nil || !ok || a.Seq != 40 || a.MAC != "mac40" {
		t.Fatalf("anchor after concurrent advances: %+v %v %v; want seq 40", a, ok, err)
	}
	// A lower head never moves it back.
	if err := advanceAnchor(path, "g", 3, "mac3"); err != nil {
		t.Fatal(err)
	}
	if a, _, _ := loadAnchor(path, "g"); a.Seq != 40 {
		t.Fatalf("anchor moved back to %d", a.Seq)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("anchor mode: %v, %v", fi, err)
	}
}

// Hostile review F4: a replay mark copied from the demo store into another
// store under the same key is refused there.
func TestReplayMarkCopiedToAnotherStoreIsRefused(t *testing.T) {
	ctx := context.Background()
	cfg := testCfg(t)
	demo, real := storetest.SQLite(t), storetest.SQLite(t)
	if err := MarkReplayStore(ctx, demo, cfg.Home, time.Now()); err != nil {
		t.Fatal(err)
	}
	// The real store has a history of its own.
	rs := New(real, cfg, nil, nil)
	admin := adminBy(t)
	if _, err := rs.Stop(ctx, admin.OSUser, "drill"); err != nil {
		t.Fatal(err)
	}
	for name, db := range map[string]*store.DB{"demo": demo, "real": real} {
		ok, err := IsReplayStore(ctx, db, cfg.Home)
		if err != nil || ok != (name == "demo") {
			t.Fatalf("%s before the copy: replay %v, %v", name, ok, err)
		}
	}
	mark, _, _, err := store.GetSetting(ctx, demo, replaySetting)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.PutSetting(ctx, real, replaySetting, mark, time.Now()); err != nil {
		t.Fatal(err)
	}
	if ok, err := IsReplayStore(ctx, real, cfg.Home); err != nil || ok {
		t.Fatalf("real store with the demo's mark: replay %v, %v; want refused", ok, err)
	}
	// Copying the demo's genesis MAC over the real store's first entry
	// does not carry the mark either: that entry no longer verifies.
	var g string
	if err := demo.QueryRowContext(ctx, `SELECT hash FROM receipt_entries WHERE receipt_id = ? AND seq = 1`, OrgReceiptID).Scan(&g); err != nil {
		t.Fatal(err)
	}
	execSQL(t, real, `UPDATE receipt_entries SET hash = ? WHERE receipt_id = ? AND seq = 1`, g, OrgReceiptID)
	if ok, err := IsReplayStore(ctx, real, cfg.Home); err != nil || ok {
		t.Fatalf("real store with the demo's genesis MAC: replay %v, %v", ok, err)
	}
}

// An anchor this process cannot read (here: not a regular file, as a
// permission error would be for another account) cannot rule a rollback
// out, so the stop reads as in force and tampered until it is repaired,
// instead of being passed over with a warning; once the file is gone (the
// operator's repair) the stop reads as the store records it.
func TestUnreadableAnchorFailsClosed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		admin := adminBy(t)
		if _, err := s.Stop(ctx, admin.OSUser, "real stop"); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(s.cfg.Home, anchorFileName)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		forgetCheckpoints()
		cacheReset()
		st, err := s.StopStatus(ctx)
		if err != nil || !st.Active || st.Tampered == "" {
			t.Fatalf("stop with an unreadable anchor: %+v, %v; want in force, tampered", st, err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		forgetCheckpoints()
		cacheReset()
		if st, err := s.StopStatus(ctx); err != nil || !st.Active || st.Tampered != "" {
			t.Fatalf("stop once the anchor is gone: %+v, %v; want in force, not tampered", st, err)
		}
	})
}
