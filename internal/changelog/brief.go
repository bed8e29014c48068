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
// incident_changes_at_brief (migration 0015) alone, so no row is looked up
// in the table. Its first column carries two flags under the id (times
// four): 2 when the change lists no field changes (stored as "[]"), plus
// state_skipped. Worked out in the statement they cost no decoding, and in
// the id's column no column of their own: as a fifth column they made the
// 720 h diagnosis 20-30% slower through MCP.
const keyWindowQuery = `SELECT id * 4 + (CASE WHEN fields = '[]' THEN 2 ELSE 0 END) + (CASE WHEN state_skipped <> 0 THEN 1 ELSE 0 END), at_ms, kind, assets
	FROM incident_changes WHERE at_ms >= ? AND at_ms < ? ORDER BY at_ms, id`

// Key is what EachKeyInWindow reads of a change: enough to bound its score
// in a diagnosis.
type Key struct {
	ID     int64
	At     time.Time
	Kind   ChangeKind
	Assets []string
	// NoFields is set when the change lists no field changes; a change
	// whose fields were stored another way has it unset.
	NoFields     bool
	StateSkipped bool
}

// EachKeyInWindow calls fn with the key of each change in [from, to), in
// time then id order, and stops at fn's first error. The key and its
// assets are fn's only during the call (the next row is read into them).
// A diagnosis bounds every change's score from its key and reads in full
// (ByIDs) only the few whose bound could still place them: of a month of
// changes, most are unrelated to the symptoms or days old, and reading
// and decoding their other columns was most of a diagnosis's cost.
func EachKeyInWindow(ctx context.Context, q store.Querier, from, to time.Time, fn func(*Key) error) error {
	rows, err := q.QueryContext(ctx, keyWindowQuery, store.Millis(from), store.Millis(to))
	if err != nil {
		return fmt.Errorf("read changes: %w", err)
	}
	defer rows.Close()
	var k Key
	var idFlags, atMs int64
	var kind, raw string
	var buf []string
	for rows.Next() {
		if err := rows.Scan(&idFlags, &atMs, &kind, &raw); err != nil {
			return fmt.Errorf("read change: %w", err)
		}
		k.ID, k.NoFields, k.StateSkipped = idFlags>>2, idFlags&2 != 0, idFlags&1 != 0
		k.At, k.Kind = store.FromMillis(atMs), ChangeKind(kind)
		var ok bool
		if k.Assets, ok = plainStrings(buf[:0], raw); ok {
			buf = k.Assets
		} else {
			k.Assets = nil
			if err := decodeJSON(raw, &k.Assets); err != nil {
				return fmt.Errorf("change %d assets: %w", k.ID, err)
			}
			if k.Assets == nil {
				k.Assets = []string{}
			}
		}
		if err := fn(&k); err != nil {
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
