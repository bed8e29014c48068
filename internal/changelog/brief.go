package changelog

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

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
	var out []Change
	err := EachInWindowBrief(ctx, q, from, to, nil, func(c *Change) error {
		out = append(out, *c.Clone())
		return nil
	})
	return out, err
}

// EachInWindowBrief calls fn with each change in [from, to), in time then
// id order, read as LoadWindowBrief reads them, and stops at fn's first
// error. The change and its slices are fn's only during the call (the next
// row is read into them): Clone keeps one. A diagnosis scores each change
// as it is read and keeps a handful, so a month of changes is never held
// at once (holding 100k of them, sized by a count that scanned the index a
// second time, cost as much as reading them).
//
// skip, when not nil, is asked first about each change with its id, time,
// kind, assets and state_skipped but no fields: a change it skips is
// neither decoded further nor given to fn. Most changes in a diagnosis's
// window are settled by their assets alone.
func EachInWindowBrief(ctx context.Context, q store.Querier, from, to time.Time, skip func(*Change) bool, fn func(*Change) error) error {
	rows, err := q.QueryContext(ctx, briefWindowQuery, store.Millis(from), store.Millis(to))
	if err != nil {
		return fmt.Errorf("read changes: %w", err)
	}
	defer rows.Close()
	var c Change
	var atMs int64
	var kind, assets, fields string
	var skipped int
	var assetBuf []string
	var fieldBuf []FieldChange
	for rows.Next() {
		if err := rows.Scan(&c.ID, &atMs, &kind, &assets, &fields, &skipped); err != nil {
			return fmt.Errorf("read change: %w", err)
		}
		c.At, c.Kind, c.StateSkipped = store.FromMillis(atMs), ChangeKind(kind), skipped != 0
		var ok bool
		if c.Assets, ok = plainStrings(assetBuf[:0], assets); ok {
			assetBuf = c.Assets
		} else {
			c.Assets = nil
			if err := decodeJSON(assets, &c.Assets); err != nil {
				return fmt.Errorf("change %d assets: %w", c.ID, err)
			}
			if c.Assets == nil {
				c.Assets = []string{}
			}
		}
		if skip != nil {
			c.Fields = nil
			if skip(&c) {
				continue
			}
		}
		if c.Fields, ok = plainFields(fieldBuf[:0], fields); ok {
			fieldBuf = c.Fields
		} else {
			c.Fields = nil
			if err := decodeJSON(fields, &c.Fields); err != nil {
				return fmt.Errorf("change %d fields: %w", c.ID, err)
			}
		}
		if err := fn(&c); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Clone is a copy of the change that shares nothing with it.
func (c *Change) Clone() *Change {
	d := *c
	if c.Assets != nil {
		d.Assets = slices.Clone(c.Assets)
	}
	if c.Fields != nil {
		d.Fields = slices.Clone(c.Fields)
	}
	if c.Details != nil {
		d.Details = maps.Clone(c.Details)
	}
	return &d
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

// plainFields decodes a JSON array of field changes as RecordChange stores
// them (objects of the lower-case keys asset, name, how, new_name and
// detail, string values without escapes) appended to out, or returns false
// for anything else, which the caller decodes in full. A month of changes
// holds tens of thousands of field lists, and encoding/json's reflection
// was a fifth of reading them.
func plainFields(out []FieldChange, s string) ([]FieldChange, bool) {
	// encoding/json turns invalid UTF-8 into U+FFFD: left to it.
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' || strings.IndexByte(s, '\\') >= 0 || !utf8.ValidString(s) {
		return nil, false
	}
	body := trimWS(s[1 : len(s)-1])
	if out == nil {
		out = make([]FieldChange, 0, strings.Count(body, "{"))
	}
	for body != "" {
		fc, rest, ok := plainField(body)
		if !ok {
			return nil, false
		}
		out = append(out, fc)
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

// plainField decodes one object of plainFields from the start of s and
// returns what follows it.
func plainField(s string) (FieldChange, string, bool) {
	var fc FieldChange
	if s == "" || s[0] != '{' {
		return fc, s, false
	}
	s = trimWS(s[1:])
	if s != "" && s[0] == '}' {
		return fc, s[1:], true
	}
	for {
		var key, val string
		var ok bool
		if key, s, ok = plainString(s); !ok {
			return fc, s, false
		}
		if s = trimWS(s); s == "" || s[0] != ':' {
			return fc, s, false
		}
		if val, s, ok = plainString(trimWS(s[1:])); !ok {
			return fc, s, false
		}
		switch key {
		case "asset":
			fc.Asset = val
		case "name":
			fc.Name = val
		case "how":
			fc.How = FieldOp(val)
		case "new_name":
			fc.NewName = val
		case "detail":
			fc.Detail = val
		default:
			// encoding/json matches keys without regard to case and
			// skips unknown ones: left to it.
			return fc, s, false
		}
		if s = trimWS(s); s == "" {
			return fc, s, false
		}
		switch s[0] {
		case '}':
			return fc, s[1:], true
		case ',':
			s = trimWS(s[1:])
		default:
			return fc, s, false
		}
	}
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
