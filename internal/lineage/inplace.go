package lineage

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/dataworkers/dw/internal/store"
)

// A scheduled dbt run imports the same project every day into the catalog
// it made. Staged (stage.go), that re-import copied the whole graph into
// staging tables, moved every asset's and edge's last-seen time there and
// swapped the copy in: every page of the graph written twice, and every
// holder of the traversal index reloading it whole, for an import that
// changed a few rows. Written in place instead, the import is one
// transaction on the live tables that writes only what changed, so the
// write-ahead log holds only those rows and holders catch up from the
// index log; the last-seen times of what it merely restated are moved
// after the commit, in committed batches, so the log stays a batch long.
// Every row a statement of the import writes is counted (Writer.count); an
// import that turns out to write more than a batch of rows (a new project,
// a changed one, many merges) is rolled back and staged: its one
// transaction would grow the log by all of them. Readers see the import's
// changes at its commit and the restated rows' times move batch by batch
// after it; an import cut off in between leaves some of those times
// earlier than the import (the next one moves them).

// inPlace is a bulk import written in place: what it has written, and the
// restated rows whose last-seen times move after the commit.
type inPlace struct {
	now    int64
	max    int // rows it may write before it gives way to staging
	rows   int // rows written (inserted or changed), not merely restated
	full   bool
	assets []int64
	edges  []pair
}

// errInPlaceFull: the import writes more than a batch of rows; it is
// staged instead.
var errInPlaceFull = errors.New("the import writes more than a batch of rows in place")

// wrote counts rows the import wrote, failing once they pass a batch.
func (p *inPlace) wrote(rows int) error {
	p.rows += rows
	if p.rows > p.max {
		p.full = true
		return errInPlaceFull
	}
	return nil
}

// worthInPlace reports whether a bulk input of rows assets and edges may
// restate the graph rather than add to it: the live graph holds at least
// half as many rows. Into a smaller graph most rows are new, and the
// attempt in place would be rolled back after a batch. (A new project
// into a large catalog of others is tried in place too, and costs a
// batch's writes, rolled back, before it is staged.)
func (g *Graph) worthInPlace(ctx context.Context, rows int) (bool, error) {
	var live int
	err := g.db.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM lineage_assets) + (SELECT COUNT(*) FROM lineage_edges)").Scan(&live)
	if err != nil {
		return false, fmt.Errorf("count the lineage graph: %w", err)
	}
	return 2*live >= rows, nil
}

// writeInPlace writes a bulk import in one transaction on the live tables,
// then moves the restated rows' last-seen times. It returns errInPlaceFull,
// having changed nothing (the transaction rolled back, whatever fn made of
// the error), when the import writes more than max rows.
func (g *Graph) writeInPlace(ctx context.Context, fn func(w *Writer) error, inSwap func(tx *store.Tx) error, max int) (ImportStats, error) {
	place := inPlace{max: max}
	stats, err := g.write(ctx, fn, inSwap, &place)
	if place.full {
		// Whatever fn made of the error (wrapped, or in its own words),
		// the transaction is rolled back.
		return ImportStats{}, errInPlaceFull
	}
	if err != nil {
		return stats, err
	}
	// The import is committed: the times follow even if the caller gives
	// up now, and a failure to move them is a warning, not a failed
	// import (its changes are in).
	if err := g.moveLastSeen(context.WithoutCancel(ctx), &place); err != nil {
		slog.Warn("lineage: moving the last-seen times of a re-import", "err", err)
		stats.AddWarnings(fmt.Sprintf("the import is written, but the last-seen times of some of the %d assets and %d edges it restated were not moved (%v); the next import moves them",
			len(place.assets), len(place.edges), err))
	}
	return stats, nil
}

// moveDeferredEdgesOf moves, inside an import in place's transaction, the
// times it deferred of the edges of seqs, about to be merged: a merge
// re-points edges with their stored times, so a restated edge of a
// dropped asset would otherwise carry its old time to the kept one.
func (w *Writer) moveDeferredEdgesOf(seqs []int64) error {
	if w.place == nil || len(w.place.edges) == 0 {
		return nil
	}
	var move []pair
	kept := w.place.edges[:0]
	for _, e := range w.place.edges {
		if slices.Contains(seqs, e.from) || slices.Contains(seqs, e.to) {
			move = append(move, e)
		} else {
			kept = append(kept, e)
		}
	}
	w.place.edges = kept
	for start := 0; start < len(move); start += edgeRows {
		chunk := move[start:min(start+edgeRows, len(move))]
		args := make([]any, 0, 2+2*len(chunk))
		args = append(args, w.now, w.now)
		for _, e := range chunk {
			args = append(args, e.from, e.to)
		}
		if _, err := w.execOnce("UPDATE lineage_edges SET last_seen_ms = ? WHERE last_seen_ms < ? AND (from_seq, to_seq) IN (VALUES "+pairVars(len(chunk))+")", args...); err != nil {
			return fmt.Errorf("update edges: %w", err)
		}
	}
	return nil
}

// moveLastSeen moves the last-seen times of the assets and edges an import
// in place restated, sorted so each statement touches neighbouring pages,
// in transactions of a batch of rows each. A time another writer moved
// further since stays.
func (g *Graph) moveLastSeen(ctx context.Context, p *inPlace) error {
	slices.Sort(p.assets)
	slices.SortFunc(p.edges, func(a, b pair) int {
		return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to))
	})
	assets := func(n int) string {
		return "UPDATE lineage_assets SET last_seen_ms = ? WHERE last_seen_ms < ? AND seq IN (" + bindVars(n) + ")"
	}
	err := moveBatches(ctx, g.db, p.now, p.assets, 500, assets, func(args []any, s int64) []any { return append(args, s) })
	if err != nil {
		return fmt.Errorf("update assets: %w", err)
	}
	edges := func(n int) string {
		return "UPDATE lineage_edges SET last_seen_ms = ? WHERE last_seen_ms < ? AND (from_seq, to_seq) IN (VALUES " + pairVars(n) + ")"
	}
	err = moveBatches(ctx, g.db, p.now, p.edges, edgeRows, edges, func(args []any, e pair) []any { return append(args, e.from, e.to) })
	if err != nil {
		return fmt.Errorf("update edges: %w", err)
	}
	return nil
}

// moveBatches runs query(n) (its first two parameters the time, then n
// keys' parameters from bind) for every chunk of per keys, each batch of
// stageBatchRows keys a transaction of its own. The full chunks' statement
// is prepared once a transaction: parsing hundreds of bind variables cost
// SQLite more than the update.
func moveBatches[K any](ctx context.Context, db *store.DB, now int64, keys []K, per int, query func(n int) string, bind func([]any, K) []any) error {
	args := make([]any, 0, 2+2*per)
	for start := 0; start < len(keys); start += stageBatchRows {
		batch := keys[start:min(start+stageBatchRows, len(keys))]
		err := db.InTx(ctx, func(tx *store.Tx) error {
			var full *sql.Stmt
			defer func() {
				if full != nil {
					full.Close()
				}
			}()
			for c := 0; c < len(batch); c += per {
				chunk := batch[c:min(c+per, len(batch))]
				args = append(args[:0], now, now)
				for _, k := range chunk {
					args = bind(args, k)
				}
				if len(chunk) < per {
					if _, err := tx.ExecContext(ctx, query(len(chunk)), args...); err != nil {
						return err
					}
					continue
				}
				if full == nil {
					var err error
					if full, err = tx.PrepareContext(ctx, query(per)); err != nil {
						return err
					}
				}
				if _, err := full.ExecContext(ctx, args...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
