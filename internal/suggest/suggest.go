// Package suggest ranks existing names by closeness to a mistyped one, so
// every "unknown X" error can say what the user probably meant.
package suggest

import (
	"sort"
	"strings"
)

// Closest returns up to n candidates nearest to want by edit distance
// (case-insensitive), for "did you mean" messages. A candidate containing
// want, or contained in it, ranks ahead of one that merely shares letters.
func Closest(want string, candidates []string, n int) []string {
	type scored struct {
		s string
		d int
	}
	w := strings.ToLower(want)
	out := make([]scored, 0, len(candidates))
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := Levenshtein(w, lc)
		if strings.Contains(lc, w) || strings.Contains(w, lc) {
			d /= 2
		}
		out = append(out, scored{c, d})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].d != out[j].d {
			return out[i].d < out[j].d
		}
		return out[i].s < out[j].s
	})
	if len(out) > n {
		out = out[:n]
	}
	res := make([]string, len(out))
	for i, s := range out {
		res[i] = s.s
	}
	if len(res) == 0 {
		return []string{"(none)"}
	}
	return res
}

// Levenshtein is the edit distance between two strings, in runes.
func Levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
