package changelog

import (
	"errors"
	"testing"

	"github.com/dataworkers/dw/internal/lineage"
)

// record_change's assets follow the one asset id text rule: a control
// character, an invisible format character or invalid UTF-8 is refused.
func TestCleanAssetFollowsTheIDRule(t *testing.T) {
	for _, c := range []struct {
		in string
		r  rune
	}{
		{"kafka://prod/a\x00", 0}, {"kafka://prod/a\x1b[2K", 0x1b}, {"airflow://dag/sync\u200b", 0x200b},
		{"airflow://dag/\u202esync", 0x202e}, {"kafka://prod/\ufeffa", 0xfeff}, {"kafka://prod/\xffa", 0xfffd},
	} {
		_, err := CleanAsset("assets[0]", c.in)
		want := "assets[0]: asset id " + (&lineage.IDTextError{Rune: c.r, Pos: posOf(c.in, c.r), BadUTF8: c.r == 0xfffd}).Reason()
		if !errors.Is(err, ErrInvalid) || err.Error() != want {
			t.Errorf("%q:\n got %v\nwant %s", c.in, err, want)
		}
	}
	if a, err := CleanAsset("assets[0]", " kafka://prod/café "); err != nil || a != "kafka://prod/café" {
		t.Errorf("a valid id: %q, %v", a, err)
	}
}

// posOf is where r (or, for U+FFFD, the first byte that is not UTF-8)
// stands, counted in characters from 1.
func posOf(s string, r rune) int {
	n := 0
	for _, x := range s {
		n++
		if x == r {
			return n
		}
	}
	return 0
}
