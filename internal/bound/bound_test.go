package bound

import (
	"strings"
	"testing"
)

func TestFirst(t *testing.T) {
	ten := func(int) int { return 10 }
	cases := []struct{ n, max, budget, want int }{
		{0, 5, 100, 0},
		{3, 5, 100, 3},
		{30, 5, 1000, 5}, // the count binds
		{30, 50, 95, 9},  // the budget binds: 9 items are 90 characters
		{30, 50, 5, 1},   // one long item is still named
		{30, 0, 1000, 0}, // nothing asked for
	}
	for _, c := range cases {
		if got := First(c.n, c.max, c.budget, ten); got != c.want {
			t.Errorf("First(%d, %d, %d) = %d, want %d", c.n, c.max, c.budget, got, c.want)
		}
	}
}

func TestHead(t *testing.T) {
	list := []string{strings.Repeat("a", 100), "b", "c"}
	if got := Head(list, 10, 50); len(got) != 1 {
		t.Errorf("Head kept %d items, want the one long item", len(got))
	}
	got := Head(list, 2, 1000)
	if len(got) != 2 || cap(got) != 2 {
		t.Errorf("Head kept %d (cap %d), want 2", len(got), cap(got))
	}
	// An append to the head never writes into the original list.
	_ = append(got, "x")
	if list[2] != "c" {
		t.Error("append to the head overwrote the list")
	}
}
