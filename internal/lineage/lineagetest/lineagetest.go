// Package lineagetest holds the test helpers that read and write the
// lineage store tables directly, shared by lineage's own tests and those
// of the packages around it (ingest). It imports the store only, never
// lineage, so lineage's in-package tests can use it without an import
// cycle; the few lineage values it must write (asset kinds, flag bits) it
// states itself, and lineage's TestLineagetestAgreesWithModel holds them
// equal. Tests only.
package lineagetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// StoryTime is Tuesday 15:05 UTC, when the billing incident opens.
var StoryTime = time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)

// BulkKinds are the asset kinds Graph.Load cycles through.
var BulkKinds = []string{"topic", "stream_job", "table", "dbt_model", "dashboard"}

// The flag bits Graph.Load sets on a money-tagged and on a scheduled asset.
const (
	FlagMoney     = 1 << 1
	FlagScheduled = 1 << 4
)

// Count is the number of rows in a store table.
func Count(t testing.TB, db *store.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// GraphDump is the whole stored graph as sorted text lines, without the
// bookkeeping times, so two states can be compared for equality.
func GraphDump(t testing.TB, db *store.DB) []string {
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

// BulkLoad writes the graph of n assets and the given edges (0-based)
// with Graph.Load, failing the test if it cannot.
func BulkLoad(tb testing.TB, db *store.DB, n int, edges [][2]int32) {
	tb.Helper()
	if err := (&Graph{N: n, Edges: edges}).Load(context.Background(), db); err != nil {
		tb.Fatalf("bulk load %d assets: %v", n, err)
	}
}

// DuckDBSpellings are n ways a person or a tool may name the DuckDB table
// database.schema.table that dbt builds as model, drawn from seed: with or
// without the platform, the database and the schema's home, each part in
// any case, quoted or not, padded with spaces, and the dbt model's id with
// and without its platform. DuckDB ignores case even inside quotes, so
// every one names the same table. The first ones are the plain spellings
// each tool prints.
func DuckDBSpellings(seed uint64, n int, database, schema, table, model string) []string {
	out := []string{
		"duckdb://" + database + "." + schema + "." + table, // the catalog
		"duckdb://" + schema + "." + table,                  // a check
		schema + "." + table,                                // a person
		`"` + schema + `"."` + table + `"`,                  // a SQL editor
		"dbt://" + model,                                    // dbt
		model,                                               // dbt, bare
	}
	rng := rand.New(rand.NewPCG(seed, 0x1d5))
	cased := func(s string) string {
		b := []byte(s)
		for i := range b {
			if rng.IntN(2) == 0 {
				b[i] = byte(strings.ToUpper(string(b[i]))[0])
			}
		}
		return string(b)
	}
	part := func(s string) string {
		s = cased(s)
		if rng.IntN(2) == 0 {
			return `"` + s + `"`
		}
		return s
	}
	for len(out) < n {
		var s string
		switch rng.IntN(6) {
		case 0:
			s = cased("dbt") + "://" + model
		default:
			parts := []string{part(schema), part(table)}
			if rng.IntN(2) == 0 {
				parts = append([]string{part(database)}, parts...)
			}
			s = strings.Join(parts, ".")
			if rng.IntN(3) > 0 {
				s = cased("duckdb") + "://" + s
			}
		}
		if rng.IntN(4) == 0 {
			s = " " + s + " "
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
