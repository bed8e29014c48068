package textrule

import (
	"strings"
	"testing"
)

// First finds the first refused character by its position in characters
// (not bytes); a newline passes only in multi-line text.
func TestFirst(t *testing.T) {
	for _, c := range []struct {
		s         string
		multiline bool
		r         rune
		pos       int
		ok        bool
	}{
		{"plain café → ok", false, 0, 0, false},
		{"é\x1b[8m", false, 0x1b, 2, true},
		{"a\nb", false, '\n', 2, true},
		{"a\nb", true, 0, 0, false},
		{"a\nb\u200b", true, 0x200b, 4, true},
		{"x\u2028", true, 0x2028, 2, true},
		{"\xff", false, 0xfffd, 1, true},
	} {
		r, pos, ok := First(c.s, c.multiline)
		if r != c.r || pos != c.pos || ok != c.ok {
			t.Errorf("First(%q, %v) = %U %d %v; want %U %d %v", c.s, c.multiline, r, pos, ok, c.r, c.pos, c.ok)
		}
	}
	if got := Text("a\x1b\nb\u202e", "  "); got != `a\x1b`+"\n  > "+`b\u202e` {
		t.Errorf("Text = %q", got)
	}
}

// TestQuote: a value is quoted whole while short; past 80 bytes it is cut
// at a character boundary and its length said, however long it is.
func TestQuote(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"orders", `"orders"`},
		{"a\nb\x1b", `"a\nb\x1b"`},
		{strings.Repeat("x", 80), `"` + strings.Repeat("x", 80) + `"`},
		{strings.Repeat("x", 79) + "éé", `"` + strings.Repeat("x", 79) + `"… (83 bytes)`},
		{strings.Repeat("y", 1<<20), `"` + strings.Repeat("y", 80) + `"… (1048576 bytes)`},
	} {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%.20q…) = %q, want %q", c.in, got, c.want)
		}
	}
}
