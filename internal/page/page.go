// Package page is the one pagination convention every list-shaped tool
// answer follows: a `limit` with a default and a maximum, an opaque
// `cursor` in and `next_cursor` out, and the total.
//
// A cursor is bound to the query it came from (the tool and its filters)
// and to the store it was made for, and carries an HMAC, so a cursor that
// was edited, invented, passed to a different query or taken from another
// Data Workers store is refused with a clear error instead of silently
// returning the wrong page.
//
// The HMAC key is the store's own secret (StoreKey: created once, kept in
// the store's settings), so a cursor survives a restart of the agent and
// works from every process sharing the store, and nobody who cannot read
// the store can make one. The binary names the key once at start-up
// (SetKeySource); a process that names none signs with a random key of
// its own, good for its lifetime only.
package page

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/store"
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
	// key signs the next cursor; nil (a Page built by hand) is the
	// process's own key.
	key []byte
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
	key, err := currentKey()
	if err != nil {
		return Page{}, err
	}
	pg := Page{Limit: limit, scope: strings.Join(scope, "\x00"), key: key}
	if p.Cursor != "" {
		off, err := decode(key, pg.scope, p.Cursor)
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
		info.NextCursor = encode(pg.keyOrOwn(), pg.scope, pg.Offset+n)
	}
	return info
}

// Next is the cursor for the page after one that returned n items, or ""
// when more is false.
func (pg Page) Next(n int, more bool) string {
	if !more {
		return ""
	}
	return encode(pg.keyOrOwn(), pg.scope, pg.Offset+n)
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

func (pg Page) keyOrOwn() []byte {
	if pg.key == nil {
		return ownKey
	}
	return pg.key
}

// ownKey signs cursors in a process that named no key source: random, so
// nobody can make a cursor it accepts, and no other process accepts its.
var ownKey = func() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(fmt.Sprintf("page: no randomness: %v", err))
	}
	return k
}()

var keys struct {
	sync.Mutex
	source func() ([]byte, error)
	key    []byte
}

// SetKeySource names where this process's cursor key comes from: the
// store it serves (a func calling StoreKey). It is read on the first
// Resolve and kept; a failed read is not kept, so the next call tries
// again. The binary calls it once at start-up, before serving.
func SetKeySource(f func() ([]byte, error)) {
	keys.Lock()
	keys.source, keys.key = f, nil
	keys.Unlock()
}

func currentKey() ([]byte, error) {
	keys.Lock()
	defer keys.Unlock()
	if keys.key != nil {
		return keys.key, nil
	}
	if keys.source == nil {
		return ownKey, nil
	}
	k, err := keys.source()
	if err != nil {
		return nil, fmt.Errorf("the store's cursor key: %w", err)
	}
	if len(k) < 16 {
		return nil, fmt.Errorf("the store's cursor key is %d bytes; at least 16 are required", len(k))
	}
	keys.key = k
	return k, nil
}

// keySetting is the store setting holding its cursor key, hex.
const keySetting = "page.cursor_key"

// StoreKey is db's cursor key: 32 random bytes made once, on first use,
// and kept in the store's settings, so every process on the store signs
// and accepts the same cursors and no other store accepts them. Two
// processes making it at once both end up with the one stored first.
func StoreKey(ctx context.Context, q store.Querier) ([]byte, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	v, err := store.SettingOnce(ctx, q, keySetting, hex.EncodeToString(fresh), time.Now())
	if err != nil {
		return nil, err
	}
	k, err := hex.DecodeString(v)
	if err != nil || len(k) < 16 {
		return nil, fmt.Errorf("store setting %s is not a hex key of at least 16 bytes; delete it and a new one is made (cursors given out before then stop working)", keySetting)
	}
	return k, nil
}

const (
	macLen = 12
	// idLen is the key's fingerprint a cursor carries, so a cursor from
	// another store is told apart from an edited one.
	idLen = 4
)

// ErrBadCursor is wrapped by every cursor error.
var ErrBadCursor = errors.New("not a next_cursor this list gave")

func keyID(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("dw/page key id"))
	return m.Sum(nil)[:idLen]
}

func mac(key []byte, scope string, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("dw/page/v2\x00"))
	m.Write([]byte(scope))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)[:macLen]
}

// encode lays a cursor out as key id, offset (uvarint), MAC over both.
func encode(key []byte, scope string, offset int) string {
	payload := binary.AppendUvarint(keyID(key), uint64(offset))
	return base64.RawURLEncoding.EncodeToString(append(payload, mac(key, scope, payload)...))
}

func decode(key []byte, scope, cursor string) (int, error) {
	bad := fmt.Errorf("cursor: %w (it was changed, or the other arguments differ): pass next_cursor exactly as the previous answer gave it, with the same other arguments, or omit cursor to start from the first page", ErrBadCursor)
	if len(cursor) > MaxCursorLen {
		return 0, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(raw) <= idLen+macLen {
		return 0, bad
	}
	if !bytes.Equal(raw[:idLen], keyID(key)) {
		return 0, fmt.Errorf("cursor: %w: it was made for another Data Workers store (or is not a cursor at all), and a cursor pages only the store that gave it: omit cursor to start from the first page", ErrBadCursor)
	}
	payload, sum := raw[:len(raw)-macLen], raw[len(raw)-macLen:]
	if !hmac.Equal(sum, mac(key, scope, payload)) {
		return 0, bad
	}
	off, n := binary.Uvarint(payload[idLen:])
	if n <= 0 || idLen+n != len(payload) || off > 1<<31 {
		return 0, bad
	}
	return int(off), nil
}
