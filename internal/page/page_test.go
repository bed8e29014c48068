package page

import (
	"errors"
	"strings"
	"testing"
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
	c := encode("tool", 1<<40)
	if _, err := (Params{Cursor: c}).Resolve("tool"); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("offset 2^40: %v", err)
	}
}
