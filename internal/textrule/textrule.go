// Package textrule is the one rule for free text people are shown (a
// proposal's what and why, a recorded change's summary): which characters
// may not reach a screen as themselves, how they are written instead, and
// where the first one is. approvals checks and renders proposals with it
// and changelog refuses changes with it, so the text an agent may store is
// exactly the text every rendering can show.
package textrule

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Unshown reports whether r must not reach a screen as itself: C0 and C1
// controls and DEL, Unicode format characters (zero-width, bidi embeddings,
// overrides and isolates, the BOM), line and paragraph separators, and any
// other character Go does not call printable (the ASCII space excepted).
func Unshown(r rune) bool {
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) ||
		unicode.In(r, unicode.Zl, unicode.Zp) || (r != ' ' && !unicode.IsPrint(r))
}

// escapeRune is r as a Go escape (\n, \x1b, \u200b): visible, never acted on.
func escapeRune(r rune) string {
	q := strconv.QuoteRuneToASCII(r)
	return q[1 : len(q)-1]
}

// Line is s on one line as people are shown it: every character Unshown
// reports, a newline included, written as its escape.
func Line(s string) string {
	if strings.IndexFunc(s, Unshown) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if Unshown(r) {
			b.WriteString(escapeRune(r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// ContinuationMark starts every line of multi-line text after its first,
// after the caller's indent: no line of a why or an undo can begin where a
// label does.
const ContinuationMark = "> "

// Text is multi-line free text (why, undo, a reason) as people are shown
// it: split at newlines, each line escaped as Line does, and every line
// after the first written as indent, ContinuationMark, then the line.
func Text(s, indent string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Line(l)
		if i > 0 {
			lines[i] = indent + ContinuationMark + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

// First finds the first character of s the rule refuses (a newline is
// allowed when multiline): the character and its position, counted in
// characters from 1; ok is false when s is clean.
func First(s string, multiline bool) (r rune, pos int, ok bool) {
	for _, c := range s {
		pos++
		if Unshown(c) && !(multiline && c == '\n') {
			return c, pos, true
		}
	}
	return 0, 0, false
}

// Kind names what sort of character r is, for an error message.
func Kind(r rune) string {
	switch {
	case r == '\n' || r == '\r' || unicode.In(r, unicode.Zl, unicode.Zp):
		return "a line break"
	case unicode.IsControl(r):
		return "a control character"
	case unicode.Is(unicode.Cf, r):
		return "an invisible formatting character"
	}
	return "an unprintable character"
}

// quoteMax is how much of a value Quote shows.
const quoteMax = 80

// Quote is s as an error message quotes a value someone gave: Go-quoted
// (so nothing in it acts on a terminal) and, past its first 80 bytes, cut
// at a character boundary with its length said instead, so a hostile
// megabyte of input never comes back whole in the answer.
func Quote(s string) string {
	if len(s) <= quoteMax {
		return strconv.Quote(s)
	}
	cut := quoteMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}
