package checks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dataworkers/dw/internal/bound"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/warehouse"
)

// TablesRequest is list_tables' input: optionally one schema, and a page.
type TablesRequest struct {
	Schema string
	page.Params
}

// TableInfo is one table with its size.
type TableInfo struct {
	Table    string             `json:"table" jsonschema:"schema.table, the name to pass to other tools"`
	RowCount int64              `json:"row_count" jsonschema:"rows in the table"`
	Columns  []warehouse.Column `json:"columns" jsonschema:"columns from the information schema, in position order: the first 12 (columns_total counts them all; detect_schema_change then get_schema_snapshot, dw-schema, pages every column)"`
	// ColumnsTotal counts every column when Columns lists the first.
	ColumnsTotal int `json:"columns_total" jsonschema:"columns the table has"`
}

// What a page of tables lists of each table's columns: a page is 50
// tables, and a warehouse table may have thousands of columns.
const listedColumns, columnsBudget = 12, 1000

// pageBudget bounds a page of tables, in characters of JSON.
const pageBudget = 50_000

// TablesResult is one page of a warehouse's tables, by qualified name.
type TablesResult struct {
	Warehouse string
	Dialect   string
	Tables    []TableInfo
	page.Info
}

// ListTables is list_tables: the tables of env's warehouse (of one schema
// when req names it), sorted by schema.table, one page of them counted and
// described. Only the page's tables cost anything, so a warehouse with
// thousands of tables costs one page of work: one statement counts them
// all and each is described from the driver's catalog cache. The SQL is
// built from catalog names quoted by the dialect, never from the request;
// the schema asked for is only compared with the catalog's.
func ListTables(ctx context.Context, env Env, req TablesRequest) (*TablesResult, error) {
	w := env.Warehouse
	if w == nil {
		return nil, errors.New("checks: ListTables needs a warehouse")
	}
	if req.Schema != "" {
		if err := warehouse.ValidIdentifier(req.Schema); err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
	}
	// The cursor is checked before the warehouse is read: a bad one costs
	// nothing. Its scope is the warehouse and schema, so a cursor from
	// another listing is refused rather than misread.
	pg, err := req.Resolve("list_tables", w.Name(), req.Schema)
	if err != nil {
		return nil, err
	}
	refs, err := w.ListTables(ctx)
	if err != nil {
		return nil, err
	}
	d := w.Dialect()
	var selected []warehouse.TableRef
	var schemas []string
	for _, r := range refs {
		if !slices.Contains(schemas, r.Schema) {
			schemas = append(schemas, r.Schema)
		}
		if req.Schema == "" || d.SameIdent(r.Schema, req.Schema) {
			selected = append(selected, r)
		}
	}
	if req.Schema != "" && len(selected) == 0 {
		return nil, fmt.Errorf("no schema %q in warehouse %s; schemas: %s", req.Schema, w.Name(), strings.Join(schemas, ", "))
	}
	slices.SortFunc(selected, func(a, b warehouse.TableRef) int { return strings.Compare(QualifiedName(a), QualifiedName(b)) })
	// Offset-paged: the tables are the warehouse catalog's answer to this
	// call, not rows in the store (see package page).
	selected, info := page.Slice(pg, selected)
	out := &TablesResult{Warehouse: w.Name(), Dialect: d.Name(), Tables: []TableInfo{}, Info: info}
	if len(selected) == 0 {
		return out, nil
	}
	counts, err := rowCounts(ctx, env, selected)
	if err != nil {
		return nil, err
	}
	for i, r := range selected {
		t, err := w.Describe(ctx, r)
		if err != nil {
			return nil, err
		}
		out.Tables = append(out.Tables, TableInfo{Table: QualifiedName(r), RowCount: counts[i],
			Columns: bound.Head(t.Columns, listedColumns, columnsBudget), ColumnsTotal: len(t.Columns)})
	}
	// A long page ends early, and next_cursor continues from there.
	if kept := bound.Head(out.Tables, len(out.Tables), pageBudget); len(kept) < len(out.Tables) {
		out.Tables, out.Info = kept, pg.Info(len(kept), info.Total)
	}
	return out, nil
}

// rowCounts counts the rows of every table in one statement: a UNION ALL
// of COUNT(*), each tagged with the table's position in refs.
func rowCounts(ctx context.Context, env Env, refs []warehouse.TableRef) ([]int64, error) {
	w, d := env.Warehouse, env.Warehouse.Dialect()
	parts := make([]string, len(refs))
	for i, r := range refs {
		parts[i] = fmt.Sprintf("SELECT %d AS i, COUNT(*) AS n FROM %s", i, d.Table(r))
	}
	tool := env.Tool
	if tool == "" {
		tool = "list_tables"
	}
	res, err := w.Query(ctx, warehouse.Query{SQL: strings.Join(parts, " UNION ALL "), Agent: env.Agent, Tool: tool})
	if err != nil {
		return nil, err
	}
	counts := make([]int64, len(refs))
	for _, row := range res.Rows {
		if len(row) < 2 {
			return nil, fmt.Errorf("counting the rows of %d tables: the warehouse answered %d columns, want 2", len(refs), len(row))
		}
		i, null, err := warehouse.Float(row[0])
		if err != nil {
			return nil, fmt.Errorf("counting the rows of %d tables: %w", len(refs), err)
		}
		n, _, err := warehouse.Float(row[1])
		if err != nil {
			return nil, fmt.Errorf("counting the rows of %d tables: %w", len(refs), err)
		}
		// The tag must name one of the tables asked about; anything else
		// (NULL, a fraction, out of range) would put a count on the wrong table.
		if null || i != math.Trunc(i) || i < 0 || int(i) >= len(refs) {
			return nil, fmt.Errorf("counting the rows of %d tables: the warehouse answered for table %v", len(refs), i)
		}
		counts[int(i)] = int64(n)
	}
	return counts, nil
}

// QualifiedName is a table as list_tables names it: schema.table, or the
// bare name when it has no schema.
func QualifiedName(r warehouse.TableRef) string {
	if r.Schema == "" {
		return r.Name
	}
	return r.Schema + "." + r.Name
}
