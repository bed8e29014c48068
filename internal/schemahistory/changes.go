package schemahistory

import (
	"context"
	"encoding/json"
	"time"

	"github.com/dataworkers/dw/internal/page"
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
// newest first (only one table's when table is not empty), and its Info
// with how many there are in all. The page is cut in SQL, after the
// previous page's last (taken, id), so a snapshot taken between pages
// moves no other.
func Changes(ctx context.Context, q store.Querier, whName, table string, p page.Params) ([]Change, page.Info, error) {
	pg, err := p.ResolveKeyset(changeKey, "list_schema_changes", whName, table)
	if err != nil {
		return nil, page.Info{}, err
	}
	where := ` FROM table_snapshots WHERE warehouse = ? AND ` + noChange
	args := []any{whName}
	if table != "" {
		where += ` AND table_name = ?`
		args = append(args, table)
	}
	var total int
	if err := q.QueryRowContext(ctx, "SELECT COUNT(*)"+where, args...).Scan(&total); err != nil {
		return nil, page.Info{}, err
	}
	if pg.After != nil {
		where += ` AND (taken_ms, id) < (?, ?)`
		args = append(args, pg.After...)
	}
	rows, err := q.QueryContext(ctx, "SELECT id, table_name, taken_ms, columns_json, sha256, diff_json"+where+
		" ORDER BY taken_ms DESC, id DESC LIMIT ?", append(args, pg.Fetch())...)
	if err != nil {
		return nil, page.Info{}, err
	}
	defer rows.Close()
	type row struct {
		id, ms int64
		Change
	}
	var fetched []row
	for rows.Next() {
		var c row
		var cols, diff string
		if err := rows.Scan(&c.id, &c.Table, &c.ms, &cols, &c.SHA256, &diff); err != nil {
			return nil, page.Info{}, err
		}
		c.TakenAt = store.FromMillis(c.ms)
		var colList []json.RawMessage
		if err := json.Unmarshal([]byte(cols), &colList); err != nil {
			return nil, page.Info{}, err
		}
		c.Columns = len(colList)
		if err := json.Unmarshal([]byte(diff), &c.Changes); err != nil {
			return nil, page.Info{}, err
		}
		fetched = append(fetched, c)
	}
	if err := rows.Err(); err != nil {
		return nil, page.Info{}, err
	}
	shown, info := page.Cut(pg, fetched, total, func(c row) page.Key { return page.Key{c.ms, c.id} })
	out := make([]Change, len(shown))
	for i, c := range shown {
		out[i] = c.Change
	}
	return out, info, nil
}

// changeKey pages list_schema_changes newest first by when each snapshot
// was taken, its id breaking ties.
var changeKey = page.Keyset{page.Int, page.Int}
