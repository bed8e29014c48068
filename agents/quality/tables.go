package quality

import (
	"context"
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/page"
)

// ListTablesIn selects the warehouse and, optionally, a schema.
type ListTablesIn struct {
	Warehouse string `json:"warehouse,omitempty" jsonschema:"warehouse name from dw.yaml; default: the first configured"`
	Schema    string `json:"schema,omitempty" jsonschema:"only tables in this schema (dataset)"`
	page.Params
}

// ListTablesOut lists the tables.
type ListTablesOut struct {
	Warehouse string             `json:"warehouse" jsonschema:"the warehouse that was read"`
	Dialect   string             `json:"dialect" jsonschema:"duckdb, bigquery or snowflake"`
	Tables    []checks.TableInfo `json:"tables" jsonschema:"this page of tables, by name, with row counts and columns"`
	page.Info
}

var listTablesTool = mcpserver.Tool{
	Name:        "list_tables",
	Title:       "List warehouse tables",
	Description: "Lists the tables of a warehouse with their row counts and first 12 columns (from the information schema; columns_total counts them all, and get_schema_snapshot in dw-schema pages every column once detect_schema_change has snapshotted the table). Use it to find the exact table and column names before run_quality_check. Paged: limit (default 50, at most 500), next_cursor, total; only the listed tables are counted.",
	ReadOnly:    true,
	Idempotent:  true,
	OpenWorld:   true,
	Text:        tablesText,
}

// tablesText is list_tables' key data for a text-only client: one line a
// table with its row count and its listed columns' names and types.
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
		more := ""
		if t.ColumnsTotal > len(t.Columns) {
			more = fmt.Sprintf(", … (%d columns)", t.ColumnsTotal)
		}
		fmt.Fprintf(&b, "%s (%d rows): %s%s\n", t.Table, t.RowCount, strings.Join(cols, ", "), more)
	}
	if o.NextCursor != "" {
		fmt.Fprintf(&b, "next_cursor: %s\n", o.NextCursor)
	}
	return b.String()
}

func (h *handlers) listTables(ctx context.Context, in ListTablesIn) (*ListTablesOut, string, error) {
	w, err := h.d.Warehouse(ctx, in.Warehouse)
	if err != nil {
		return nil, "", err
	}
	res, err := checks.ListTables(ctx, checks.Env{Warehouse: w, Agent: Name, Tool: "list_tables"}, checks.TablesRequest{Schema: in.Schema, Params: in.Params})
	if err != nil {
		return nil, "", err
	}
	out := &ListTablesOut{Warehouse: res.Warehouse, Dialect: res.Dialect, Tables: res.Tables, Info: res.Info}
	var b strings.Builder
	fmt.Fprintf(&b, "%d tables in %s (%s)", out.Total, out.Warehouse, out.Dialect)
	for i, t := range out.Tables {
		if i == 20 {
			fmt.Fprintf(&b, "\n… and %d more on this page", len(out.Tables)-20)
			break
		}
		fmt.Fprintf(&b, "\n- %s: %d rows, %d columns", t.Table, t.RowCount, t.ColumnsTotal)
	}
	if out.NextCursor != "" {
		b.WriteString("\nMore: pass next_cursor as cursor.")
	}
	return out, b.String(), nil
}
