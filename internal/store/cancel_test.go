package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// foreignCtx hides its context from package context, as a context type of
// another package does, so context.AfterFunc has to watch it with a
// goroutine of its own: a watcher left behind shows as a goroutine.
type foreignCtx struct{ context.Context }

func (foreignCtx) Value(any) any { return nil }

// goroutinesSettled is the number of goroutines once the ones ending have
// ended.
func goroutinesSettled() int {
	for i := 0; i < 50; i++ {
		runtime.Gosched()
		time.Sleep(2 * time.Millisecond)
	}
	return runtime.NumGoroutine()
}

// TestNothingLeftPerTransaction: every way through InTx and Begin, many
// times over one long-lived context (an agent's own), leaves nothing
// watching that context: a review found a watcher left by every
// transaction that failed or was rolled back, held until the context
// ended.
func TestNothingLeftPerTransaction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		closed := storetest.SQLite(t)
		closed.Close()
		errFn := errors.New("fn says no")
		paths := []struct {
			name string
			run  func(ctx context.Context)
		}{
			{"InTx kept", func(ctx context.Context) {
				_ = db.InTx(ctx, func(tx *store.Tx) error { return store.PutSetting(ctx, tx, "k", "v", time.Now()) })
			}},
			{"InTx fn error", func(ctx context.Context) { _ = db.InTx(ctx, func(tx *store.Tx) error { return errFn }) }},
			{"InTx fn panic", func(ctx context.Context) {
				defer func() { _ = recover() }()
				_ = db.InTx(ctx, func(tx *store.Tx) error { panic("boom") })
			}},
			{"InTx begin error", func(ctx context.Context) { _ = closed.InTx(ctx, func(tx *store.Tx) error { return nil }) }},
			{"InTx commit error", func(ctx context.Context) {
				// A statement error fn ignores: PostgreSQL refuses the COMMIT.
				_ = db.InTx(ctx, func(tx *store.Tx) error {
					_, _ = tx.ExecContext(ctx, "SELECT * FROM no_such_table")
					return nil
				})
			}},
			{"Begin, Commit", func(ctx context.Context) {
				if tx, err := db.Begin(ctx); err == nil {
					_ = tx.Commit()
				}
			}},
			{"Begin, Commit twice", func(ctx context.Context) {
				if tx, err := db.Begin(ctx); err == nil {
					_ = tx.Commit()
					_ = tx.Commit()
				}
			}},
			{"Begin, Rollback", func(ctx context.Context) {
				if tx, err := db.Begin(ctx); err == nil {
					_ = tx.Rollback()
				}
			}},
			{"Begin, Rollback, Commit", func(ctx context.Context) {
				if tx, err := db.Begin(ctx); err == nil {
					_ = tx.Rollback()
					_ = tx.Commit()
				}
			}},
			{"Begin error", func(ctx context.Context) { _, _ = closed.Begin(ctx) }},
		}
		for _, p := range paths {
			ctx, cancel := context.WithCancel(context.Background())
			before := goroutinesSettled()
			for i := 0; i < 200; i++ {
				p.run(foreignCtx{ctx})
			}
			if left := goroutinesSettled() - before; left > 10 {
				t.Errorf("%s ×200: %d goroutines still watching the caller's context", p.name, left)
			}
			cancel()
			goroutinesSettled()
		}
	})
}

// TestEndedContextBeginsNothing: a context that has already ended begins
// no transaction: fn never runs, no BEGIN is sent, no connection spent.
func TestEndedContextBeginsNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		runs := 0
		for i := 0; i < 100; i++ {
			if err := db.InTx(ctx, func(tx *store.Tx) error { runs++; return nil }); !errors.Is(err, context.Canceled) {
				t.Fatalf("InTx: %v", err)
			}
			if tx, err := db.Begin(ctx); !errors.Is(err, context.Canceled) {
				if tx != nil {
					tx.Rollback()
				}
				t.Fatalf("Begin: %v", err)
			}
		}
		if runs > 0 {
			t.Errorf("with its context already cancelled, fn ran %d of 100 times", runs)
		}
	})
}

// TestDeadlineWhileWaitingToBegin: a write whose deadline passes while it
// waits to begin (for the pool's one connection; on SQLite, for the write
// lock another process holds) gives up at its deadline and says
// DeadlineExceeded, not Canceled (routines tell a timeout by it).
func TestDeadlineWhileWaitingToBegin(t *testing.T) {
	storetest.EachTwice(t, func(t *testing.T, a, b *store.DB) {
		a.SQL().SetMaxOpenConns(1)
		hold, err := a.Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer hold.Rollback()
		for _, db := range []*store.DB{a, b} {
			if db == b && db.Dialect() == store.Postgres {
				continue // b waits for nothing on PostgreSQL
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			start := time.Now()
			err := db.InTx(ctx, func(tx *store.Tx) error { return nil })
			took := time.Since(start)
			tx, berr := db.Begin(ctx)
			cancel()
			if tx != nil {
				tx.Rollback()
			}
			if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(berr, context.DeadlineExceeded) || took > 3*time.Second {
				t.Errorf("waiting to begin past a 200ms deadline: InTx %v after %v; Begin %v", err, took.Round(time.Millisecond), berr)
			}
		}
	})
}

// TestCancelEndsTheWaitForTheWriteLock: SQLite's BEGIN IMMEDIATE waiting
// for the write lock another connection holds (busy_timeout 30 s) ends
// when the caller cancels.
func TestCancelEndsTheWaitForTheWriteLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dw.db")
	a, err := store.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := store.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	hold, err := a.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	err = b.InTx(ctx, func(tx *store.Tx) error { return nil })
	if took := time.Since(start); !errors.Is(err, context.Canceled) || took > 3*time.Second {
		t.Errorf("InTx waiting for the write lock, cancelled at 200ms: %v after %v", err, took)
	}
}

// TestCommitBoundedPastTheDeadline: on PostgreSQL a COMMIT can wait (here
// a deferred unique check waits for another transaction that inserted the
// same key). Once the caller's deadline passes, the COMMIT gets
// commitGrace more, then the call returns ErrCommitUnknown: not
// DeadlineExceeded, which would claim nothing was kept.
func TestCommitBoundedPastTheDeadline(t *testing.T) {
	db := storetest.Postgres(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE commit_waits (k INT UNIQUE DEFERRABLE INITIALLY DEFERRED)"); err != nil {
		t.Fatal(err)
	}
	conn, err := db.SQL().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	other, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	if _, err := other.ExecContext(ctx, "INSERT INTO commit_waits VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	defer store.SetCommitGrace(300 * time.Millisecond)()
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- db.InTx(tctx, func(tx *store.Tx) error {
			_, err := tx.ExecContext(tctx, "INSERT INTO commit_waits VALUES (1)")
			return err
		})
	}()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		other.Rollback() // let it finish, so the test ends
		t.Fatalf("a write with a 300ms deadline is still in its COMMIT after 10s; then %v", <-done)
	}
	took := time.Since(start)
	if !errors.Is(err, store.ErrCommitUnknown) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("a COMMIT still waiting past deadline and grace: %v; want ErrCommitUnknown and not a context error", err)
	}
	if took < 500*time.Millisecond || took > 5*time.Second {
		t.Errorf("returned after %v; want about the 300ms deadline plus the 300ms grace", took.Round(time.Millisecond))
	}
}
