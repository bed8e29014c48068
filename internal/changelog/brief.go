package changelog

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dataworkers/dw/internal/store"
)

// keyWindowQuery is answered on SQLite from the covering index
// incident_changes_at_brief (migration 0015) alone: its columns lead that
// index, so no row is looked up in the table.
const keyWindowQuery = `SELECT id, at_ms, kind, assets FROM incident_changes
	WHERE at_ms >= ? AND at_ms < ? ORDER BY at_ms, id`

// EachKeyInWindow calls fn with the id, time, kind and assets of each
// change in [from, to), in time then id order, and stops at fn's first
// error. The assets slice is fn's only during the call (the next row is
// read into it). A diagnosis bounds every change's score from these alone and reads
// in full (ByIDs) only the few whose bound could still place them: of a
// month of changes, most are unrelated to the symptoms or days old, and
// reading and decoding their other columns was most of a diagnosis's cost.
func EachKeyInWindow(ctx context.Context, q store.Querier, from, to time.Time, fn func(id int64, at time.Time, kind ChangeKind, assets []string) error) error {
	rows, err := q.QueryContext(ctx, keyWindowQuery, store.Millis(from), store.Millis(to))
	if err != nil {
		return fmt.Errorf("read changes: %w", err)
	}
	defer rows.Close()
	var id, atMs int64
	var kind, raw string
	var buf, assets []string
	for rows.Next() {
		if err := rows.Scan(&id, &atMs, &kind, &raw); err != nil {
			return fmt.Errorf("read change: %w", err)
		}
		var ok bool
		if assets, ok = plainStrings(buf[:0], raw); ok {
			buf = assets
		} else {
			assets = nil
			if err := decodeJSON(raw, &assets); err != nil {
				return fmt.Errorf("change %d assets: %w", id, err)
			}
			if assets == nil {
				assets = []string{}
			}
		}
		if err := fn(id, store.FromMillis(atMs), ChangeKind(kind), assets); err != nil {
			return err
		}
	}
	return rows.Err()
}

// plainStrings decodes a JSON array of strings without escapes (how asset
// ids are stored) appended to out, or returns false for anything else,
// which the caller decodes in full. An empty array is an empty, non-nil
// slice, as encoding/json decodes it.
func plainStrings(out []string, s string) ([]string, bool) {
	// encoding/json turns invalid UTF-8 into U+FFFD: left to it.
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' || strings.IndexByte(s, '\\') >= 0 || !utf8.ValidString(s) {
		return nil, false
	}
	body := trimWS(s[1 : len(s)-1])
	if out == nil {
		out = make([]string, 0, strings.Count(body, ",")+1)
	}
	for body != "" {
		v, rest, ok := plainString(body)
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if body = trimWS(rest); body == "" {
			break
		}
		if body[0] != ',' {
			return nil, false
		}
		if body = trimWS(body[1:]); body == "" {
			return nil, false // a trailing comma is not JSON
		}
	}
	return out, true
}

// plainString reads a JSON string without escapes from the start of s.
func plainString(s string) (string, string, bool) {
	if s == "" || s[0] != '"' {
		return "", s, false
	}
	end := strings.IndexByte(s[1:], '"')
	if end < 0 {
		return "", s, false
	}
	v := s[1 : 1+end]
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 {
			return "", s, false // a control character is not JSON
		}
	}
	return v, s[2+end:], true
}

// trimWS trims JSON's white space (strings.TrimSpace trims more, such as
// a vertical tab, which JSON refuses).
func trimWS(s string) string {
	for s != "" && isWS(s[0]) {
		s = s[1:]
	}
	for s != "" && isWS(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func isWS(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }
