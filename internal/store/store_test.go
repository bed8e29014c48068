package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestMigrationsApplyOnceOnBoth(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		all, err := store.Migrations()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != len(all) {
			t.Errorf("%d migrations recorded, %d embedded", n, len(all))
		}
	})
}

func TestSettingsRoundTrip(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		at := time.Date(2026, 11, 3, 14, 5, 0, 0, time.UTC)
		if _, _, ok, err := store.GetSetting(ctx, db, "stop"); err != nil || ok {
			t.Fatalf("unset setting: ok=%v err=%v", ok, err)
		}
		if err := store.PutSetting(ctx, db, "stop", "first", at); err != nil {
			t.Fatal(err)
		}
		if err := store.PutSetting(ctx, db, "stop", "second", at.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		v, when, ok, err := store.GetSetting(ctx, db, "stop")
		if err != nil || !ok || v != "second" || !when.Equal(at.Add(time.Minute)) {
			t.Fatalf("got %q %v %v %v", v, when, ok, err)
		}
		// A literal question mark is not a placeholder.
		var s string
		if err := db.QueryRowContext(ctx, "SELECT 'a?b' || ?", "c").Scan(&s); err != nil || s != "a?bc" {
			t.Fatalf("rebind: %q %v", s, err)
		}
	})
}

func TestTransactionRollsBack(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		err := db.InTx(ctx, func(tx *store.Tx) error {
			if err := store.PutSetting(ctx, tx, "k", "v", time.Now()); err != nil {
				return err
			}
			return fmt.Errorf("abort")
		})
		if err == nil || err.Error() != "abort" {
			t.Fatalf("err = %v", err)
		}
		if _, _, ok, _ := store.GetSetting(ctx, db, "k"); ok {
			t.Fatal("rolled-back write is visible")
		}
	})
}

// TestCancelledCommitSaysCancelled: a context cancelled while fn runs
// rolls the transaction back on database/sql's own goroutine, so Commit
// may find it already done. The caller still learns why, as
// context.Canceled, and nothing fn wrote is kept.
func TestCancelledCommitSaysCancelled(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		err := db.InTx(ctx, func(tx *store.Tx) error {
			if err := store.PutSetting(ctx, tx, "cancelled", "v", time.Now()); err != nil {
				return err
			}
			cancel()
			// Give database/sql's watcher time to roll back first,
			// the order a busy machine makes likely.
			time.Sleep(50 * time.Millisecond)
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("commit after a cancel: %v, want context.Canceled", err)
		}
		if _, _, ok, _ := store.GetSetting(context.Background(), db, "cancelled"); ok {
			t.Fatal("a cancelled transaction's write is visible")
		}
	})
}

// TestCancelledBatchCommitSaysCancelled: the same for a transaction from
// Begin, committed by its caller (a staged import's batches).
func TestCancelledBatchCommitSaysCancelled(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := store.PutSetting(ctx, tx, "cancelled batch", "v", time.Now()); err != nil {
			t.Fatal(err)
		}
		cancel()
		time.Sleep(50 * time.Millisecond)
		if err := tx.Commit(); !errors.Is(err, context.Canceled) {
			t.Fatalf("commit after a cancel: %v, want context.Canceled", err)
		}
		if _, _, ok, _ := store.GetSetting(context.Background(), db, "cancelled batch"); ok {
			t.Fatal("a cancelled transaction's write is visible")
		}
	})
}

// TestCancelRaceKeepsItsWord: a cancel racing a write at random moments,
// through InTx and through Begin and Commit. Whatever the race, nil means
// the write is kept and an error that is context.Canceled means it is
// not: on PostgreSQL a COMMIT cut off in flight used to be applied by the
// server while the caller was told it was cancelled.
func TestCancelRaceKeepsItsWord(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		check := func(key string, err error) (kept bool) {
			t.Helper()
			_, _, visible, gerr := store.GetSetting(context.Background(), db, key)
			if gerr != nil {
				t.Fatal(gerr)
			}
			switch {
			case err == nil && !visible:
				t.Errorf("%s: nil, but the write is not there", key)
			case err != nil && !errors.Is(err, context.Canceled):
				t.Errorf("%s: %v, neither nil nor cancelled", key, err)
			case err != nil && visible:
				t.Errorf("%s: %v, but the write was kept", key, err)
			}
			return err == nil
		}
		var kept, cancelled int
		for i := 0; i < 150; i++ {
			key := fmt.Sprintf("race-%d", i)
			ctx, cancel := context.WithCancel(context.Background())
			after := time.Duration(rand.IntN(1500)) * time.Microsecond
			go func(cancel context.CancelFunc, after time.Duration) { time.Sleep(after); cancel() }(cancel, after)
			err := db.InTx(ctx, func(tx *store.Tx) error {
				return store.PutSetting(ctx, tx, key, "v", time.Now())
			})
			if check(key, err) {
				kept++
			} else {
				cancelled++
			}
			cancel()

			key = fmt.Sprintf("batch-race-%d", i)
			ctx, cancel = context.WithCancel(context.Background())
			tx, err := db.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.PutSetting(ctx, tx, key, "v", time.Now()); err != nil {
				t.Fatal(err)
			}
			after = time.Duration(rand.IntN(300)) * time.Microsecond
			go func(cancel context.CancelFunc, after time.Duration) { time.Sleep(after); cancel() }(cancel, after)
			time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
			err = tx.Commit()
			if again := tx.Commit(); err == nil && (again == nil || errors.Is(again, context.Canceled)) {
				t.Errorf("%s: a second Commit says %v, want the transaction done", key, again)
			}
			if check(key, err) {
				kept++
			} else {
				cancelled++
			}
			cancel()
		}
		t.Logf("kept %d, cancelled %d", kept, cancelled)
	})
}

// TestCancelKeepsTheCause: an error fn returned after its context ended
// still matches fn's own sentinel and says it was cancelled, once, and a
// conflict met after the cancel is not retried.
func TestCancelKeepsTheCause(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx, cancel := context.WithCancel(context.Background())
		err := db.InTx(ctx, func(tx *store.Tx) error {
			cancel()
			return fmt.Errorf("lookup: %w", store.ErrNotFound)
		})
		if !errors.Is(err, store.ErrNotFound) || !errors.Is(err, context.Canceled) || strings.Count(err.Error(), "context canceled") != 1 {
			t.Errorf("sentinel after a cancel: %v", err)
		}
		ctx, cancel = context.WithCancel(context.Background())
		runs := 0
		err = db.InTx(ctx, func(tx *store.Tx) error {
			runs++
			cancel()
			return errors.New("ERROR: could not serialize access (SQLSTATE 40001)")
		})
		if !errors.Is(err, context.Canceled) || runs != 1 {
			t.Errorf("a conflict after a cancel: %v after %d runs, want cancelled after one", err, runs)
		}
	})
}

// A read snapshot sees neither a row another connection commits during it
// nor takes the write lock: the writer commits while the snapshot is open.
func TestReadSnapshotSeesOneMoment(t *testing.T) {
	storetest.EachTwice(t, func(t *testing.T, a, b *store.DB) {
		ctx := context.Background()
		if err := store.PutSetting(ctx, a, "k", "before", time.Now()); err != nil {
			t.Fatal(err)
		}
		err := a.ReadSnapshot(ctx, func(tx *store.Tx) error {
			v, _, _, err := store.GetSetting(ctx, tx, "k")
			if err != nil || v != "before" {
				return fmt.Errorf("first read %q, %v", v, err)
			}
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := b.InTx(wctx, func(wtx *store.Tx) error { return store.PutSetting(wctx, wtx, "k", "during", time.Now()) }); err != nil {
				return fmt.Errorf("a writer during the snapshot: %w", err)
			}
			if v, _, _, err := store.GetSetting(ctx, tx, "k"); err != nil || v != "before" {
				return fmt.Errorf("second read %q, %v: the snapshot moved", v, err)
			}
			if _, err := tx.ExecContext(ctx, "DELETE FROM kv"); err == nil {
				return fmt.Errorf("a write inside the read snapshot succeeded")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _, _ := store.GetSetting(ctx, a, "k"); v != "during" {
			t.Fatalf("after the snapshot the setting is %q, want the writer's", v)
		}
	})
}

// Agents starting together open one store at once: each migrates it, or
// finds it migrated, and none fails (on PostgreSQL a serializable
// migration's snapshot predated the lock it waited for).
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	storetest.EachOpener(t, func(t *testing.T, open func() (*store.DB, error)) {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				db, err := open()
				if errs[i] = err; err == nil {
					db.Close()
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("open %d: %v", i, err)
			}
		}
		db, err := open()
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		all, _ := store.Migrations()
		var n int
		if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM schema_migrations").Scan(&n); err != nil || n != len(all) {
			t.Fatalf("%d migrations recorded (%v), want %d", n, err, len(all))
		}
	})
}

// The writer subprocess: when DW_STORE_WRITER is set, this test binary
// acts as one of several agent processes hammering the same store.
func TestMain(m *testing.M) {
	if kind := os.Getenv("DW_STORE_WRITER"); kind != "" {
		os.Exit(writer(kind, os.Getenv("DW_STORE_TARGET"), os.Getenv("DW_STORE_ID")))
	}
	os.Exit(m.Run())
}

const writesPerProcess = 150

func writer(kind, target, id string) int {
	ctx := context.Background()
	var db *store.DB
	var err error
	if kind == "sqlite" {
		db, err = store.OpenSQLite(ctx, target)
	} else {
		db, err = store.OpenPostgres(ctx, target)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	for i := 0; i < writesPerProcess; i++ {
		// A read-modify-write in one transaction: a lost update would show
		// as a counter lower than the number of writes.
		err := db.InTx(ctx, func(tx *store.Tx) error {
			v, _, _, err := store.GetSetting(ctx, tx, "counter")
			if err != nil {
				return err
			}
			n, _ := strconv.Atoi(v)
			res, err := tx.ExecContext(ctx, "UPDATE kv SET value = ? WHERE key = 'counter' AND value = ?", strconv.Itoa(n+1), v)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return fmt.Errorf("counter moved under a transaction: isolation is broken")
			}
			return store.PutSetting(ctx, tx, "w-"+id+"-"+strconv.Itoa(i), "x", time.Now())
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "write:", err)
			return 1
		}
	}
	return 0
}

// TestConcurrentProcessesLoseNothing runs several OS processes writing to
// one store at once, as five agents do, and checks every write landed.
func TestConcurrentProcessesLoseNothing(t *testing.T) {
	const procs = 5
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			var target string
			var db *store.DB
			var err error
			if kind == "sqlite" {
				target = filepath.Join(t.TempDir(), "dw.db")
				db, err = store.OpenSQLite(ctx, target)
			} else {
				target = storetest.PostgresSchemaURL(t)
				db, err = store.OpenPostgres(ctx, target)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := store.PutSetting(ctx, db, "counter", "0", time.Now()); err != nil {
				t.Fatal(err)
			}
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, procs)
			for p := 0; p < procs; p++ {
				wg.Add(1)
				go func(p int) {
					defer wg.Done()
					cmd := exec.Command(self, "-test.run=^$")
					cmd.Env = append(os.Environ(), "DW_STORE_WRITER="+kind, "DW_STORE_TARGET="+target, "DW_STORE_ID="+strconv.Itoa(p))
					if out, err := cmd.CombinedOutput(); err != nil {
						errs <- fmt.Errorf("writer %d: %v: %s", p, err, out)
					}
				}(p)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			v, _, _, err := store.GetSetting(ctx, db, "counter")
			if err != nil {
				t.Fatal(err)
			}
			if want := strconv.Itoa(procs * writesPerProcess); v != want {
				t.Errorf("counter = %s, want %s: updates were lost", v, want)
			}
			var rows int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM kv WHERE key LIKE 'w-%'").Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if rows != procs*writesPerProcess {
				t.Errorf("%d rows, want %d", rows, procs*writesPerProcess)
			}
		})
	}
}

// A directory name with the characters SQLite's file: URIs give a meaning
// to ('#', '?', '%') still holds the store: it is created at exactly that
// path, and a second open finds what the first wrote.
func TestSQLitePathWithURICharacters(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "a#b?c%41d")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "dw.db")
	db, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.PutSetting(ctx, db, "probe", "kept", time.Now()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the store is not at %s: %v", path, err)
	}
	db, err = store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, _, ok, err := store.GetSetting(ctx, db, "probe"); err != nil || !ok || v != "kept" {
		t.Fatalf("reopened store: %q %v %v", v, ok, err)
	}
}
