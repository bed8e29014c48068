package page

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestLimit(t *testing.T) {
	for _, c := range []struct {
		in, want int
		ok       bool
	}{{0, 50, true}, {1, 1, true}, {500, 500, true}, {-1, 0, false}, {501, 0, false}, {1 << 50, 0, false}} {
		got, err := Limit(c.in, DefaultLimit, MaxLimit)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("Limit(%d) = %d, %v; want %d ok=%v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "limit") {
			t.Errorf("error does not name the argument: %v", err)
		}
	}
}

// TestWalkVisitsEveryItemOnce pages through a list with the cursors the
// answers give and checks every item comes exactly once.
func TestWalkVisitsEveryItemOnce(t *testing.T) {
	all := make([]int, 1234)
	for i := range all {
		all[i] = i
	}
	seen := map[int]int{}
	p := Params{Limit: 100}
	pages := 0
	for {
		pg, err := p.Resolve("tool", "filter")
		if err != nil {
			t.Fatal(err)
		}
		items, info := Slice(pg, all)
		if info.Total != len(all) {
			t.Fatalf("total %d", info.Total)
		}
		for _, x := range items {
			seen[x]++
		}
		pages++
		if info.NextCursor == "" {
			break
		}
		p.Cursor = info.NextCursor
	}
	if pages != 13 || len(seen) != len(all) {
		t.Fatalf("pages %d, seen %d", pages, len(seen))
	}
	for x, n := range seen {
		if n != 1 {
			t.Fatalf("item %d seen %d times", x, n)
		}
	}
}

func TestCursorRejected(t *testing.T) {
	pg, _ := Params{Limit: 10}.Resolve("tool", "a")
	_, info := Slice(pg, make([]int, 30))
	good := info.NextCursor
	if good == "" {
		t.Fatal("no cursor")
	}
	if _, err := (Params{Cursor: good}).Resolve("tool", "a"); err != nil {
		t.Fatalf("good cursor refused: %v", err)
	}
	flip := []byte(good)
	flip[0] ^= 1
	for name, c := range map[string]string{
		"edited":      string(flip),
		"other query": good,
		"garbage":     "not a cursor!",
		"empty mac":   "AA",
		"huge":        strings.Repeat("A", 10000),
		"nul":         "\x00",
		"raw offset":  "99999999999",
		"negative":    "-1",
		"zero":        "0",
		"offset form": "offset=100",
	} {
		scope := "a"
		if name == "other query" {
			scope = "b"
		}
		_, err := (Params{Cursor: c}).Resolve("tool", scope)
		if !errors.Is(err, ErrBadCursor) {
			t.Errorf("%s cursor: err = %v, want ErrBadCursor", name, err)
		} else if !strings.Contains(err.Error(), "cursor") || !strings.Contains(err.Error(), "omit cursor") {
			t.Errorf("%s cursor: error not actionable: %v", name, err)
		}
	}
}

// TestStaleCursorPastTheEnd: a real cursor used after the list shrank
// below its offset gives an empty last page with the true total, never
// an error from the store or a slice out of range.
func TestStaleCursorPastTheEnd(t *testing.T) {
	pg, _ := Params{Limit: 10}.Resolve("tool")
	_, info := Slice(pg, make([]int, 100))
	pg, _ = Params{Limit: 10, Cursor: info.NextCursor}.Resolve("tool")
	pg2, _ := Params{Limit: 10, Cursor: pg.Next(10, true)}.Resolve("tool")
	items, info := Slice(pg2, make([]int, 5))
	if len(items) != 0 || info.Total != 5 || info.NextCursor != "" {
		t.Fatalf("items %d, info %+v", len(items), info)
	}
}

// TestHugeOffsetRefused: even a correctly signed cursor cannot carry an
// offset past what any list holds.
func TestHugeOffsetRefused(t *testing.T) {
	c := encode(ownKey, "tool", 1<<40)
	if _, err := (Params{Cursor: c}).Resolve("tool"); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("offset 2^40: %v", err)
	}
}

// useStore makes db's key the process's cursor key for the test.
func useStore(t *testing.T, db *store.DB) {
	t.Helper()
	SetKeySource(func() ([]byte, error) { return StoreKey(context.Background(), db) })
	t.Cleanup(func() { SetKeySource(nil) })
}

func walkCursor(t *testing.T) string {
	t.Helper()
	pg, err := Params{Limit: 10}.Resolve("tool", "a")
	if err != nil {
		t.Fatal(err)
	}
	_, info := Slice(pg, make([]int, 30))
	if info.NextCursor == "" {
		t.Fatal("no cursor")
	}
	return info.NextCursor
}

// TestCursorIsBoundToItsStore: a cursor pages only the store that gave
// it. Another store refuses it, saying so; the same store accepts it
// again after a restart (its key is kept in the store); a forgery under
// the old fixed key, under a guessed key, or with the real key id and an
// edited offset is refused.
func TestCursorIsBoundToItsStore(t *testing.T) {
	ctx := context.Background()
	a, b := storetest.SQLite(t), storetest.SQLite(t)
	ka, err := StoreKey(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	again, err := StoreKey(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := StoreKey(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ka, again) || len(ka) != 32 || bytes.Equal(ka, kb) {
		t.Fatalf("store keys: a %x, a again %x, b %x; want one fixed 32-byte key per store", ka, again, kb)
	}

	useStore(t, a)
	good := walkCursor(t)
	if pg, err := (Params{Limit: 10, Cursor: good}).Resolve("tool", "a"); err != nil || pg.Offset != 10 {
		t.Fatalf("own cursor: offset %d, %v", pg.Offset, err)
	}

	useStore(t, b)
	_, err = (Params{Cursor: good}).Resolve("tool", "a")
	if !errors.Is(err, ErrBadCursor) || !strings.Contains(err.Error(), "another Data Workers store") || !strings.Contains(err.Error(), "omit cursor") {
		t.Fatalf("cursor of store a on store b: %v; want ErrBadCursor naming another store", err)
	}

	useStore(t, a) // an agent restarted on store a
	if pg, err := (Params{Cursor: good}).Resolve("tool", "a"); err != nil || pg.Offset != 10 {
		t.Fatalf("cursor after restart: offset %d, %v", pg.Offset, err)
	}

	// The forgeries, each with an offset a caller might want.
	oldKey := []byte("dw/page/v1")
	legacy := func(off int) string {
		payload := binary.AppendUvarint(nil, uint64(off))
		m := hmac.New(sha256.New, oldKey)
		m.Write([]byte("tool\x00a\x00"))
		m.Write(payload)
		return base64.RawURLEncoding.EncodeToString(append(payload, m.Sum(nil)[:macLen]...))
	}
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	edited := append([]byte{}, raw[:idLen]...)
	edited = binary.AppendUvarint(edited, 25)
	edited = append(edited, raw[len(raw)-macLen:]...)
	for name, c := range map[string]string{
		"old fixed key":       legacy(20),
		"old key, new layout": encode(oldKey, "tool\x00a", 20),
		"guessed key":         encode([]byte("0123456789abcdef0123456789abcdef"), "tool\x00a", 20),
		"real id, new offset": base64.RawURLEncoding.EncodeToString(edited),
	} {
		pg, err := (Params{Cursor: c}).Resolve("tool", "a")
		if !errors.Is(err, ErrBadCursor) {
			t.Errorf("%s: offset %d accepted (err %v)", name, pg.Offset, err)
		}
	}
}

// TestStoreKeyFailureIsClearAndNotKept: a store that cannot give its key
// fails the call with the reason, and the next call tries again.
func TestStoreKeyFailureIsClearAndNotKept(t *testing.T) {
	db := storetest.SQLite(t)
	fail := true
	SetKeySource(func() ([]byte, error) {
		if fail {
			return nil, errors.New("store is down")
		}
		return StoreKey(context.Background(), db)
	})
	t.Cleanup(func() { SetKeySource(nil) })
	if _, err := (Params{}).Resolve("tool"); err == nil || !strings.Contains(err.Error(), "cursor key") || !strings.Contains(err.Error(), "store is down") {
		t.Fatalf("failing key source: %v", err)
	}
	fail = false
	if _, err := (Params{}).Resolve("tool"); err != nil {
		t.Fatalf("key source back: %v", err)
	}
}

// TestStoreKeyIsMadeOnce: two processes making the key at once share the
// first one stored; a mangled stored key is refused, not used.
func TestStoreKeyIsMadeOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		first, err := store.SettingOnce(ctx, db, "page.test", "one", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		second, err := store.SettingOnce(ctx, db, "page.test", "two", time.Now())
		if err != nil || first != "one" || second != "one" {
			t.Fatalf("SettingOnce: %q then %q (%v); want the first value kept", first, second, err)
		}
		if err := store.PutSetting(ctx, db, keySetting, "not hex", time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := StoreKey(ctx, db); err == nil || !strings.Contains(err.Error(), keySetting) {
			t.Fatalf("mangled key: %v", err)
		}
	})
}
