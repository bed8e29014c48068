package lineage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
)

// storyTime is Tuesday 15:05 UTC, when the billing incident opens.
var storyTime = time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)

func newGraph(t *testing.T, db *store.DB) (*Graph, *clock.Fake) {
	t.Helper()
	c := clock.NewFake(storyTime)
	return New(db, c), c
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

func neighborIDs(ns []Neighbor) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Asset.ID
	}
	return out
}

func mustLineage(t *testing.T, g *Graph, asset string) *LineageResult {
	t.Helper()
	res, err := g.GetLineage(context.Background(), LineageParams{Asset: asset})
	if err != nil {
		t.Fatalf("GetLineage(%s): %v", asset, err)
	}
	return res
}

func edgeCols(t *testing.T, g *Graph, from, to string) ([]ColumnMapping, bool) {
	t.Helper()
	for _, n := range mustLineage(t, g, from).Downstream {
		if n.Edge.To == to {
			return n.Edge.Columns, true
		}
	}
	return nil, false
}
