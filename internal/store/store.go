// Package store is the state store every agent shares: metric history, the
// context graph, incidents, the change log, proposals, decisions and receipts.
//
// Five agent processes run at once, so nothing important lives in one
// process's memory: every write goes through this package inside a
// transaction. The same SQL runs on SQLite (the embedded default, one file)
// and PostgreSQL (for a team). Queries are written once with `?`
// bind parameters in the portable subset of SQL both engines accept
// (INSERT … ON CONFLICT … DO UPDATE, RETURNING, conditional UPDATEs instead
// of SELECT … FOR UPDATE) and rebound for PostgreSQL here.
//
// Times are stored as BIGINT Unix milliseconds (see Millis and FromMillis)
// so that ordering and range scans behave the same on both engines.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // registers the "sqlite" database/sql driver
)

// Dialect names the SQL engine behind a DB.
type Dialect string

// The engines a store can run on.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Querier is what a DB and a Tx have in common, so repository code can be
// written once and run inside or outside a transaction.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	Dialect() Dialect
}

// DB is an open store.
type DB struct {
	db      *sql.DB
	dialect Dialect
	// source is the path or the redacted URL, for messages.
	source string
}

// uriPath escapes what SQLite's file: URIs give a meaning to.
var uriPath = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// OpenSQLite opens (creating if needed) the SQLite store at path and applies
// any pending migrations.
//
// WAL lets readers proceed while one process writes; _txlock=immediate takes
// the write lock at BEGIN so two processes never deadlock upgrading a read
// transaction; busy_timeout makes a writer wait for the lock instead of
// failing with SQLITE_BUSY.
func OpenSQLite(ctx context.Context, path string) (*DB, error) {
	// The path is escaped for SQLite's URI form: unescaped, a '#' or '?' in
	// a directory name cuts the path and the store lands somewhere else.
	dsn := "file:" + uriPath.Replace(path) + "?_txlock=immediate" +
		"&_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(ON)"
	sdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open SQLite store %s: %w", path, err)
	}
	// SQLite allows one writer at a time; a small pool keeps readers
	// concurrent without piling up writers waiting on the file lock.
	sdb.SetMaxOpenConns(4)
	db := &DB{db: sdb, dialect: SQLite, source: path}
	if err := db.ping(ctx); err != nil {
		sdb.Close()
		return nil, err
	}
	if err := db.migrate(ctx); err != nil {
		sdb.Close()
		return nil, err
	}
	return db, nil
}

// OpenPostgres opens the PostgreSQL store at url (a libpq URL or key=value
// string) and applies any pending migrations.
func OpenPostgres(ctx context.Context, url string) (*DB, error) {
	sdb, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("open PostgreSQL store %s: %w", Redact(url), err)
	}
	sdb.SetMaxOpenConns(8)
	db := &DB{db: sdb, dialect: Postgres, source: Redact(url)}
	if err := db.ping(ctx); err != nil {
		sdb.Close()
		return nil, err
	}
	if err := db.migrate(ctx); err != nil {
		sdb.Close()
		return nil, err
	}
	return db, nil
}

// ping connects once, retrying while another process holds the file lock.
// SQLite's busy handler does not cover everything a new connection does:
// switching a fresh file to WAL, or reading a WAL index another process is
// still recovering, answers SQLITE_BUSY at once. Agents started together on
// one new DW_HOME meet exactly that, so opening waits as a writer would.
func (db *DB) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	wait := 5 * time.Millisecond
	for {
		err := db.db.PingContext(ctx)
		if err == nil {
			return nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return fmt.Errorf("reach %s store %s: %w", db.dialect, db.source, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("reach %s store %s: %w", db.dialect, db.source, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// Redact hides a password in a connection URL so it can be logged.
func Redact(url string) string {
	at := strings.LastIndex(url, "@")
	scheme := strings.Index(url, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return url
	}
	creds := url[scheme+3 : at]
	if i := strings.Index(creds, ":"); i >= 0 {
		return url[:scheme+3] + creds[:i] + ":***" + url[at:]
	}
	return url
}

// Close closes the store.
func (db *DB) Close() error { return db.db.Close() }

// Dialect reports the engine.
func (db *DB) Dialect() Dialect { return db.dialect }

// Source is the store's path or redacted URL.
func (db *DB) Source() string { return db.source }

// SQL exposes the underlying handle for tests and benchmarks that need it.
func (db *DB) SQL() *sql.DB { return db.db }

// ExecContext runs a statement written with `?` bind parameters.
func (db *DB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return db.db.ExecContext(ctx, rebind(db.dialect, query), args...)
}

// QueryContext runs a query written with `?` bind parameters.
func (db *DB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return db.db.QueryContext(ctx, rebind(db.dialect, query), args...)
}

// QueryRowContext runs a single-row query written with `?` bind parameters.
func (db *DB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return db.db.QueryRowContext(ctx, rebind(db.dialect, query), args...)
}

// Tx is a transaction on the store.
type Tx struct {
	tx      *sql.Tx
	dialect Dialect
	// Set by Begin: ctx is the caller's context and tctx the one the
	// transaction began on; commit decides that ctx may no longer end
	// it, and end releases both (txContext).
	ctx, tctx context.Context
	commit    func() bool
	end       func()
}

// ExecContext runs a statement written with `?` bind parameters.
func (tx *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return tx.tx.ExecContext(ctx, rebind(tx.dialect, query), args...)
}

// QueryContext runs a query written with `?` bind parameters.
func (tx *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return tx.tx.QueryContext(ctx, rebind(tx.dialect, query), args...)
}

// QueryRowContext runs a single-row query written with `?` bind parameters.
func (tx *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return tx.tx.QueryRowContext(ctx, rebind(tx.dialect, query), args...)
}

// PrepareContext prepares a statement written with `?` bind parameters for
// reuse inside the transaction (a writer running the same statement many
// times pays SQLite's parse once).
func (tx *Tx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return tx.tx.PrepareContext(ctx, rebind(tx.dialect, query))
}

// Dialect reports the engine.
func (tx *Tx) Dialect() Dialect { return tx.dialect }

// Begin starts a transaction the caller ends with Commit or Rollback, for
// work committed in batches (a bulk import staged a few thousand rows per
// transaction), which InTx's one transaction per call does not fit. It is
// not retried and runs at the engine's default isolation: use it only for
// rows no other writer touches.
func (db *DB) Begin(ctx context.Context) (*Tx, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	tctx, commit, end := txContext(ctx)
	stx, err := db.db.BeginTx(tctx, nil)
	if err != nil {
		end()
		return nil, beginFailed(ctx, err)
	}
	return &Tx{tx: stx, dialect: db.dialect, ctx: ctx, tctx: tctx, commit: commit, end: end}, nil
}

// Commit commits a transaction from Begin. Once Begin's context has ended
// it commits nothing and says so: an error that is context.Canceled (or
// DeadlineExceeded) means nothing was kept, and nil that all was.
func (tx *Tx) Commit() error {
	defer tx.release()
	if tx.commit != nil {
		ok := tx.commit()
		tx.commit = nil // decided: a second Commit is database/sql's ErrTxDone
		if !ok {
			_ = tx.tx.Rollback()
			return notCommitted(tx.ctx)
		}
		return commitWithin(tx.ctx, tx.tctx, tx.tx.Commit, tx.end)
	}
	return tx.tx.Commit()
}

// Rollback rolls back a transaction from Begin; after Commit it does nothing.
func (tx *Tx) Rollback() error {
	defer tx.release()
	return tx.tx.Rollback()
}

// release ends the context a transaction from Begin began with.
func (tx *Tx) release() {
	if tx.end != nil {
		tx.end()
	}
}

// txContext is the context a writing transaction begins with. Until
// commit is called, it ends when ctx does (database/sql then rolls the
// transaction back, and a statement waiting on a lock gives up). commit
// then reports whether ctx has ended; if it has not, ctx no longer ends
// the returned context, so the COMMIT is not cut off the moment the
// caller gives up: a COMMIT that PostgreSQL received and applied but
// whose answer was abandoned would leave the caller told "cancelled"
// about a write that was kept (a review found 28 of 150 such races on
// PostgreSQL). commitWithin bounds that COMMIT instead. end releases
// both contexts on every path; every transaction calls it once over.
func txContext(ctx context.Context) (tctx context.Context, commit func() bool, end func()) {
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	return tctx, stop, func() { stop(); cancel() }
}

// commitGrace is how long a COMMIT already sent may still take once the
// caller's context has ended: a healthy store answers in milliseconds,
// and a COMMIT waiting on a stalled network, a lock or a synchronous
// standby that is down would otherwise hold the caller past its deadline
// for as long as the server or TCP takes to give up.
var commitGrace = 5 * time.Second

// ErrCommitUnknown is a COMMIT that was sent and not answered within
// commitGrace after the caller's context ended: the store may or may not
// have kept the transaction. It is not context.Canceled, which always
// means nothing was kept.
var ErrCommitUnknown = errors.New("commit outcome unknown")

// commitWithin runs commit, a COMMIT decided on (ctx had not ended), cut
// off by end only when ctx ends and commitGrace passes with no answer.
func commitWithin(ctx, tctx context.Context, commit func() error, end func()) error {
	late := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(commitGrace, end)
		<-tctx.Done() // ended by the timer, or by end after the COMMIT
		t.Stop()
	})
	err := commit()
	late()
	switch {
	case err == nil:
		return nil
	case tctx.Err() != nil:
		return fmt.Errorf("commit: %w: no answer within %s of the caller giving up (%v)", ErrCommitUnknown, commitGrace, err)
	}
	return fmt.Errorf("commit: %w", err)
}

// beginFailed is the error of a BEGIN that failed: ctx's own error when
// ctx ended meanwhile (the begin ran on txContext's context, whose end
// says only "canceled", while a caller may be told of its deadline).
func beginFailed(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("begin transaction: %w", cerr)
	}
	return fmt.Errorf("begin transaction: %w", err)
}

// notCommitted is the error of a transaction rolled back because ctx
// ended before its commit.
func notCommitted(ctx context.Context) error {
	return fmt.Errorf("not committed: %w", ctx.Err())
}

// ReadSnapshot runs fn in a read-only transaction that sees the store as
// of one moment, for reads that must agree with each other while other
// processes write (a count and the rows it counted): REPEATABLE READ on
// PostgreSQL, where ids are handed out at insert and committed in any
// order; a deferred transaction on SQLite, whose snapshot in WAL mode is
// taken at its first read and which, unlike InTx's immediate ones, holds
// no write lock.
func (db *DB) ReadSnapshot(ctx context.Context, fn func(tx *Tx) error) error {
	opts := &sql.TxOptions{ReadOnly: true}
	if db.dialect == Postgres {
		opts.Isolation = sql.LevelRepeatableRead
	}
	stx, err := db.db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin read transaction: %w", err)
	}
	// Read only: nothing to commit, and a refused write has ended a
	// PostgreSQL transaction, which then could not commit.
	defer stx.Rollback()
	return fn(&Tx{tx: stx, dialect: db.dialect})
}

// InTx runs fn in a serializable transaction, committing when it returns
// nil and rolling back otherwise. Several agent processes write at once, and
// a read-modify-write under PostgreSQL's default READ COMMITTED would lose
// updates, so PostgreSQL transactions run SERIALIZABLE; SQLite's immediate
// transactions already are. A transaction that loses a race (serialization
// failure, deadlock, busy file) is retried with jittered backoff, so fn
// must be safe to run again.
func (db *DB) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	var opts *sql.TxOptions
	if db.dialect == Postgres {
		opts = &sql.TxOptions{Isolation: sql.LevelSerializable}
	}
	return db.inTx(ctx, opts, fn)
}

// inTx is InTx at the isolation opts asks for.
func (db *DB) inTx(ctx context.Context, opts *sql.TxOptions, fn func(tx *Tx) error) error {
	var err error
	for attempt := 0; attempt < 30; attempt++ {
		if attempt > 0 {
			slog.Debug("store: retrying transaction", "attempt", attempt, "err", err)
			backoff := time.Duration(min(attempt, 10)) * 5 * time.Millisecond
			backoff += time.Duration(rand.Int64N(int64(backoff)))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff):
			}
		}
		err = db.runTx(ctx, opts, fn)
		if err == nil || !retryable(err) {
			return err
		}
	}
	return err
}

func (db *DB) runTx(ctx context.Context, opts *sql.TxOptions, fn func(tx *Tx) error) (err error) {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	tctx, commit, end := txContext(ctx)
	defer end()
	stx, err := db.db.BeginTx(tctx, opts)
	if err != nil {
		return beginFailed(ctx, err)
	}
	defer func() {
		if p := recover(); p != nil {
			_ = stx.Rollback()
			panic(p)
		}
	}()
	if err := fn(&Tx{tx: stx, dialect: db.dialect}); err != nil {
		_ = stx.Rollback()
		return becauseDone(ctx, err)
	}
	if !commit() {
		_ = stx.Rollback()
		return notCommitted(ctx)
	}
	return commitWithin(ctx, tctx, stx.Commit, end)
}

// becauseDone makes an error that a cancelled or expired ctx caused say
// so: a driver interrupted mid-statement may report only an interruption,
// or, once database/sql has rolled the transaction back on its own
// goroutine, "transaction has already been committed or rolled back", and
// a caller checking errors.Is(err, context.Canceled) would not learn that
// it was stopped rather than failed.
func becauseDone(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", err, cerr)
	}
	return err
}

// retryable reports whether err is a transient conflict between writers.
func retryable(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	for _, s := range []string{"SQLSTATE 40001", "SQLSTATE 40P01", "SQLITE_BUSY", "database is locked"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// ErrNotFound is returned by repository lookups that find no row.
var ErrNotFound = errors.New("not found")

// rebind turns `?` bind parameters into PostgreSQL's `$n`. Question marks
// inside single-quoted literals are left alone.
func rebind(d Dialect, q string) string {
	if d != Postgres || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n, inQuote := 0, false
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'':
			inQuote = !inQuote
			b.WriteByte(c)
		case c == '?' && !inQuote:
			n++
			fmt.Fprintf(&b, "$%d", n)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Millis converts a time to the stored representation.
func Millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// FromMillis converts a stored time back; 0 is the zero time.
func FromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// NullMillis converts an optional stored time.
func NullMillis(ms sql.NullInt64) time.Time {
	if !ms.Valid {
		return time.Time{}
	}
	return FromMillis(ms.Int64)
}
