package ingest

// Copies of lineage's test helpers: test files cannot be shared across
// packages, and these are small.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
)

// storyTime is Tuesday 15:05 UTC, when the billing incident opens.
var storyTime = time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)

func newGraph(t *testing.T, db *store.DB) (*lineage.Graph, *clock.Fake) {
	t.Helper()
	c := clock.NewFake(storyTime)
	return lineage.New(db, c), c
}

func fixture(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", rel))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	return b
}

func count(t testing.TB, db *store.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// graphDump is the whole stored graph as sorted text lines, without the
// bookkeeping times, so two states can be compared for equality.
func graphDump(t testing.TB, db *store.DB) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	q := func(prefix, sqlText string, n int) {
		rows, err := db.QueryContext(ctx, sqlText)
		if err != nil {
			t.Fatalf("dump: %v", err)
		}
		defer rows.Close()
		for rows.Next() {
			vals := make([]any, n)
			ptrs := make([]any, n)
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("dump scan: %v", err)
			}
			var parts []string
			for _, v := range vals {
				switch x := v.(type) {
				case []byte:
					parts = append(parts, string(x))
				default:
					parts = append(parts, fmt.Sprint(x))
				}
			}
			out = append(out, prefix+strings.Join(parts, "|"))
		}
	}
	q("asset ", `SELECT id, title, kind, platform, owner, owner_email, domain, description, tags, flags, cron, timezone, columns_json, sql_text, url, sources FROM lineage_assets`, 16)
	q("alias ", `SELECT l.alias, a.id, l.weak FROM lineage_aliases l LEFT JOIN lineage_assets a ON a.seq = l.asset_seq`, 3)
	q("edge ", `SELECT f.id, t.id, e.kind, e.sources FROM lineage_edges e JOIN lineage_assets f ON f.seq = e.from_seq JOIN lineage_assets t ON t.seq = e.to_seq`, 4)
	q("col ", `SELECT f.id, t.id, c.from_col, c.to_col, c.source FROM lineage_edge_columns c JOIN lineage_assets f ON f.seq = c.from_seq JOIN lineage_assets t ON t.seq = c.to_seq`, 5)
	slices.Sort(out)
	return out
}

func neighborIDs(ns []lineage.Neighbor) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Asset.ID
	}
	return out
}

func mustLineage(t *testing.T, g *lineage.Graph, asset string) *lineage.LineageResult {
	t.Helper()
	res, err := g.GetLineage(context.Background(), lineage.LineageParams{Asset: asset})
	if err != nil {
		t.Fatalf("GetLineage(%s): %v", asset, err)
	}
	return res
}

func edgeCols(t *testing.T, g *lineage.Graph, from, to string) ([]lineage.ColumnMapping, bool) {
	t.Helper()
	for _, n := range mustLineage(t, g, from).Downstream {
		if n.Edge.To == to {
			return n.Edge.Columns, true
		}
	}
	return nil, false
}

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
	kinds := []lineage.Kind{lineage.KindTopic, lineage.KindStreamJob, lineage.KindTable, lineage.KindDBTModel, lineage.KindDashboard}
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
			tags, flags = `["money"]`, 2 /* lineage flagMoney */
		}
		if i%100 == 0 {
			cron, flags = "0 23 * * *", flags|16 /* lineage flagScheduled */
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
