// Package page is the one pagination convention every list-shaped tool
// answer follows: a `limit` with a default and a maximum, an opaque
// `cursor` in and `next_cursor` out, and the total.
//
// A list read from the store pages by key (ResolveKeyset, Cut): the cursor
// carries the sort key of the last item shown and a unique tiebreaker, and
// the next page is read as "after that key", so rows inserted or deleted
// between two pages never make the walk skip or repeat one. An offset
// (Resolve, Slice) is only for a list computed in memory from a fixed
// snapshot: one bound to a version that its cursor carries in its scope,
// or one read whole from an outside system on each call, whose order is a
// stable sort of what that system answered.
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
	"sort"
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
	// MaxCursorLen bounds a cursor's text (the tools' input schema says
	// the same): an offset cursor is about 30 characters, a keyset
	// cursor at most about 900 (two MaxKeyText values).
	MaxCursorLen = 1024
	// MaxKeyText bounds one text value of a keyset key, in bytes. A list
	// sorted by text that may be longer sorts by a bounded prefix and a
	// unique number after it (see lineage's neighbours).
	MaxKeyText = 320
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

// Page is a resolved request for one page: at most Limit items, starting
// after the item whose key is After (a keyset list; nil on the first
// page) or after skipping Offset items (an offset list).
type Page struct {
	Limit  int
	Offset int
	After  Key
	scope  string
	// keyset is the shape of a keyset list's key; nil for an offset list.
	keyset Keyset
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
	return p.resolve(def, max, nil, scope)
}

// ResolveKeyset checks the limit and the cursor of a list paged by key:
// ks is the shape of its sort key, the unique tiebreaker last. The page's
// After is the cursor's key (nil without a cursor), for the query to read
// the items after it.
func (p Params) ResolveKeyset(ks Keyset, scope ...string) (Page, error) {
	return p.resolve(DefaultLimit, MaxLimit, ks, scope)
}

// ResolveKeysetWith is ResolveKeyset with a tool's own default and maximum.
func (p Params) ResolveKeysetWith(def, max int, ks Keyset, scope ...string) (Page, error) {
	return p.resolve(def, max, ks, scope)
}

func (p Params) resolve(def, max int, ks Keyset, scope []string) (Page, error) {
	limit, err := Limit(p.Limit, def, max)
	if err != nil {
		return Page{}, err
	}
	key, err := currentKey()
	if err != nil {
		return Page{}, err
	}
	pg := Page{Limit: limit, scope: strings.Join(scope, "\x00"), keyset: ks, key: key}
	if p.Cursor == "" {
		return pg, nil
	}
	if ks != nil {
		pg.After, err = decodeKey(key, ks, pg.scope, p.Cursor)
	} else {
		pg.Offset, err = decode(key, pg.scope, p.Cursor)
	}
	if err != nil {
		return Page{}, err
	}
	return pg, nil
}

// Fetch is how many items to ask the store for: one more than the page,
// so the answer knows whether another page follows without a count.
func (pg Page) Fetch() int { return pg.Limit + 1 }

// Info describes the page just served: n items were returned out of
// total. A next cursor is set only when items remain.
func (pg Page) Info(n, total int) Info {
	pg.mustBeOffset()
	info := Info{Total: total}
	if pg.Offset+n < total {
		info.NextCursor = encode(pg.keyOrOwn(), pg.scope, pg.Offset+n)
	}
	return info
}

// Next is the cursor for the page after one that returned n items, or ""
// when more is false.
func (pg Page) Next(n int, more bool) string {
	pg.mustBeOffset()
	if !more {
		return ""
	}
	return encode(pg.keyOrOwn(), pg.scope, pg.Offset+n)
}

func (pg Page) mustBeOffset() {
	if pg.keyset != nil {
		panic("page: a keyset page (ResolveKeyset) is cut by key: use Cut, SliceAfter or NextAfter")
	}
}

// Slice pages a list already in memory (for lists computed rather than
// read, such as a ranked search or a graph walk): it returns the page and
// its Info.
func Slice[T any](pg Page, all []T) ([]T, Info) {
	pg.mustBeOffset()
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

// cursorEncoding is strict so a cursor has exactly one spelling: the
// lenient decoder ignores the unused low bits of the last character, and an
// edited last character would then decode to the same bytes and pass.
var cursorEncoding = base64.RawURLEncoding.Strict()

// ErrBadCursor is wrapped by every cursor error.
var ErrBadCursor = errors.New("not a next_cursor this list gave")

func keyID(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("dw/page key id"))
	return m.Sum(nil)[:idLen]
}

// Each cursor layout signs under its own domain, so one is never read as
// the other; the keyset domain also names the key's shape.
const (
	offsetDomain = "dw/page/v2"
	keysetDomain = "dw/page/v3 keyset "
)

func mac(key []byte, scope string, payload []byte) []byte {
	return macIn(key, offsetDomain, scope, payload)
}

func macIn(key []byte, domain, scope string, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(domain))
	m.Write([]byte{0})
	m.Write([]byte(scope))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)[:macLen]
}

// encode lays a cursor out as key id, offset (uvarint), MAC over both.
func encode(key []byte, scope string, offset int) string {
	payload := binary.AppendUvarint(keyID(key), uint64(offset))
	return cursorEncoding.EncodeToString(append(payload, mac(key, scope, payload)...))
}

func badCursor() error {
	return fmt.Errorf("cursor: %w (it was changed, or the other arguments differ): pass next_cursor exactly as the previous answer gave it, with the same other arguments, or omit cursor to start from the first page", ErrBadCursor)
}

// open checks a cursor's length, encoding and store, and returns its
// payload (key id included) and MAC.
func open(key []byte, cursor string) (payload, sum []byte, err error) {
	if len(cursor) > MaxCursorLen {
		return nil, nil, badCursor()
	}
	raw, err := cursorEncoding.DecodeString(cursor)
	if err != nil || len(raw) <= idLen+macLen {
		return nil, nil, badCursor()
	}
	if !bytes.Equal(raw[:idLen], keyID(key)) {
		return nil, nil, fmt.Errorf("cursor: %w: it was made for another Data Workers store (or is not a cursor at all), and a cursor pages only the store that gave it: omit cursor to start from the first page", ErrBadCursor)
	}
	return raw[:len(raw)-macLen], raw[len(raw)-macLen:], nil
}

func decode(key []byte, scope, cursor string) (int, error) {
	bad := badCursor()
	payload, sum, err := open(key, cursor)
	if err != nil {
		return 0, err
	}
	if !hmac.Equal(sum, mac(key, scope, payload)) {
		return 0, bad
	}
	off, n := binary.Uvarint(payload[idLen:])
	if n <= 0 || idLen+n != len(payload) || off > 1<<31 {
		return 0, bad
	}
	return int(off), nil
}

// Kind is the type of one value of a keyset list's sort key.
type Kind byte

const (
	// Int is an int64: a time in milliseconds, a sequence number, a score.
	Int Kind = 'i'
	// Text is a string of at most MaxKeyText bytes.
	Text Kind = 't'
)

// Keyset is the shape of a keyset list's sort key: the kind of each
// value in sort order, a unique tiebreaker last, so a key names exactly
// one position in the list.
type Keyset []Kind

// Key is a position in a keyset list: the sort values of one item, each
// an int64 or a string as the list's Keyset says.
type Key []any

// Int is the i-th value, which the Keyset says is an Int.
func (k Key) Int(i int) int64 { return k[i].(int64) }

// Text is the i-th value, which the Keyset says is Text.
func (k Key) Text(i int) string { return k[i].(string) }

// NextAfter is the cursor for the page after one whose last item has key
// last, or "" when more is false.
func (pg Page) NextAfter(last Key, more bool) string {
	if pg.keyset == nil {
		panic("page: NextAfter on an offset page: resolve it with ResolveKeyset")
	}
	if !more {
		return ""
	}
	return encodeKey(pg.keyOrOwn(), pg.keyset, pg.scope, last)
}

// Cut ends a page read from the store: fetched is what the query returned
// for Fetch() items after pg.After, in list order (so one more than the
// page when another follows), total the size of the whole list, and key
// gives an item's key. It returns the page and its Info.
func Cut[T any](pg Page, fetched []T, total int, key func(T) Key) ([]T, Info) {
	more := len(fetched) > pg.Limit
	if more {
		fetched = fetched[:pg.Limit:pg.Limit]
	}
	if fetched == nil {
		fetched = []T{}
	}
	info := Info{Total: total}
	if more {
		info.NextCursor = pg.NextAfter(key(fetched[len(fetched)-1]), true)
	}
	return fetched, info
}

// SliceAfter pages by key a list computed in memory on every call from
// what the store holds now (a ranked search, a feed's history): all is the
// whole list in its order, key gives an item's key and past reports
// whether an item comes after a key in that order. Items added or removed
// since the previous page do not shift the walk, as they would an offset.
func SliceAfter[T any](pg Page, all []T, key func(T) Key, past func(T, Key) bool) ([]T, Info) {
	lo := 0
	if pg.After != nil {
		lo = sort.Search(len(all), func(i int) bool { return past(all[i], pg.After) })
	}
	hi := min(lo+pg.Limit, len(all))
	return Cut(pg, all[lo:min(hi+1, len(all))], len(all), key)
}

// encodeKey lays a keyset cursor out as key id, each value (Int as a
// varint, Text as its length and bytes), MAC over both under the keyset
// domain.
func encodeKey(key []byte, ks Keyset, scope string, k Key) string {
	if len(k) != len(ks) {
		panic(fmt.Sprintf("page: key has %d values, its keyset %d", len(k), len(ks)))
	}
	payload := keyID(key)
	for i, kind := range ks {
		switch kind {
		case Int:
			payload = binary.AppendVarint(payload, k.Int(i))
		case Text:
			s := k.Text(i)
			if len(s) > MaxKeyText {
				panic(fmt.Sprintf("page: a key's text is %d bytes; at most %d (sort by a bounded prefix)", len(s), MaxKeyText))
			}
			payload = binary.AppendUvarint(payload, uint64(len(s)))
			payload = append(payload, s...)
		default:
			panic(fmt.Sprintf("page: unknown key kind %q", kind))
		}
	}
	return cursorEncoding.EncodeToString(append(payload, macIn(key, keysetDomain+string(ks), scope, payload)...))
}

func decodeKey(key []byte, ks Keyset, scope, cursor string) (Key, error) {
	payload, sum, err := open(key, cursor)
	if err != nil {
		return nil, err
	}
	if !hmac.Equal(sum, macIn(key, keysetDomain+string(ks), scope, payload)) {
		if hmac.Equal(sum, mac(key, scope, payload)) {
			// Signed by this store for this very list, in the layout
			// that carried an offset: a cursor given before the list
			// paged by key. Its offset means nothing to a keyset walk.
			return nil, fmt.Errorf("cursor: %w: it is an older cursor that counted items from the start, and this list now pages by position so rows added meanwhile are neither skipped nor repeated: omit cursor to start from the first page", ErrBadCursor)
		}
		return nil, badCursor()
	}
	rest := payload[idLen:]
	out := make(Key, len(ks))
	for i, kind := range ks {
		switch kind {
		case Int:
			v, n := binary.Varint(rest)
			if n <= 0 {
				return nil, badCursor()
			}
			out[i], rest = v, rest[n:]
		case Text:
			l, n := binary.Uvarint(rest)
			if n <= 0 || l > MaxKeyText || uint64(len(rest)-n) < l {
				return nil, badCursor()
			}
			out[i], rest = string(rest[n:n+int(l)]), rest[n+int(l):]
		}
	}
	if len(rest) != 0 {
		return nil, badCursor()
	}
	return out, nil
}
