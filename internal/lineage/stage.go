package lineage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// A bulk import (a whole dbt project: 100k assets, 300k edges) written in
// one transaction grows SQLite's write-ahead log by every page it touches
// (about 120 MB for that project), since no page of an open transaction can
// be checkpointed. WriteBulk stages it instead: the graph is copied into
// staging tables and the import applied there, both committed every
// stageBatchRows rows, so the log is checkpointed between batches and
// stays the size of one batch; one short transaction then swaps the
// staging tables in for the live ones (drop, rename) and bumps the graph
// version. Readers see the old graph until the swap and the new one after,
// never half an import; a crash or cancel before the swap leaves the live
// tables untouched, and the next bulk import drops the leftover staging
// tables. One bulk import runs at a time per store (a file lock beside a
// SQLite store, an advisory lock on PostgreSQL); a write by anyone else
// during the staging moves the graph version, and the import is staged
// again from the new graph. A bulk import into a graph that already holds
// most of it (a re-import) is first tried in place (inplace.go).

// stageMinRows is the input size (assets plus edges) from which a write is
// staged; below it one transaction's log is small and the copy would cost
// more than it saves.
const stageMinRows = 20_000

// stageBatchRows is rows (assets, names, edges) per committed batch: the
// log's size is about that many rows' pages (a few MiB).
const stageBatchRows = 10_000

// stagedTable is a live lineage table, its staging twin and its key (for
// copying in batches).
type stagedTable struct {
	live, stage string
	key         []string
}

var stagedTables = []stagedTable{
	{"lineage_assets", "lineage_stage_assets", []string{"seq"}},
	{"lineage_aliases", "lineage_stage_aliases", []string{"alias"}},
	{"lineage_edges", "lineage_stage_edges", []string{"from_seq", "to_seq"}},
	{"lineage_edge_columns", "lineage_stage_edge_columns", []string{"from_seq", "to_seq", "from_col", "to_col", "source"}},
}

// stageTables rewrites a Writer's statement to the staging tables. No
// live name is a prefix of another, and index names never appear in the
// Writer's statements.
var stageTables = func() *strings.Replacer {
	var pairs []string
	for _, t := range stagedTables {
		pairs = append(pairs, t.live, t.stage)
	}
	return strings.NewReplacer(pairs...)
}()

// stager is a staged import's state inside its Writer.
type stager struct {
	db   *store.DB
	rows int // rows since the last commit
}

// errGraphMoved: another writer changed the graph while the import was
// staged, so the staged copy is stale.
var errGraphMoved = errors.New("the lineage graph changed while the import was staged")

// BulkOptions adjust a bulk write.
type BulkOptions struct {
	// InSwap, when set, is work that belongs with the graph write: it runs
	// inside the transaction that makes the write visible (a small
	// write's one transaction, an import in place's, or a staged import's
	// swap), after the graph is written, so its error rolls the write back
	// and readers see both or neither. It writes only through tx, and may
	// run more than once (a transaction retried, an import in place that
	// gives way to staging, a staged import staged again after another
	// writer moved the graph).
	InSwap func(tx *store.Tx) error
}

// WriteBulk is Write for an input of about rows assets and edges. Small
// inputs are one transaction (Write); large ones are staged (see above),
// so fn may run more than once and must use only the Writer's methods
// (UpsertAssets, UpsertAsset, Link, LinkLater), which name the tables the
// staging rewrites.
func (g *Graph) WriteBulk(ctx context.Context, rows int, fn func(w *Writer) error, opts BulkOptions) (ImportStats, error) {
	if rows < stageMinRows {
		return g.write(ctx, fn, opts.InSwap, nil)
	}
	unlock, err := lockStage(ctx, g.db)
	if err != nil {
		return ImportStats{}, err
	}
	defer unlock()
	if try, err := g.worthInPlace(ctx, rows); err != nil {
		return ImportStats{}, err
	} else if try {
		stats, err := g.writeInPlace(ctx, fn, opts.InSwap, stageBatchRows)
		if !errors.Is(err, errInPlaceFull) {
			return stats, err
		}
		slog.Info("lineage: the import changes more than a batch of rows; staging it", "rows", rows)
	}
	for attempt := 1; ; attempt++ {
		stats, err := g.writeStaged(ctx, fn, opts.InSwap)
		if err != nil {
			// Best effort: the next bulk import drops leftovers anyway.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			if derr := g.db.InTx(cctx, func(tx *store.Tx) error { return dropStage(cctx, tx) }); derr != nil {
				slog.Warn("lineage: dropping the staging tables of a failed import", "err", derr)
			}
			cancel()
		}
		if !errors.Is(err, errGraphMoved) || attempt == 3 {
			return stats, err
		}
		slog.Info("lineage: the graph changed during a staged import; staging it again", "attempt", attempt)
	}
}

func (g *Graph) writeStaged(ctx context.Context, fn func(w *Writer) error, inSwap func(tx *store.Tx) error) (ImportStats, error) {
	base, err := g.prepareStage(ctx)
	if err != nil {
		return ImportStats{}, err
	}
	w := &Writer{ctx: ctx, now: store.Millis(g.clock.Now()), stage: &stager{db: g.db}}
	// The swap replaces the graph whole: every holder loads it again.
	w.touchAll()
	if w.tx, err = g.db.Begin(ctx); err != nil {
		return ImportStats{}, err
	}
	defer func() {
		w.close()
		if w.tx != nil {
			_ = w.tx.Rollback()
		}
	}()
	if err := fn(w); err != nil {
		return ImportStats{}, err
	}
	if err := w.flushEdges(); err != nil {
		return ImportStats{}, err
	}
	w.close()
	err = w.tx.Commit()
	w.tx = nil
	if err != nil {
		return ImportStats{}, fmt.Errorf("commit staged import: %w", err)
	}
	err = g.db.InTx(ctx, func(tx *store.Tx) error {
		if err := publishStage(ctx, tx, base, w); err != nil {
			return err
		}
		if inSwap != nil {
			return inSwap(tx)
		}
		return nil
	})
	if err != nil {
		return ImportStats{}, err
	}
	w.stats.Unchanged = !w.changed
	return w.stats, nil
}

// batched counts rows a staged import wrote and commits once a batch is
// full, so the write-ahead log can be checkpointed; outside a staged
// import it does nothing (an import in place counts the rows its
// statements write: Writer.count).
func (w *Writer) batched(rows int) error {
	if w.stage == nil {
		return nil
	}
	w.stage.rows += rows
	if w.stage.rows < stageBatchRows {
		return nil
	}
	w.stage.rows = 0
	w.close()
	err := w.tx.Commit()
	w.tx = nil
	if err != nil {
		return fmt.Errorf("commit staged batch: %w", err)
	}
	w.tx, err = w.stage.db.Begin(w.ctx)
	return err
}

// dropStage drops the staging tables (of this import, or left by one that
// crashed).
func dropStage(ctx context.Context, tx *store.Tx) error {
	for _, t := range stagedTables {
		if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+t.stage); err != nil {
			return fmt.Errorf("drop staging table %s: %w", t.stage, err)
		}
	}
	return nil
}

// prepareStage creates the staging tables as the live ones are (columns,
// keys, indexes) and copies the live graph into them in batches. It
// returns the graph version the copy started from.
func (g *Graph) prepareStage(ctx context.Context) (int64, error) {
	var base int64
	err := g.db.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT version FROM lineage_version WHERE id = 1").Scan(&base); err != nil {
			return fmt.Errorf("read graph version: %w", err)
		}
		if err := dropStage(ctx, tx); err != nil {
			return err
		}
		for _, t := range stagedTables {
			if err := createStage(ctx, tx, t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, t := range stagedTables {
		if err := copyStage(ctx, g.db, t); err != nil {
			return 0, err
		}
	}
	// Asset seqs are never reused (names in other stores' answers and
	// held indexes point at them): the staging table continues the live
	// table's counter.
	err = g.db.InTx(ctx, func(tx *store.Tx) error {
		if tx.Dialect() == store.Postgres {
			_, err := tx.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence('lineage_stage_assets', 'seq'),
				GREATEST(COALESCE(pg_sequence_last_value(pg_get_serial_sequence('lineage_assets', 'seq')::regclass), 0),
					(SELECT COALESCE(MAX(seq), 0) FROM lineage_stage_assets)) + 1, false)`)
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM sqlite_sequence WHERE name = 'lineage_stage_assets'"); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO sqlite_sequence (name, seq) SELECT 'lineage_stage_assets', seq FROM sqlite_sequence WHERE name = 'lineage_assets'")
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("continue the asset counter in staging: %w", err)
	}
	return base, nil
}

// Compiled on first use, not at every agent's start (see warehouse.identRE).
var (
	sqliteCreateTable = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^CREATE TABLE\s+("?)(\w+)("?)\s*\(`) })
	sqliteCreateIndex = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^CREATE (UNIQUE )?INDEX\s+"?(\w+)"?\s+ON\s+"?(\w+)"?\s*\(`)
	})
	pgIndexDef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(CREATE (?:UNIQUE )?INDEX) \S+ ON \S+ (.*)$`) })
)

// createStage creates t's staging table. PostgreSQL copies the definition
// (LIKE … INCLUDING ALL); SQLite's is the live table's own CREATE
// statements with the names changed. SQLite cannot rename an index, so a
// staging index takes the live name with "__b" added, or removed when the
// live one has it: after the swap the names alternate between the two.
func createStage(ctx context.Context, tx *store.Tx, t stagedTable) error {
	if tx.Dialect() == store.Postgres {
		_, err := tx.ExecContext(ctx, "CREATE TABLE "+t.stage+" (LIKE "+t.live+" INCLUDING ALL)")
		if err != nil {
			return fmt.Errorf("create staging table %s: %w", t.stage, err)
		}
		return nil
	}
	rows, err := tx.QueryContext(ctx, "SELECT type, sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL ORDER BY type DESC", t.live)
	if err != nil {
		return fmt.Errorf("read %s's definition: %w", t.live, err)
	}
	var ddl []string
	for rows.Next() {
		var typ, def string
		if err := rows.Scan(&typ, &def); err != nil {
			rows.Close()
			return err
		}
		switch typ {
		case "table":
			if !sqliteCreateTable().MatchString(def) {
				rows.Close()
				return fmt.Errorf("unexpected definition of %s: %.60s", t.live, def)
			}
			ddl = append(ddl, sqliteCreateTable().ReplaceAllString(def, "CREATE TABLE "+t.stage+" ("))
		case "index":
			m := sqliteCreateIndex().FindStringSubmatch(def)
			if m == nil {
				rows.Close()
				return fmt.Errorf("unexpected index on %s: %.60s", t.live, def)
			}
			name := m[2] + "__b"
			if n, ok := strings.CutSuffix(m[2], "__b"); ok {
				name = n
			}
			ddl = append(ddl, sqliteCreateIndex().ReplaceAllString(def, "CREATE "+m[1]+"INDEX "+name+" ON "+t.stage+" ("))
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return err
	}
	if len(ddl) == 0 || !strings.HasPrefix(ddl[0], "CREATE TABLE") {
		return fmt.Errorf("no definition of %s found", t.live)
	}
	for _, q := range ddl {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create staging table %s: %w", t.stage, err)
		}
	}
	return nil
}

// copyStage copies the live table into its staging twin stageBatchRows at
// a time, by key range, each batch its own transaction.
func copyStage(ctx context.Context, db *store.DB, t stagedTable) error {
	keys := strings.Join(t.key, ", ")
	tuple := "(" + keys + ")"
	params := "(" + bindVars(len(t.key)) + ")"
	var last []any
	for {
		var bound []any
		err := db.InTx(ctx, func(tx *store.Tx) error {
			q := "SELECT " + keys + " FROM " + t.live
			if last != nil {
				q += " WHERE " + tuple + " > " + params
			}
			q += fmt.Sprintf(" ORDER BY %s LIMIT 1 OFFSET %d", keys, stageBatchRows-1)
			dest := make([]any, len(t.key))
			ptrs := make([]any, len(t.key))
			for i := range dest {
				ptrs[i] = &dest[i]
			}
			bound = nil
			switch err := tx.QueryRowContext(ctx, q, last...).Scan(ptrs...); {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return err
			default:
				bound = dest
			}
			ins := "INSERT INTO " + t.stage + " SELECT * FROM " + t.live
			var where []string
			var args []any
			if last != nil {
				where = append(where, tuple+" > "+params)
				args = append(args, last...)
			}
			if bound != nil {
				where = append(where, tuple+" <= "+params)
				args = append(args, bound...)
			}
			if len(where) > 0 {
				ins += " WHERE " + strings.Join(where, " AND ")
			}
			_, err := tx.ExecContext(ctx, ins, args...)
			return err
		})
		if err != nil {
			return fmt.Errorf("copy %s into staging: %w", t.live, err)
		}
		if bound == nil {
			return nil
		}
		last = bound
	}
}

// publishStage swaps the staging tables in, if the graph is still the one
// the copy started from, and moves the graph's versions (and the index
// log's floor) when the import changed anything.
func publishStage(ctx context.Context, tx *store.Tx, base int64, w *Writer) error {
	pg := tx.Dialect() == store.Postgres
	var liveIdx map[string]map[string]string // table -> definition -> index name
	var liveSeq string
	if pg {
		// Writers hold these tables' locks until they commit, so once we
		// hold them the version read next is final.
		var names []string
		for _, t := range stagedTables {
			names = append(names, t.live)
		}
		if _, err := tx.ExecContext(ctx, "LOCK TABLE "+strings.Join(names, ", ")+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			return fmt.Errorf("lock the lineage tables: %w", err)
		}
		liveIdx = map[string]map[string]string{}
		for _, t := range stagedTables {
			idx, err := pgIndexes(ctx, tx, t.live)
			if err != nil {
				return err
			}
			liveIdx[t.live] = idx
		}
		if err := tx.QueryRowContext(ctx, "SELECT pg_get_serial_sequence('lineage_assets', 'seq')").Scan(&liveSeq); err != nil {
			return fmt.Errorf("read the asset counter: %w", err)
		}
	}
	var v int64
	if err := tx.QueryRowContext(ctx, "SELECT version FROM lineage_version WHERE id = 1").Scan(&v); err != nil {
		return fmt.Errorf("read graph version: %w", err)
	}
	if v != base {
		return errGraphMoved
	}
	for _, t := range stagedTables {
		var stageIdx map[string]string
		if pg {
			var err error
			if stageIdx, err = pgIndexes(ctx, tx, t.stage); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, "DROP TABLE "+t.live); err != nil {
			return fmt.Errorf("publish import: drop %s: %w", t.live, err)
		}
		if _, err := tx.ExecContext(ctx, "ALTER TABLE "+t.stage+" RENAME TO "+t.live); err != nil {
			return fmt.Errorf("publish import: rename %s: %w", t.stage, err)
		}
		// PostgreSQL's indexes and the asset counter take back the live
		// names, so every import leaves the schema as the migrations made it.
		for def, name := range stageIdx {
			if want, ok := liveIdx[t.live][def]; ok && want != name {
				if _, err := tx.ExecContext(ctx, `ALTER INDEX "`+name+`" RENAME TO "`+want+`"`); err != nil {
					return fmt.Errorf("publish import: rename index %s: %w", name, err)
				}
			}
		}
	}
	if pg {
		var seq string
		if err := tx.QueryRowContext(ctx, "SELECT pg_get_serial_sequence('lineage_assets', 'seq')").Scan(&seq); err != nil {
			return fmt.Errorf("read the asset counter: %w", err)
		}
		if seq != liveSeq {
			_, bare, _ := strings.Cut(liveSeq, ".")
			if bare == "" {
				bare = liveSeq
			}
			if _, err := tx.ExecContext(ctx, "ALTER SEQUENCE "+seq+" RENAME TO "+bare); err != nil {
				return fmt.Errorf("publish import: rename the asset counter: %w", err)
			}
		}
	}
	return w.publish(ctx, tx)
}

// pgIndexes maps a table's index definitions, names and table left out,
// to the index names.
func pgIndexes(ctx context.Context, tx *store.Tx, table string) (map[string]string, error) {
	rows, err := tx.QueryContext(ctx, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ?", table)
	if err != nil {
		return nil, fmt.Errorf("read %s's indexes: %w", table, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			return nil, err
		}
		if m := pgIndexDef().FindStringSubmatch(def); m != nil {
			out[m[1]+" "+m[2]] = name
		}
	}
	return out, rows.Err()
}

// lockStage makes bulk imports into one store take turns: the staging
// tables are one set. A lock a process holds goes with it when it dies,
// so a crashed import never blocks the next.
func lockStage(ctx context.Context, db *store.DB) (func(), error) {
	if db.Dialect() == store.Postgres {
		conn, err := db.SQL().Conn(ctx)
		if err != nil {
			return nil, fmt.Errorf("lock the staging tables: %w", err)
		}
		h := fnv.New64a()
		h.Write([]byte("dw lineage staging"))
		// Keyed by schema too: stores in different schemas of one database
		// stage separately.
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(hashtext(current_schema()), $1)", int32(h.Sum64())); err != nil {
			conn.Close()
			return nil, fmt.Errorf("lock the staging tables: %w", err)
		}
		return func() {
			_, _ = conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock(hashtext(current_schema()), $1)", int32(h.Sum64()))
			conn.Close()
		}, nil
	}
	f, err := os.OpenFile(db.Source()+".import-lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the staging tables: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock the staging tables: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
