// Package bound keeps a tool's answer readable however large what it
// reports is: a list is cut to its first items within a count and a budget
// of characters, the answer says how many there were, and where the rest
// is (a paged tool, or a dw command). The cut is made where the list is
// made, in the domain result, so every tool and command showing it shows
// the same bounded list; what is stored keeps everything.
package bound

import "encoding/json"

// Answer is the most characters a tool's answer (its text and structured
// output together) may hold: about 20k tokens. Claude Code warns above
// 25k tokens and cuts the answer; a model cannot use more.
const Answer = 80_000

// First is how many of n items (sized by size, in characters) fit in max
// items and budget characters: at least one when there is one, so a long
// item is still named.
func First(n, max, budget int, size func(i int) int) int {
	used := 0
	for i := 0; i < n && i < max; i++ {
		used += size(i)
		if used > budget && i > 0 {
			return i
		}
	}
	return min(n, max)
}

// Head is the first items of list within max items and budget characters
// of JSON, as First counts them, sharing list's backing array.
func Head[T any](list []T, max, budget int) []T {
	k := First(len(list), max, budget, func(i int) int { return JSONLen(list[i]) })
	return list[:k:k]
}

// JSONLen is how many characters v takes in an answer's JSON.
func JSONLen(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b) + 1 // and its comma
}
