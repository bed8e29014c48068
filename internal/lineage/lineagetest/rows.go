package lineagetest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/store"
)

// CatalogRows are the rows of the three tables an import writes (assets,
// their names, edges), read whole from a catalog: an import's floor writes
// these, the very rows the import wrote, every column as stored, rather
// than rows made up to look like them (shorter ids, fewer columns), so the
// ratio compares like with like.
type CatalogRows struct {
	tables []tableRows
}

type tableRows struct {
	name, key string
	cols      []string
	rows      [][]any
}

// catalogTables are the tables and the keys their rows are read (and so
// written) in: the order a bulk insert that was free to choose would take.
var catalogTables = []struct{ name, key string }{
	{"lineage_assets", "seq"},
	{"lineage_aliases", "alias"},
	{"lineage_edges", "from_seq, to_seq"},
}

// ReadCatalogRows reads every row of the catalog's assets, names and edges.
func ReadCatalogRows(tb testing.TB, db *store.DB) *CatalogRows {
	tb.Helper()
	ctx := context.Background()
	out := &CatalogRows{}
	for _, t := range catalogTables {
		// The tables' own names and keys, never user text.
		rows, err := db.SQL().QueryContext(ctx, "SELECT * FROM "+t.name+" ORDER BY "+t.key)
		if err != nil {
			tb.Fatalf("read %s: %v", t.name, err)
		}
		cols, err := rows.Columns()
		if err != nil {
			tb.Fatal(err)
		}
		tr := tableRows{name: t.name, key: t.key, cols: cols}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				tb.Fatalf("read %s: %v", t.name, err)
			}
			tr.rows = append(tr.rows, vals)
		}
		if err := rows.Err(); err != nil {
			tb.Fatalf("read %s: %v", t.name, err)
		}
		rows.Close()
		out.tables = append(out.tables, tr)
	}
	return out
}

// Count is the rows read of table.
func (c *CatalogRows) Count(table string) int {
	for _, t := range c.tables {
		if t.name == table {
			return len(t.rows)
		}
	}
	return 0
}

// Insert writes the rows into db's (empty) tables in one transaction,
// prepared multi-row INSERTs of about 4,000 values each, as Graph.Load
// does.
func (c *CatalogRows) Insert(tb testing.TB, db *store.DB) {
	tb.Helper()
	ctx := context.Background()
	tx, err := db.SQL().BeginTx(ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback()
	pg := db.Dialect() == store.Postgres
	for _, t := range c.tables {
		prefix := fmt.Sprintf("INSERT INTO %s (%s) VALUES ", t.name, strings.Join(t.cols, ", "))
		err := insertRows(ctx, tx, pg, prefix, len(t.cols), max(1, 4000/len(t.cols)), func(yield func(...any) error) error {
			for _, r := range t.rows {
				if err := yield(r...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatalf("insert %s: %v", t.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}
