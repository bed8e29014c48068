package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/storeconfig"
)

// demoHarness is dw with its own store file and a DuckDB warehouse path
// nothing has created yet.
func demoHarness(t *testing.T) (*harness, string) {
	dir := t.TempDir()
	wh := filepath.Join(dir, "wh", "warehouse.duckdb")
	return newHarness(t, fmt.Sprintf("store:\n  path: %s\nwarehouses:\n  - {name: wh, kind: duckdb, path: %s}\n", filepath.Join(dir, "dw.db"), wh)), wh
}

// storeFacts reads what demo load may change: the replay mark and the
// graph's asset count.
func storeFacts(t *testing.T, h *harness) (replay bool, assets int) {
	t.Helper()
	cfg := h.cfg()
	db, err := storeconfig.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if replay, err = approvals.IsReplayStore(context.Background(), db, cfg.Home); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM lineage_assets`).Scan(&assets); err != nil {
		t.Fatal(err)
	}
	return replay, assets
}

// TestDemoLoadNeverMakesARealStoreAReplayStore: a fresh store becomes the
// demo's replay store and takes a second pack; a store with real records
// is refused untouched (no graph, no warehouse file, no mark), and with
// --into-existing-store gets the pack but stays a real store.
func TestDemoLoadNeverMakesARealStoreAReplayStore(t *testing.T) {
	t.Run("fresh store", func(t *testing.T) {
		h, _ := demoHarness(t)
		if out, errOut, code := h.dw("bob", "demo", "load", "billing"); code != 0 {
			t.Fatalf("demo load into a fresh store: exit %d\n%s%s", code, out, errOut)
		}
		replay, assets := storeFacts(t, h)
		if !replay || assets == 0 {
			t.Fatalf("fresh store after load: replay %v, %d assets; want a replay store with the pack's graph", replay, assets)
		}
		if out, errOut, code := h.dw("bob", "demo", "load", "loyalty"); code != 0 {
			t.Fatalf("second pack into the demo's store: exit %d\n%s%s", code, out, errOut)
		}
		if replay, more := storeFacts(t, h); !replay || more <= assets {
			t.Fatalf("after the second pack: replay %v, %d assets (was %d)", replay, more, assets)
		}
	})
	t.Run("store with real records", func(t *testing.T) {
		h, wh := demoHarness(t)
		h.propose()
		out, errOut, code := h.dw("bob", "demo", "load", "billing")
		expect(t, "demo load into a real store", errOut, code, 1, "already holds data the demo did not make", "approval_proposals", "--into-existing-store", "nothing was loaded")
		if replay, assets := storeFacts(t, h); replay || assets != 0 {
			t.Fatalf("refused load changed the store: replay %v, %d assets\n%s", replay, assets, out)
		}
		if _, err := os.Stat(wh); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("refused load touched the warehouse: %v", err)
		}
		// A forged mark (a setting written without the key) does not make
		// it the demo's store either.
		db := svcDB(t, h)
		if _, err := db.ExecContext(context.Background(), `INSERT INTO kv (key, value, updated_ms) VALUES ('store.made_for_replay', 'x', 0)`); err != nil {
			t.Fatal(err)
		}
		if _, _, code := h.dw("bob", "demo", "load", "billing"); code != 1 {
			t.Fatalf("forged replay mark let the demo in: exit %d", code)
		}

		out, errOut, code = h.dw("bob", "demo", "load", "billing", "--into-existing-store")
		if code != 0 {
			t.Fatalf("--into-existing-store: exit %d\n%s%s", code, out, errOut)
		}
		if replay, assets := storeFacts(t, h); replay || assets == 0 {
			t.Fatalf("--into-existing-store: replay %v, %d assets; want the pack loaded and the store still real", replay, assets)
		}
	})
}
