package changelog

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
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
// A diagnosis bounds a change's score from its key and reads in full
// (ByIDs) only the few whose bound could still place them: of a month of
// changes, most are unrelated to the symptoms or days old, and reading
// and decoding their other columns was most of a diagnosis's cost.
func EachKeyInWindow(ctx context.Context, q store.Querier, from, to time.Time, fn func(*Key) error) error {
	rows, err := q.QueryContext(ctx, keyWindowQuery, store.Millis(from), store.Millis(to))
	if err != nil {
		return fmt.Errorf("read changes: %w", err)
	}
	return eachKey(rows, fn)
}

// assetPairsQuery finds the changes that touched one of a list of assets
// (a JSON array, expanded by the dialect's table function, %s) in the
// window, as their times and ids: a seek per asset into
// incident_change_assets_at (migration 0018), a row for each asset a
// change touched. It has no aggregate, so its LIMIT stops the seeks as
// soon as that many rows are found, however many more there are.
const assetPairsQuery = `SELECT ca.at_ms, ca.change_id FROM %s JOIN incident_change_assets ca ON ca.asset = j.value
	WHERE ca.at_ms >= ? AND ca.at_ms < ? LIMIT ?`

// keyPairsQuery reads the keys of the changes given as [time, id] pairs
// (a JSON array, %s), a seek per pair: on SQLite into the covering index
// the window's read scans (%s names it; left to itself the planner looks
// each change up by rowid in the table, whose wider rows made it twice as
// slow), in the pairs' order, the index's, so its pages are read once.
const keyPairsQuery = `SELECT c.id * 4 + (CASE WHEN c.fields = '[]' THEN 2 ELSE 0 END) + (CASE WHEN c.state_skipped <> 0 THEN 1 ELSE 0 END), c.at_ms, c.kind, c.assets
	FROM %s JOIN incident_changes c %s ON c.at_ms = %s AND c.id = %s`

var (
	assetPairsSQLite   = fmt.Sprintf(assetPairsQuery, "json_each(?) j")
	assetPairsPostgres = fmt.Sprintf(assetPairsQuery, "jsonb_array_elements_text(CAST(? AS jsonb)) AS j(value)")
	keyPairsSQLite     = fmt.Sprintf(keyPairsQuery, "json_each(?) p", "INDEXED BY incident_changes_at_brief", "p.value ->> 0", "p.value ->> 1")
	keyPairsPostgres   = fmt.Sprintf(keyPairsQuery, "jsonb_array_elements(CAST(? AS jsonb)) AS p(value)", "",
		"CAST(p.value ->> 0 AS BIGINT)", "CAST(p.value ->> 1 AS BIGINT)")
)

// EachKeyOnAssets calls fn with the key of each change in [from, to) that
// touched one of assets, once per change, in no set order, and stops at
// fn's first error; the key is fn's only during the call, as in
// EachKeyInWindow. When the changes touched the assets more than maxRows
// times in all (a row per asset a change touched) it reads no key and
// returns false, having spent at most the seeks and maxRows+1 rows to
// find that out. A diagnosis reads the changes on or upstream of its
// symptoms this way when they are a few of a large window: its cost
// follows the assets and their changes, not the window. An asset id that
// is not valid UTF-8 text, or holds a NUL, is left out: no change is
// recorded on one (CleanAsset), and JSON would carry it altered.
func EachKeyOnAssets(ctx context.Context, q store.Querier, assets []string, from, to time.Time, maxRows int, fn func(*Key) error) (bool, error) {
	listed := make(map[string]bool, len(assets))
	unique := make([]string, 0, len(assets))
	for _, a := range assets {
		if !listed[a] && utf8.ValidString(a) && strings.IndexByte(a, 0) < 0 {
			listed[a] = true
			unique = append(unique, a)
		}
	}
	if len(unique) == 0 {
		return true, nil
	}
	// In the index's order, the seeks walk its pages once, left to right,
	// where in any order each would visit a page of its own: on a history
	// much larger than the page cache, that is a read of the file each.
	slices.Sort(unique)
	pairsQuery, keysQuery := assetPairsSQLite, keyPairsSQLite
	if q.Dialect() == store.Postgres {
		pairsQuery, keysQuery = assetPairsPostgres, keyPairsPostgres
	}
	most := max(0, maxRows)
	limit := int64(most)
	if limit < math.MaxInt64 {
		limit++ // one row past the most says there are more
	}
	rows, err := q.QueryContext(ctx, pairsQuery, mustJSON(unique), store.Millis(from), store.Millis(to), limit)
	if err != nil {
		return false, fmt.Errorf("read changes: %w", err)
	}
	var pairs [][2]int64
	for rows.Next() {
		var p [2]int64
		if err := rows.Scan(&p[0], &p[1]); err != nil {
			rows.Close()
			return false, fmt.Errorf("read change: %w", err)
		}
		pairs = append(pairs, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("read changes: %w", err)
	}
	if len(pairs) > most {
		return false, nil
	}
	if len(pairs) == 0 {
		return true, nil
	}
	// Each change once, in the index's order.
	slices.SortFunc(pairs, func(a, b [2]int64) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	pairs = slices.Compact(pairs)
	keys, err := q.QueryContext(ctx, keysQuery, mustJSON(pairs))
	if err != nil {
		return false, fmt.Errorf("read changes: %w", err)
	}
	return true, eachKey(keys, fn)
}

// CountWindow is how many changes lie in [from, to), counted through the
// time index without reading a row, and the log's last id: its size, near
// enough (ids are never reused, and nothing deletes changes), and the
// cut past which a later read finds only changes recorded since.
func CountWindow(ctx context.Context, q store.Querier, from, to time.Time) (n int, lastID int64, err error) {
	if err := q.QueryRowContext(ctx, countWindowQuery, store.Millis(from), store.Millis(to)).Scan(&n, &lastID); err != nil {
		return 0, 0, fmt.Errorf("count changes: %w", err)
	}
	return n, lastID, nil
}

const countWindowQuery = `SELECT COUNT(*), (SELECT COALESCE(MAX(id), 0) FROM incident_changes) FROM incident_changes WHERE at_ms >= ? AND at_ms < ?`

// eachKey reads keyWindowQuery's columns from rows into one reused key.
func eachKey(rows *sql.Rows, fn func(*Key) error) error {
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
