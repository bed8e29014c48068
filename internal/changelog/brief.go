package changelog

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// briefWindowQuery is answered on SQLite from the covering index
// incident_changes_at_brief (migration 0015) alone: its columns are these,
// in this order, so no row is looked up in the table.
const briefWindowQuery = `SELECT id, at_ms, kind, assets, fields, state_skipped FROM incident_changes
	WHERE at_ms >= ? AND at_ms < ? ORDER BY at_ms, id`

// LoadWindowBrief reads the changes in [from, to) with only what ranking
// them needs: id, time, kind, assets, fields and state_skipped. The words
// (key, system, actor, source, summary, details, recorded time) are left
// empty; ByID reads a change in full. A diagnosis over a month of changes
// scores every one and puts ten into words, and reading and decoding the
// words of all of them was most of its cost.
func LoadWindowBrief(ctx context.Context, q store.Querier, from, to time.Time) ([]Change, error) {
	var n int
	if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM incident_changes WHERE at_ms >= ? AND at_ms < ?",
		store.Millis(from), store.Millis(to)).Scan(&n); err != nil {
		return nil, fmt.Errorf("count changes: %w", err)
	}
	rows, err := q.QueryContext(ctx, briefWindowQuery, store.Millis(from), store.Millis(to))
	if err != nil {
		return nil, fmt.Errorf("read changes: %w", err)
	}
	defer rows.Close()
	// Sized by the count (a write racing it only costs a regrowth): a
	// month of changes grown by doubling copied the slice a dozen times.
	out := make([]Change, 0, n)
	for rows.Next() {
		var c Change
		var atMs int64
		var kind, assets, fields string
		var skipped int
		if err := rows.Scan(&c.ID, &atMs, &kind, &assets, &fields, &skipped); err != nil {
			return nil, fmt.Errorf("read change: %w", err)
		}
		c.At, c.Kind, c.StateSkipped = store.FromMillis(atMs), ChangeKind(kind), skipped != 0
		if c.Assets = plainStrings(assets); c.Assets == nil {
			if err := decodeJSON(assets, &c.Assets); err != nil {
				return nil, fmt.Errorf("change %d assets: %w", c.ID, err)
			}
			if c.Assets == nil {
				c.Assets = []string{}
			}
		}
		if fields == "[]" {
			c.Fields = []FieldChange{}
		} else if err := decodeJSON(fields, &c.Fields); err != nil {
			return nil, fmt.Errorf("change %d fields: %w", c.ID, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// plainStrings decodes a JSON array of strings without escapes (how asset
// ids are stored), or returns nil for anything else, which the caller
// decodes in full.
func plainStrings(s string) []string {
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' || strings.IndexByte(s, '\\') >= 0 {
		return nil
	}
	body := strings.TrimSpace(s[1 : len(s)-1])
	if body == "" {
		return []string{}
	}
	out := make([]string, 0, strings.Count(body, ",")+1)
	for body != "" {
		if body[0] != '"' {
			return nil
		}
		end := strings.IndexByte(body[1:], '"')
		if end < 0 {
			return nil
		}
		out = append(out, body[1:1+end])
		body = strings.TrimSpace(body[2+end:])
		if body == "" {
			break
		}
		if body[0] != ',' {
			return nil
		}
		body = strings.TrimSpace(body[1:])
		if body == "" {
			return nil // a trailing comma is not JSON
		}
	}
	return out
}
