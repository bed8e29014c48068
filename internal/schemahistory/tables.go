package schemahistory

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/suggest"
	"github.com/dataworkers/dw/internal/warehouse"
)

// ColumnChange is how one column differs between two snapshots.
type ColumnChange struct {
	Column string `json:"column" jsonschema:"column name (the new name for a likely rename)"`
	// How is added, dropped, type_changed, nullability_changed or likely_renamed.
	How         string `json:"how" jsonschema:"added, dropped, type_changed, nullability_changed or likely_renamed"`
	OldType     string `json:"old_type,omitempty" jsonschema:"type before"`
	NewType     string `json:"new_type,omitempty" jsonschema:"type after"`
	RenamedFrom string `json:"renamed_from,omitempty" jsonschema:"for likely_renamed: the dropped column it probably replaces"`
}

// Snapshot is a table's columns at one time.
type Snapshot struct {
	Warehouse string             `json:"warehouse" jsonschema:"warehouse name"`
	Table     string             `json:"table" jsonschema:"schema.table as the catalog spells it"`
	TakenAt   time.Time          `json:"taken_at" jsonschema:"when the columns were read"`
	Columns   []warehouse.Column `json:"columns" jsonschema:"columns from the information schema"`
	SHA256    string             `json:"sha256" jsonschema:"hash of the column list"`
	Changes   []ColumnChange     `json:"changes" jsonschema:"how it differs from the snapshot before it; empty for the first"`
}

// TableKey is the stored name of a table: schema.table in catalog spelling.
func TableKey(t warehouse.TableRef) string {
	if t.Schema == "" {
		return t.Name
	}
	return t.Schema + "." + t.Name
}

// Take reads the table's columns and compares them with the last stored
// snapshot. A snapshot is stored when it is the first or differs; prev is
// nil for the first one. changed reports whether anything differs.
func Take(ctx context.Context, db *store.DB, whName string, tab *warehouse.Table, at time.Time) (cur *Snapshot, prev *Snapshot, err error) {
	key := TableKey(tab.Ref)
	cur = &Snapshot{Warehouse: whName, Table: key, TakenAt: at.UTC(), Columns: tab.Columns, SHA256: hashColumns(tab.Columns), Changes: []ColumnChange{}}
	err = db.InTx(ctx, func(tx *store.Tx) error {
		p, err := latest(ctx, tx, whName, key)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		prev = p
		if p != nil {
			if p.SHA256 == cur.SHA256 {
				return nil
			}
			cur.Changes = DiffColumns(p.Columns, cur.Columns)
		}
		cols, _ := json.Marshal(cur.Columns)
		diff, _ := json.Marshal(cur.Changes)
		_, err = tx.ExecContext(ctx, `INSERT INTO table_snapshots (warehouse, table_name, taken_ms, columns_json, sha256, diff_json)
			VALUES (?, ?, ?, ?, ?, ?)`, whName, key, store.Millis(cur.TakenAt), string(cols), cur.SHA256, string(diff))
		return err
	})
	return cur, prev, err
}

// Latest returns the last stored snapshot of a table, or store.ErrNotFound.
func Latest(ctx context.Context, q store.Querier, whName, table string) (*Snapshot, error) {
	return latest(ctx, q, whName, table)
}

func latest(ctx context.Context, q store.Querier, whName, table string) (*Snapshot, error) {
	list, err := History(ctx, q, whName, table, 1)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, store.ErrNotFound
	}
	return &list[0], nil
}

// History lists a table's stored snapshots, newest first (limit ≤ 0: all).
// An empty table name lists every table's snapshots in the warehouse.
func History(ctx context.Context, q store.Querier, whName, table string, limit int) ([]Snapshot, error) {
	query := `SELECT warehouse, table_name, taken_ms, columns_json, sha256, diff_json FROM table_snapshots WHERE warehouse = ?`
	args := []any{whName}
	if table != "" {
		query += ` AND table_name = ?`
		args = append(args, table)
	}
	query += ` ORDER BY taken_ms DESC, id DESC`
	if limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Snapshot{}
	for rows.Next() {
		var s Snapshot
		var ms int64
		var cols, diff string
		if err := rows.Scan(&s.Warehouse, &s.Table, &ms, &cols, &s.SHA256, &diff); err != nil {
			return nil, err
		}
		s.TakenAt = store.FromMillis(ms)
		if err := json.Unmarshal([]byte(cols), &s.Columns); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(diff), &s.Changes); err != nil {
			return nil, err
		}
		if s.Changes == nil {
			s.Changes = []ColumnChange{}
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	return out, nil
}

// Tables lists the tables with snapshots in a warehouse.
func Tables(ctx context.Context, q store.Querier, whName string) ([]string, error) {
	return store.Strings(ctx, q, `SELECT DISTINCT table_name FROM table_snapshots WHERE warehouse = ? ORDER BY table_name`, whName)
}

func hashColumns(cols []warehouse.Column) string {
	h := sha256.New()
	for _, c := range cols {
		fmt.Fprintf(h, "%s\x00%s\x00%t\n", c.Name, c.Type, c.Nullable)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// DiffColumns compares two column lists. A dropped and an added column of
// the same type, at the same position or with close names, are reported as
// one likely rename: information schemas do not record renames, and
// "dropped x, added y" would send a reader looking for a missing column.
func DiffColumns(old, cur []warehouse.Column) []ColumnChange {
	oldBy := map[string]warehouse.Column{}
	for _, c := range old {
		oldBy[strings.ToLower(c.Name)] = c
	}
	curBy := map[string]warehouse.Column{}
	for _, c := range cur {
		curBy[strings.ToLower(c.Name)] = c
	}
	var dropped, added []warehouse.Column
	changes := []ColumnChange{}
	for _, c := range old {
		n, ok := curBy[strings.ToLower(c.Name)]
		switch {
		case !ok:
			dropped = append(dropped, c)
		case !strings.EqualFold(n.Type, c.Type):
			changes = append(changes, ColumnChange{Column: n.Name, How: "type_changed", OldType: c.Type, NewType: n.Type})
		case n.Nullable != c.Nullable:
			changes = append(changes, ColumnChange{Column: n.Name, How: "nullability_changed", OldType: c.Type, NewType: n.Type})
		}
	}
	for _, c := range cur {
		if _, ok := oldBy[strings.ToLower(c.Name)]; !ok {
			added = append(added, c)
		}
	}
	usedAdded := map[string]bool{}
	for _, d := range dropped {
		var match *warehouse.Column
		for i := range added {
			a := &added[i]
			if usedAdded[a.Name] || !strings.EqualFold(a.Type, d.Type) {
				continue
			}
			close := a.Position == d.Position || suggest.Levenshtein(strings.ToLower(a.Name), strings.ToLower(d.Name)) <= max(2, len(d.Name)/3)
			if close {
				match = a
				break
			}
		}
		if match != nil {
			usedAdded[match.Name] = true
			changes = append(changes, ColumnChange{Column: match.Name, How: "likely_renamed", OldType: d.Type, NewType: match.Type, RenamedFrom: d.Name})
			continue
		}
		changes = append(changes, ColumnChange{Column: d.Name, How: "dropped", OldType: d.Type})
	}
	for _, a := range added {
		if !usedAdded[a.Name] {
			changes = append(changes, ColumnChange{Column: a.Name, How: "added", NewType: a.Type})
		}
	}
	return changes
}
