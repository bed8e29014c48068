package lineage

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/store"
)

// bulkLoad writes a synthetic graph straight into the store tables in one
// transaction with prepared multi-row inserts: assets 1..n named
// bench://a<i> (every 50th tagged money, every 100th scheduled), and the
// given edges between them. It is how tests and benchmarks build graphs too
// large to ingest through notes.
func bulkLoad(tb testing.TB, db *store.DB, n int, edges [][2]int32) {
	tb.Helper()
	ctx := context.Background()
	const rowsPer = 200
	ph := func(row, cols int) string {
		var b strings.Builder
		for r := 0; r < row; r++ {
			if r > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('(')
			for c := 0; c < cols; c++ {
				if c > 0 {
					b.WriteByte(',')
				}
				if db.Dialect() == store.Postgres {
					fmt.Fprintf(&b, "$%d", r*cols+c+1)
				} else {
					b.WriteByte('?')
				}
			}
			b.WriteByte(')')
		}
		return b.String()
	}
	tx, err := db.SQL().BeginTx(ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback()
	kinds := []Kind{KindTopic, KindStreamJob, KindTable, KindDBTModel, KindDashboard}
	assetSQL := "INSERT INTO lineage_assets (seq, id, name, name_key, kind, platform, owner, tags, flags, cron, first_seen_ms, last_seen_ms) VALUES "
	full, err := tx.PrepareContext(ctx, assetSQL+ph(rowsPer, 12))
	if err != nil {
		tb.Fatal(err)
	}
	args := make([]any, 0, rowsPer*12)
	flush := func(stmt func(args []any) error) {
		if len(args) > 0 {
			if err := stmt(args); err != nil {
				tb.Fatal(err)
			}
			args = args[:0]
		}
	}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("a%d", i)
		tags, flags, cron := "[]", 0, ""
		if i%50 == 0 {
			tags, flags = `["money"]`, int(flagMoney)
		}
		if i%100 == 0 {
			cron, flags = "0 23 * * *", flags|int(flagScheduled)
		}
		args = append(args, i, "bench://"+name, name, name, string(kinds[i%len(kinds)]), "bench", fmt.Sprintf("team-%d", i%37), tags, flags, cron, 1, 1)
		if len(args) == rowsPer*12 {
			flush(func(a []any) error { _, err := full.ExecContext(ctx, a...); return err })
		}
	}
	flush(func(a []any) error { _, err := tx.ExecContext(ctx, assetSQL+ph(len(a)/12, 12), a...); return err })
	edgeSQL := "INSERT INTO lineage_edges (from_seq, to_seq, kind, sources, first_seen_ms, last_seen_ms) VALUES "
	fullE, err := tx.PrepareContext(ctx, edgeSQL+ph(rowsPer, 6))
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range edges {
		args = append(args, int64(e[0])+1, int64(e[1])+1, "feeds", "note", 1, 1)
		if len(args) == rowsPer*6 {
			flush(func(a []any) error { _, err := fullE.ExecContext(ctx, a...); return err })
		}
	}
	flush(func(a []any) error { _, err := tx.ExecContext(ctx, edgeSQL+ph(len(a)/6, 6), a...); return err })
	if db.Dialect() == store.Postgres {
		// Explicit seqs leave the identity sequence behind; move it past them.
		if _, err := tx.ExecContext(ctx, "SELECT setval(pg_get_serial_sequence('lineage_assets', 'seq'), $1)", n); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := tx.ExecContext(ctx, "UPDATE lineage_version SET version = version + 1 WHERE id = 1"); err != nil {
		tb.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}
