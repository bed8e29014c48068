// Package sqlscan reads the fields a SQL statement uses, for field-level
// lineage: which columns a stream job reads, which known columns it
// mentions, and the expressions around one column. It is a scanner, not a
// parser: it never fails, and callers narrow its guesses with the columns
// they know.
package sqlscan

import (
	"strings"
)

// Expressions returns the expressions of a SQL statement that use a
// column: for each place the column is named (not as an output alias, not
// inside a string or comment), the innermost function call around it, such
// as SUM(response_bytes) or COALESCE(response_kib * 1024, response_bytes),
// with whitespace collapsed. Distinct expressions are returned in the
// order they appear, at most three; a column named only bare (SELECT
// response_bytes) gives none (Mentions tells whether it is named).
func Expressions(sqlText, column string) []string {
	column = strings.ToLower(strings.TrimSpace(column))
	if sqlText == "" || column == "" {
		return nil
	}
	toks := scanSQL(sqlText)
	var out []string
	add := func(e string) {
		for _, have := range out {
			if have == e {
				return
			}
		}
		out = append(out, e)
	}
	var opens []int // token index of each unclosed '('
	for i, t := range toks {
		switch {
		case t.punct == '(':
			opens = append(opens, i)
		case t.punct == ')':
			if len(opens) > 0 {
				opens = opens[:len(opens)-1]
			}
		case t.word && strings.ToLower(t.text) == column:
			if i > 0 && toks[i-1].word && !toks[i-1].quoted && strings.EqualFold(toks[i-1].text, "as") {
				continue // an output alias, not a read
			}
			for k := len(opens) - 1; k >= 0; k-- {
				o := opens[k]
				if o > 0 && toks[o-1].word && !toks[o-1].quoted {
					if end := matchParen(toks, o); end > o {
						if expr := collapseSpace(sqlText[toks[o-1].start:toks[end].end]); len(expr) <= 120 {
							add(expr)
						}
					}
					break
				}
			}
		}
		if len(out) == 3 {
			break
		}
	}
	return out
}

// sqlTok is a token of a SQL text with its byte span.
type sqlTok struct {
	text       string
	word       bool
	quoted     bool
	punct      byte
	start, end int
}

// scanSQL tokenizes SQL keeping positions: words (bare or quoted with " or
// `), numbers, string literals (one token each, punct '\”), and single
// punctuation; comments are skipped. Columns and the reader evidence
// both read SQL through it.
func scanSQL(s string) []sqlTok {
	var out []sqlTok
	isWord := func(c byte) bool {
		return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return out
			}
			i += j + 4
		case c == '\'':
			j := i + 1
			for j < len(s) {
				if s[j] == '\'' {
					if j+1 < len(s) && s[j+1] == '\'' {
						j += 2
						continue
					}
					break
				}
				j++
			}
			// A string literal is one token, so readers of the tokens can
			// tell a literal from nothing.
			out = append(out, sqlTok{punct: '\'', start: i, end: min(j+1, len(s))})
			i = j + 1
		case c == '"' || c == '`':
			// A doubled quote inside stands for the quote itself ("a""b"
			// names a"b); an empty name ("") is no identifier at all.
			var name strings.Builder
			j := i + 1
			for ; j < len(s); j++ {
				if s[j] == c {
					if j+1 < len(s) && s[j+1] == c {
						name.WriteByte(c)
						j++
						continue
					}
					break
				}
				name.WriteByte(s[j])
			}
			if j >= len(s) {
				return out
			}
			if name.Len() > 0 {
				out = append(out, sqlTok{text: name.String(), word: true, quoted: true, start: i, end: j + 1})
			}
			i = j + 1
		case isWord(c) && !(c >= '0' && c <= '9'):
			j := i
			for j < len(s) && isWord(s[j]) {
				j++
			}
			out = append(out, sqlTok{text: s[i:j], word: true, start: i, end: j})
			i = j
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && (isWord(s[j]) || s[j] == '.') {
				j++
			}
			out = append(out, sqlTok{text: s[i:j], start: i, end: j})
			i = j
		default:
			out = append(out, sqlTok{text: s[i : i+1], punct: c, start: i, end: i + 1})
			i++
		}
	}
	return out
}

// matchParen finds the ')' closing the '(' at token index open, or -1.
func matchParen(toks []sqlTok, open int) int {
	depth := 0
	for i := open; i < len(toks); i++ {
		switch toks[i].punct {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }
