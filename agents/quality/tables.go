package quality

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/warehouse"
)

// ListTablesIn selects the warehouse and, optionally, a schema.
type ListTablesIn struct {
	Warehouse string `json:"warehouse,omitempty" jsonschema:"warehouse name from dw.yaml; default: the first configured"`
	Schema    string `json:"schema,omitempty" jsonschema:"only tables in this schema (dataset)"`
	page.Params
}

// TableInfo is one table with its size.
type TableInfo struct {
	Table    string             `json:"table" jsonschema:"schema.table, the name to pass to other tools"`
	RowCount int64              `json:"row_count" jsonschema:"rows in the table"`
	Columns  []warehouse.Column `json:"columns" jsonschema:"columns from the information schema"`
}

// ListTablesOut lists the tables.
type ListTablesOut struct {
	Warehouse string      `json:"warehouse" jsonschema:"the warehouse that was read"`
	Dialect   string      `json:"dialect" jsonschema:"duckdb, bigquery or snowflake"`
	Tables    []TableInfo `json:"tables" jsonschema:"this page of tables, by name, with row counts and columns"`
	page.Info
}

var listTablesTool = mcpserver.Tool{
	Name:        "list_tables",
	Title:       "List warehouse tables",
	Description: "Lists the tables of a warehouse with their row counts and columns (from the information schema). Use it to find the exact table and column names before run_quality_check. Paged: limit (default 50, at most 500), next_cursor, total; only the listed tables are counted.",
	ReadOnly:    true,
	Idempotent:  true,
	OpenWorld:   true,
	Text:        tablesText,
}

// tablesText is list_tables' key data for a text-only client: one line a
// table with its row count and every column's name and type.
func tablesText(out any) string {
	o, ok := out.(*ListTablesOut)
	if !ok {
		return mcpserver.RenderData(out)
	}
	var b strings.Builder
	for _, t := range o.Tables {
		cols := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			cols[i] = c.Name + " " + c.Type
		}
		fmt.Fprintf(&b, "%s (%d rows): %s\n", t.Table, t.RowCount, strings.Join(cols, ", "))
	}
	if o.NextCursor != "" {
		fmt.Fprintf(&b, "next_cursor: %s\n", o.NextCursor)
	}
	return b.String()
}

func (h *handlers) listTables(ctx context.Context, in ListTablesIn) (*ListTablesOut, string, error) {
	if in.Schema != "" {
		if err := warehouse.ValidIdentifier(in.Schema); err != nil {
			return nil, "", fmt.Errorf("schema: %w", err)
		}
	}
	w, err := h.d.Warehouse(ctx, in.Warehouse)
	if err != nil {
		return nil, "", err
	}
	refs, err := w.ListTables(ctx)
	if err != nil {
		return nil, "", err
	}
	d := w.Dialect()
	var selected []warehouse.TableRef
	var schemas []string
	seen := map[string]bool{}
	for _, r := range refs {
		if !seen[r.Schema] {
			seen[r.Schema] = true
			schemas = append(schemas, r.Schema)
		}
		if in.Schema == "" || d.SameIdent(r.Schema, in.Schema) {
			selected = append(selected, r)
		}
	}
	if in.Schema != "" && len(selected) == 0 {
		return nil, "", fmt.Errorf("no schema %q in warehouse %s; schemas: %s", in.Schema, w.Name(), strings.Join(schemas, ", "))
	}
	pg, err := in.Resolve("list_tables", w.Name(), in.Schema)
	if err != nil {
		return nil, "", err
	}
	// Only the page's tables are counted and described: a warehouse with
	// thousands of tables costs one page of work.
	slices.SortFunc(selected, func(a, b warehouse.TableRef) int { return strings.Compare(qualifiedName(a), qualifiedName(b)) })
	var info page.Info
	selected, info = page.Slice(pg, selected)
	out := &ListTablesOut{Warehouse: w.Name(), Dialect: d.Name(), Tables: []TableInfo{}, Info: info}
	if len(selected) > 0 {
		// One statement counts every table: a UNION ALL of COUNT(*) over
		// catalog names, quoted by the dialect.
		parts := make([]string, len(selected))
		for i, r := range selected {
			parts[i] = fmt.Sprintf("SELECT %d AS i, COUNT(*) AS n FROM %s", i, d.Table(r))
		}
		res, err := w.Query(ctx, warehouse.Query{SQL: strings.Join(parts, " UNION ALL "), Agent: Name, Tool: "list_tables"})
		if err != nil {
			return nil, "", err
		}
		counts := make([]int64, len(selected))
		for _, row := range res.Rows {
			counts[toInt(row[0])] = int64(toInt(row[1]))
		}
		for i, r := range selected {
			t, err := w.Describe(ctx, r)
			if err != nil {
				return nil, "", err
			}
			out.Tables = append(out.Tables, TableInfo{Table: qualifiedName(r), RowCount: counts[i], Columns: t.Columns})
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d tables in %s (%s)", out.Total, out.Warehouse, out.Dialect)
	for i, t := range out.Tables {
		if i == 20 {
			fmt.Fprintf(&b, "\n… and %d more on this page", len(out.Tables)-20)
			break
		}
		fmt.Fprintf(&b, "\n- %s: %d rows, %d columns", t.Table, t.RowCount, len(t.Columns))
	}
	if out.NextCursor != "" {
		b.WriteString("\nMore: pass next_cursor as cursor.")
	}
	return out, b.String(), nil
}

func qualifiedName(r warehouse.TableRef) string {
	if r.Schema == "" {
		return r.Name
	}
	return r.Schema + "." + r.Name
}

func toInt(v any) int {
	switch x := v.(type) {
	case int64:
		return int(x)
	case int32:
		return int(x)
	case int:
		return x
	case uint64:
		return int(x)
	case float64:
		return int(x)
	}
	return 0
}
