// Package page is the one pagination convention every list-shaped tool
// answer follows: a `limit` with a default and a maximum, an opaque
// `cursor` in and `next_cursor` out, and the total.
//
// A cursor is bound to the query it came from (the tool and its filters)
// and carries a check value, so a cursor that was edited, invented, or
// passed to a different query is refused with a clear error instead of
// silently returning the wrong page. Cursors are not secrets: the check
// guards against mistakes, not attackers, and the key is fixed so a cursor
// survives a restart of the agent.
package page

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

const (
	// DefaultLimit is the page size when none is asked for.
	DefaultLimit = 50
	// MaxLimit is the largest page any tool returns.
	MaxLimit = 500
	// MaxCursorLen bounds a cursor's text; real cursors are far shorter.
	MaxCursorLen = 256
)

// Params is the paging part of a list tool's input. Embed it.
type Params struct {
	Limit  int    `json:"limit,omitempty" jsonschema:"items per page: 1 to 500 (default 50)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor from the previous answer, to get the next page; omit for the first page"`
}

// Info is the paging part of a list tool's answer. Embed it.
type Info struct {
	Total      int    `json:"total" jsonschema:"items in the whole list, across all pages"`
	NextCursor string `json:"next_cursor,omitempty" jsonschema:"pass as cursor to get the next page; absent on the last page"`
}

// Limit normalises a requested page size: 0 means def, anything below 0
// or above max is an error naming the argument and the valid range.
func Limit(n, def, max int) (int, error) {
	switch {
	case n == 0:
		return def, nil
	case n < 0 || n > max:
		return 0, fmt.Errorf("limit %d is out of range: use 1 to %d (omit it for %d)", n, max, def)
	}
	return n, nil
}

// Page is a resolved request for one page: skip Offset items, return at
// most Limit.
type Page struct {
	Limit  int
	Offset int
	scope  string
}

// Resolve checks the limit and the cursor. Scope names the query (the
// tool and every filter that changes the list); a cursor made for another
// scope is refused.
func (p Params) Resolve(scope ...string) (Page, error) {
	return p.ResolveWith(DefaultLimit, MaxLimit, scope...)
}

// ResolveWith is Resolve with a tool's own default and maximum.
func (p Params) ResolveWith(def, max int, scope ...string) (Page, error) {
	limit, err := Limit(p.Limit, def, max)
	if err != nil {
		return Page{}, err
	}
	pg := Page{Limit: limit, scope: strings.Join(scope, "\x00")}
	if p.Cursor != "" {
		off, err := decode(pg.scope, p.Cursor)
		if err != nil {
			return Page{}, err
		}
		pg.Offset = off
	}
	return pg, nil
}

// Fetch is how many items to ask the store for: one more than the page,
// so the answer knows whether another page follows without a count.
func (pg Page) Fetch() int { return pg.Limit + 1 }

// Info describes the page just served: n items were returned out of
// total. A next cursor is set only when items remain.
func (pg Page) Info(n, total int) Info {
	info := Info{Total: total}
	if pg.Offset+n < total {
		info.NextCursor = encode(pg.scope, pg.Offset+n)
	}
	return info
}

// Next is the cursor for the page after one that returned n items, or ""
// when more is false.
func (pg Page) Next(n int, more bool) string {
	if !more {
		return ""
	}
	return encode(pg.scope, pg.Offset+n)
}

// Slice pages a list already in memory (for lists computed rather than
// read, such as a ranked search or a graph walk): it returns the page and
// its Info.
func Slice[T any](pg Page, all []T) ([]T, Info) {
	total := len(all)
	lo := min(pg.Offset, total)
	hi := min(lo+pg.Limit, total)
	out := all[lo:hi:hi]
	if out == nil {
		out = []T{}
	}
	return out, pg.Info(len(out), total)
}

// key is fixed on purpose (see the package comment).
var key = []byte("dw/page/v1")

const macLen = 12

// ErrBadCursor is wrapped by every cursor error.
var ErrBadCursor = errors.New("not a next_cursor this list gave")

func mac(scope string, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(scope))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)[:macLen]
}

func encode(scope string, offset int) string {
	payload := binary.AppendUvarint(nil, uint64(offset))
	return base64.RawURLEncoding.EncodeToString(append(payload, mac(scope, payload)...))
}

func decode(scope, cursor string) (int, error) {
	bad := fmt.Errorf("cursor: %w (it was changed, or the other arguments differ): pass next_cursor exactly as the previous answer gave it, with the same other arguments, or omit cursor to start from the first page", ErrBadCursor)
	if len(cursor) > MaxCursorLen {
		return 0, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(raw) <= macLen {
		return 0, bad
	}
	payload, sum := raw[:len(raw)-macLen], raw[len(raw)-macLen:]
	if !hmac.Equal(sum, mac(scope, payload)) {
		return 0, bad
	}
	off, n := binary.Uvarint(payload)
	if n != len(payload) || off > 1<<31 {
		return 0, bad
	}
	return int(off), nil
}
