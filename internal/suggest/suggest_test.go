package suggest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// plain is the textbook full-matrix edit distance, the reference.
func plain(a, b []rune) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
		}
	}
	return d[len(a)][len(b)]
}

func randWord(r *rand.Rand, n int) string {
	const letters = "abcé_."
	rs := []rune(letters)
	var b strings.Builder
	for range r.IntN(n + 1) {
		b.WriteRune(rs[r.IntN(len(rs))])
	}
	return b.String()
}

func TestBoundedLevenshteinAgreesWithTheTextbook(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		a, b := []rune(randWord(r, 12)), []rune(randWord(r, 12))
		want := plain(a, b)
		for limit := 0; limit <= 13; limit++ {
			got := boundedLevenshtein(a, b, limit)
			if (want <= limit && got != want) || (want > limit && got <= limit) {
				t.Fatalf("%q %q limit %d: got %d, want %d", string(a), string(b), limit, got, want)
			}
		}
	}
}

// reference is Closest without any bound, for names under MaxRunes.
func reference(want string, cands []string, n int) []string {
	type sc struct {
		s string
		d int
	}
	w := strings.ToLower(want)
	var out []sc
	for _, c := range cands {
		lc := strings.ToLower(c)
		d := plain([]rune(w), []rune(lc))
		if strings.Contains(lc, w) || strings.Contains(w, lc) {
			d /= 2
		}
		out = append(out, sc{c, d})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].d != out[j].d {
			return out[i].d < out[j].d
		}
		return out[i].s < out[j].s
	})
	var res []string
	for _, s := range out[:min(n, len(out))] {
		res = append(res, s.s)
	}
	if len(res) == 0 {
		return []string{"(none)"}
	}
	return res
}

func TestClosestMatchesTheUnboundedRanking(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		var cands []string
		for range r.IntN(30) {
			cands = append(cands, randWord(r, 10))
		}
		want := randWord(r, 10)
		n := 1 + r.IntN(5)
		got, exp := Closest(want, cands, n), reference(want, cands, n)
		// Equal distances tie-break by name, so the lists match exactly
		// except for duplicate candidates, which may repeat.
		if !slices.Equal(got, exp) {
			t.Fatalf("Closest(%q, %q, %d) = %q, want %q", want, cands, n, got, exp)
		}
	}
}

func TestClosestExamples(t *testing.T) {
	names := []string{"usage.usage_hourly", "usage.usage_daily", "billing.invoices", "loyalty.points"}
	if got := Closest("usage_hourly", names, 1); got[0] != "usage.usage_hourly" {
		t.Errorf("got %q", got)
	}
	if got := Closest("billing.invoice", names, 2); got[0] != "billing.invoices" {
		t.Errorf("got %q", got)
	}
	if got := Closest("x", nil, 3); !slices.Equal(got, []string{"(none)"}) {
		t.Errorf("no candidates: %q", got)
	}
}

// The case from the issue: bounded whatever the sizes, and the 1 MiB name
// is never offered back.
func TestClosestHugeNamesAreCheap(t *testing.T) {
	cands := []string{strings.Repeat("a", 1<<20), strings.Repeat("q", 5000)}
	for i := range 2000 {
		cands = append(cands, fmt.Sprintf("snowflake://analytics.usage.table_%04d", i))
	}
	start := time.Now()
	got := Closest(strings.Repeat("q", 16<<10), cands, 5)
	if el := time.Since(start); el > 10*time.Second { // the unbounded ranking took minutes
		t.Errorf("took %v", el)
	}
	for _, g := range got {
		if len(g) > MaxCandidateBytes {
			t.Errorf("suggested a %d-byte name", len(g))
		}
	}
}
