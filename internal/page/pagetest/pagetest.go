// Package pagetest checks a paged list against rows written while it is
// being walked: the case a keyset cursor exists for.
package pagetest

import (
	"slices"
	"testing"
)

// Fetch reads one page: the ids of its items in list order and its
// next_cursor ("" on the last page).
type Fetch func(cursor string) (ids []string, next string, err error)

// Walk follows next_cursor from the first page to the last, calling
// between after the first page (it inserts and deletes rows and returns
// the ids it deleted). It fails t unless no id comes twice and every id of
// the first full listing (all, read with one big page before the walk)
// that between did not delete comes, in the listing's order. It returns
// the ids seen, so a test can check where inserted rows landed.
func Walk(t testing.TB, all []string, fetch Fetch, between func() []string) []string {
	t.Helper()
	var seen []string
	cursor := ""
	var deleted []string
	for pages := 0; ; pages++ {
		if pages > len(all)+100 {
			t.Fatalf("walk did not end after %d pages", pages)
		}
		ids, next, err := fetch(cursor)
		if err != nil {
			t.Fatalf("page %d: %v", pages+1, err)
		}
		seen = append(seen, ids...)
		if pages == 0 {
			if next == "" {
				t.Fatalf("the first page is the last (%d items): the walk needs at least two pages", len(ids))
			}
			deleted = between()
		}
		if next == "" {
			break
		}
		cursor = next
	}
	count := map[string]int{}
	for _, id := range seen {
		if count[id]++; count[id] == 2 {
			t.Errorf("%s came twice in the walk %v", id, seen)
		}
	}
	var want, got []string
	for _, id := range all {
		if !slices.Contains(deleted, id) {
			want = append(want, id)
		}
	}
	for _, id := range seen {
		if slices.Contains(want, id) {
			got = append(got, id)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("the walk saw %v of the first listing; want %v (deleted meanwhile: %v)", got, want, deleted)
	}
	return seen
}
