// Package suggest ranks existing names by closeness to a mistyped one, so
// every "unknown X" error can say what the user probably meant.
//
// The cost is bounded whatever the input: a name is compared by its first
// MaxRunes runes, a candidate longer than MaxCandidateBytes is never
// suggested (nobody types it back, and it would bloat the error), at most
// MaxCandidates candidates are looked at, and the edit distance is computed
// in a band that shrinks to the n-th best distance found so far.
package suggest

import (
	"sort"
	"strings"
	"unicode/utf8"
)

const (
	// MaxRunes is how much of a name takes part in the comparison.
	MaxRunes = 128
	// MaxCandidateBytes is the longest candidate ever suggested.
	MaxCandidateBytes = 1024
	// MaxCandidates is how many candidates are looked at, in order.
	MaxCandidates = 100_000
)

// Closest returns up to n candidates nearest to want by edit distance
// (case-insensitive), for "did you mean" messages. A candidate containing
// want, or contained in it, ranks ahead of one that merely shares letters.
func Closest(want string, candidates []string, n int) []string {
	type scored struct {
		s string
		d int
	}
	if n < 1 {
		n = 1
	}
	w := fold(want)
	rw := []rune(w)
	best := make([]scored, 0, n+1) // the n best so far, sorted
	worse := func(a, b scored) bool {
		if a.d != b.d {
			return a.d > b.d
		}
		return a.s > b.s
	}
	for i, c := range candidates {
		if i >= MaxCandidates {
			break
		}
		if len(c) > MaxCandidateBytes {
			continue
		}
		lc := fold(c)
		contains := strings.Contains(lc, w) || strings.Contains(w, lc)
		// Only a distance that can still enter the top n is computed
		// exactly; beyond limit, BoundedLevenshtein stops early.
		limit := max(len(rw), utf8.RuneCountInString(lc))
		if len(best) == n {
			limit = best[n-1].d
			if contains {
				limit = 2*limit + 1
			}
		}
		d := boundedLevenshtein(rw, []rune(lc), limit)
		if d > limit {
			continue
		}
		if contains {
			d /= 2
		}
		s := scored{c, d}
		if len(best) == n && !worse(best[n-1], s) {
			continue
		}
		j := sort.Search(len(best), func(k int) bool { return worse(best[k], s) })
		best = append(best, scored{})
		copy(best[j+1:], best[j:])
		best[j] = s
		if len(best) > n {
			best = best[:n]
		}
	}
	if len(best) == 0 {
		return []string{"(none)"}
	}
	res := make([]string, len(best))
	for i, s := range best {
		res[i] = s.s
	}
	return res
}

// fold lower-cases the first MaxRunes runes of s, never touching the rest.
func fold(s string) string {
	n, i := 0, 0
	for i < len(s) && n < MaxRunes {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n++
	}
	return strings.ToLower(s[:i])
}

// Levenshtein is the edit distance between two strings, in runes. It is
// quadratic: callers comparing untrusted text should bound its length.
func Levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	return boundedLevenshtein(ra, rb, max(len(ra), len(rb)))
}

// boundedLevenshtein is the edit distance if it is at most limit, else any
// value above limit. Only cells within limit of the diagonal are computed
// (a path leaving the band costs more than limit), so the cost is
// O(len(a) * limit).
func boundedLevenshtein(a, b []rune, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	if len(b) == 0 {
		return len(a)
	}
	over := limit + 1
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = min(j, over)
	}
	for i := 1; i <= len(a); i++ {
		lo, hi := max(1, i-limit), min(len(b), i+limit)
		if lo > 1 {
			cur[lo-1] = over
		} else {
			cur[0] = min(i, over)
		}
		rowMin := cur[lo-1]
		for j := lo; j <= hi; j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			v := min(prev[j-1]+cost, cur[j-1]+1, over)
			if j < i+limit { // prev[j] is inside the previous row's band
				v = min(v, prev[j]+1)
			}
			cur[j] = v
			rowMin = min(rowMin, v)
		}
		if hi < len(b) {
			cur[hi+1] = over
		}
		if rowMin > limit {
			return over
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
