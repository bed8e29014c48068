package schemahistory

import (
	"context"
	"encoding/json"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// Change is a snapshot that changed something, without its full column
// list: a list of changes stays small however wide the tables are.
type Change struct {
	Table   string         `json:"table" jsonschema:"schema.table as the catalog spells it"`
	TakenAt time.Time      `json:"taken_at" jsonschema:"when the columns were read"`
	Columns int            `json:"columns" jsonschema:"columns the table had then (get_schema_snapshot lists them)"`
	SHA256  string         `json:"sha256" jsonschema:"hash of the column list"`
	Changes []ColumnChange `json:"changes" jsonschema:"how it differs from the snapshot before it"`
}

// noChange is how a snapshot without changes stores its diff (the first
// snapshot of a table stores null).
const noChange = `diff_json NOT IN ('[]', 'null', '')`

// Changes is one page of a warehouse's snapshots that changed something,
// newest first (only one table's when table is not empty), and how many
// there are in all. The page is cut in SQL.
func Changes(ctx context.Context, q store.Querier, whName, table string, limit, offset int) ([]Change, int, error) {
	where := ` FROM table_snapshots WHERE warehouse = ? AND ` + noChange
	args := []any{whName}
	if table != "" {
		where += ` AND table_name = ?`
		args = append(args, table)
	}
	var total int
	if err := q.QueryRowContext(ctx, "SELECT COUNT(*)"+where, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := q.QueryContext(ctx, "SELECT table_name, taken_ms, columns_json, sha256, diff_json"+where+
		" ORDER BY taken_ms DESC, id DESC LIMIT ? OFFSET ?", append(args, limit, offset)...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out := []Change{}
	for rows.Next() {
		var c Change
		var ms int64
		var cols, diff string
		if err := rows.Scan(&c.Table, &ms, &cols, &c.SHA256, &diff); err != nil {
			return nil, 0, err
		}
		c.TakenAt = store.FromMillis(ms)
		var colList []json.RawMessage
		if err := json.Unmarshal([]byte(cols), &colList); err != nil {
			return nil, 0, err
		}
		c.Columns = len(colList)
		if err := json.Unmarshal([]byte(diff), &c.Changes); err != nil {
			return nil, 0, err
		}
		out = append(out, c)
	}
	return out, total, rows.Err()
}
