package suggest

import (
	"fmt"
	"strings"
	"testing"
)

// One stored 1 MiB id among ordinary names, and a 4 KiB unknown name: the
// case that took 45 s per get_lineage call when every pair was compared in
// full.
func BenchmarkClosestHugeNames(b *testing.B) {
	cands := []string{strings.Repeat("a", 1<<20)}
	for i := range 2000 {
		cands = append(cands, fmt.Sprintf("snowflake://analytics.usage.table_%04d", i))
	}
	want := strings.Repeat("q", 4<<10)
	b.ResetTimer()
	for range b.N {
		Closest(want, cands, 5)
	}
}

// The everyday case: a typo among 20k asset ids.
func BenchmarkClosestTypo(b *testing.B) {
	var cands []string
	for i := range 20000 {
		cands = append(cands, fmt.Sprintf("snowflake://analytics.usage.table_%05d", i))
	}
	b.ResetTimer()
	for range b.N {
		Closest("snowflake://analytics.usage.tabel_01234", cands, 5)
	}
}
