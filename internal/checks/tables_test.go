package checks

import (
	"context"
	"slices"
	"testing"

	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/warehouse"
)

// tablesWarehouse counts what ListTables asks of the warehouse, and can
// answer the count statement with rows of its own.
type tablesWarehouse struct {
	warehouse.Warehouse
	lists, queries int
	answer         [][]any
}

func (c *tablesWarehouse) ListTables(ctx context.Context) ([]warehouse.TableRef, error) {
	c.lists++
	return c.Warehouse.ListTables(ctx)
}

func (c *tablesWarehouse) Query(ctx context.Context, q warehouse.Query) (*warehouse.Result, error) {
	c.queries++
	if c.answer != nil {
		return &warehouse.Result{Columns: []string{"i", "n"}, Rows: c.answer}, nil
	}
	return c.Warehouse.Query(ctx, q)
}

func tablesFixture(t *testing.T) *tablesWarehouse {
	t.Helper()
	wh := openFixture(t,
		`CREATE SCHEMA crm`,
		`CREATE TABLE crm.accounts AS SELECT range AS id, 'a' || range AS name FROM range(7)`,
		`CREATE TABLE crm.empty (id INTEGER)`)
	t.Cleanup(func() { wh.Close() })
	return &tablesWarehouse{Warehouse: wh}
}

func names(ts []TableInfo) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Table)
	}
	return out
}

// TestListTablesCountsOnePageInOneStatement: tables come sorted by
// schema.table with their exact row counts and columns; each page costs
// one count statement, and walking the cursors visits every table once.
func TestListTablesCountsOnePageInOneStatement(t *testing.T) {
	ctx := context.Background()
	w := tablesFixture(t)
	env := Env{Warehouse: w, Agent: "dw-quality"}

	all, err := ListTables(ctx, env, TablesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"crm.accounts", "crm.empty", "shop.events"}; !slices.Equal(names(all.Tables), want) || all.Total != 3 || all.NextCursor != "" {
		t.Fatalf("tables %v (total %d, cursor %q), want %v", names(all.Tables), all.Total, all.NextCursor, want)
	}
	wantRows := []int64{7, 0, int64(len(fixtureRows()))}
	wantCols := []int{2, 1, 7}
	for i, tb := range all.Tables {
		if tb.RowCount != wantRows[i] || len(tb.Columns) != wantCols[i] {
			t.Errorf("%s: %d rows, %d columns; want %d and %d", tb.Table, tb.RowCount, len(tb.Columns), wantRows[i], wantCols[i])
		}
	}
	if all.Warehouse != "test" || all.Dialect != "duckdb" || w.queries != 1 {
		t.Errorf("warehouse %q dialect %q, %d count statements (want 1)", all.Warehouse, all.Dialect, w.queries)
	}

	w.queries = 0
	var seen []string
	req := TablesRequest{Params: page.Params{Limit: 2}}
	for pages := 1; ; pages++ {
		res, err := ListTables(ctx, env, req)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, names(res.Tables)...)
		if res.NextCursor == "" {
			if pages != 2 || w.queries != 2 {
				t.Errorf("%d pages in %d count statements; want 2 and 2", pages, w.queries)
			}
			break
		}
		req.Cursor = res.NextCursor
	}
	if !slices.Equal(seen, names(all.Tables)) {
		t.Errorf("pages visited %v, want %v", seen, names(all.Tables))
	}

	crm, err := ListTables(ctx, env, TablesRequest{Schema: "CRM"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"crm.accounts", "crm.empty"}; !slices.Equal(names(crm.Tables), want) || crm.Total != 2 {
		t.Errorf("schema CRM (matched as DuckDB matches names): %v, want %v", names(crm.Tables), want)
	}
}

// TestListTablesRefusesBadInputBeforeReading: a schema that is not an
// identifier, a forged cursor, or a cursor from another schema's listing
// is refused before the warehouse is read; an unknown schema is refused
// after listing, without counting anything.
func TestListTablesRefusesBadInputBeforeReading(t *testing.T) {
	ctx := context.Background()
	w := tablesFixture(t)
	env := Env{Warehouse: w, Agent: "dw-quality"}
	first, err := ListTables(ctx, env, TablesRequest{Schema: "crm", Params: page.Params{Limit: 1}})
	if err != nil || first.NextCursor == "" {
		t.Fatalf("first page of crm: %+v %v", first, err)
	}
	w.lists, w.queries = 0, 0
	for name, req := range map[string]TablesRequest{
		"injection":     {Schema: `shop"; DROP TABLE shop.events; --`},
		"forged cursor": {Params: page.Params{Cursor: "not-a-cursor"}},
		"other scope":   {Schema: "shop", Params: page.Params{Cursor: first.NextCursor}},
		"limit":         {Params: page.Params{Limit: page.MaxLimit + 1}},
	} {
		if res, err := ListTables(ctx, env, req); err == nil {
			t.Errorf("%s: listed %v", name, names(res.Tables))
		}
	}
	if w.lists != 0 || w.queries != 0 {
		t.Errorf("refused requests read the warehouse: %d listings, %d statements", w.lists, w.queries)
	}
	if res, err := ListTables(ctx, env, TablesRequest{Schema: "nope"}); err == nil {
		t.Errorf("unknown schema listed %v", names(res.Tables))
	}
	if w.queries != 0 {
		t.Errorf("an unknown schema ran %d statements", w.queries)
	}
}

// TestListTablesRefusesACountForAnotherTable: an answer whose tag names no
// table of the page (out of range, NULL, a fraction) is an error, never a
// count put on the wrong table.
func TestListTablesRefusesACountForAnotherTable(t *testing.T) {
	ctx := context.Background()
	w := tablesFixture(t)
	env := Env{Warehouse: w, Agent: "dw-quality"}
	for name, rows := range map[string][][]any{
		"out of range": {{int64(0), int64(7)}, {int64(3), int64(1)}},
		"negative":     {{int64(-1), int64(7)}},
		"null":         {{nil, int64(7)}},
		"fraction":     {{0.5, int64(7)}},
		"one column":   {{int64(0)}},
		"not a number": {{"first", int64(7)}},
	} {
		w.answer = rows
		if res, err := ListTables(ctx, env, TablesRequest{}); err == nil {
			t.Errorf("%s: answered %+v", name, res.Tables)
		}
	}
	w.answer = [][]any{{"2", "12"}, {int64(0), 3.0}}
	res, err := ListTables(ctx, env, TablesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := []int64{res.Tables[0].RowCount, res.Tables[1].RowCount, res.Tables[2].RowCount}; !slices.Equal(got, []int64{3, 0, 12}) {
		t.Errorf("counts by tag: %v, want [3 0 12]", got)
	}
}
