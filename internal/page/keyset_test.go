package page

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

var testKeyset = Keyset{Int, Text}

// TestKeyCursorRoundTrip: a key cursor gives back exactly its key, for
// negative and huge numbers, empty, binary and maximal text.
func TestKeyCursorRoundTrip(t *testing.T) {
	pg, err := Params{Limit: 5}.ResolveKeyset(testKeyset, "tool", "a")
	if err != nil || pg.After != nil {
		t.Fatalf("first page: %+v, %v", pg, err)
	}
	for _, k := range []Key{{int64(0), ""}, {int64(-1), "x"}, {int64(1 << 62), "\x00\xff"}, {int64(-1 << 63), strings.Repeat("é", MaxKeyText/2)}} {
		c := pg.NextAfter(k, true)
		if len(c) > MaxCursorLen {
			t.Errorf("cursor for %v is %d characters", k, len(c))
		}
		got, err := Params{Cursor: c}.ResolveKeyset(testKeyset, "tool", "a")
		if err != nil || !slices.Equal(got.After, k) || got.Limit != DefaultLimit {
			t.Errorf("key %q: got %q, %v", k, got.After, err)
		}
	}
	if pg.NextAfter(Key{int64(1), "x"}, false) != "" {
		t.Error("a cursor on the last page")
	}
}

// TestKeyCursorRefused: a key cursor edited, made for another list, for
// another key shape, in the old offset layout for this very list, or an
// offset cursor of another list, is refused with an error that says what
// to do; an old-layout cursor is named as such.
func TestKeyCursorRefused(t *testing.T) {
	pg, _ := Params{}.ResolveKeyset(testKeyset, "tool", "a")
	good := pg.NextAfter(Key{int64(42), "INC-7"}, true)
	old, _ := Params{}.Resolve("tool", "a")
	other, _ := Params{}.ResolveKeyset(Keyset{Int, Int}, "tool", "a")
	for name, c := range map[string]struct {
		cursor string
		ks     Keyset
		scope  string
	}{
		"other filter": {good, testKeyset, "b"},
		"other shape":  {other.NextAfter(Key{int64(42), int64(7)}, true), testKeyset, "a"},
		"read as ints": {good, Keyset{Int, Int}, "a"},
		"offset":       {old.Next(10, true), testKeyset, "a"},
		"garbage":      {"not a cursor", testKeyset, "a"},
		"too long":     {strings.Repeat("A", MaxCursorLen+1), testKeyset, "a"},
	} {
		_, err := Params{Cursor: c.cursor}.ResolveKeyset(c.ks, "tool", c.scope)
		if !errors.Is(err, ErrBadCursor) || !strings.Contains(err.Error(), "omit cursor") {
			t.Errorf("%s: %v; want ErrBadCursor saying to omit cursor", name, err)
		}
		if older := err != nil && strings.Contains(err.Error(), "older cursor"); older != (name == "offset") {
			t.Errorf("%s: %v; an older cursor is named so, and only that", name, err)
		}
	}
	// Every character edited is refused, the last one too: its unused low
	// bits must not let an edit decode to the same bytes.
	for i := range good {
		for _, d := range []byte{1, 2, 4} {
			edited := []byte(good)
			edited[i] ^= d
			if _, err := (Params{Cursor: string(edited)}).ResolveKeyset(testKeyset, "tool", "a"); !errors.Is(err, ErrBadCursor) {
				t.Errorf("character %d of %d edited (^%d): %v; want ErrBadCursor", i, len(good), d, err)
			}
		}
	}
	// A key cursor is no offset cursor either.
	if _, err := (Params{Cursor: good}).Resolve("tool", "a"); !errors.Is(err, ErrBadCursor) {
		t.Errorf("key cursor read as an offset: %v", err)
	}
}

// TestSliceAfter: an in-memory list paged by key ends each page after the
// previous one's last item even when items before it were removed and
// others added; the total is the list's as it stands.
func TestSliceAfter(t *testing.T) {
	ks := Keyset{Int}
	key := func(x int) Key { return Key{int64(x)} }
	past := func(x int, k Key) bool { return int64(x) > k.Int(0) }
	pg, _ := Params{Limit: 3}.ResolveKeyset(ks, "list")
	items, info := SliceAfter(pg, []int{1, 2, 3, 4, 5, 6, 7}, key, past)
	if !slices.Equal(items, []int{1, 2, 3}) || info.Total != 7 || info.NextCursor == "" {
		t.Fatalf("page 1: %v %+v", items, info)
	}
	pg, _ = Params{Limit: 3, Cursor: info.NextCursor}.ResolveKeyset(ks, "list")
	items, info = SliceAfter(pg, []int{0, 2, 4, 5, 6}, key, past)
	if !slices.Equal(items, []int{4, 5, 6}) || info.Total != 5 || info.NextCursor != "" {
		t.Fatalf("page 2 after writes: %v %+v", items, info)
	}
	pg, _ = Params{Limit: 3, Cursor: pg.NextAfter(key(9), true)}.ResolveKeyset(ks, "list")
	if items, info = SliceAfter(pg, []int{1, 2}, key, past); len(items) != 0 || items == nil || info.NextCursor != "" {
		t.Fatalf("past the end: %v %+v", items, info)
	}
}

// TestKeyTooLongIsABug: a key whose text passes the bound is a list that
// forgot to sort by a bounded prefix: it fails loudly, never yields a
// cursor that would be refused.
func TestKeyTooLongIsABug(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for an over-long key text")
		}
	}()
	pg, _ := Params{}.ResolveKeyset(testKeyset, "tool")
	pg.NextAfter(Key{int64(1), strings.Repeat("x", MaxKeyText+1)}, true)
}
