// Package sqlscan is the one SQL tokenizer (Tokens, and StrictTokens for
// text that is rewritten rather than read) and, on it, the field scanner
// behind field-level lineage: which columns a stream job reads, which
// known columns it mentions, and the expressions around one column. The
// field readers are a scanner, not a parser: they never fail, and callers
// narrow their guesses with the columns they know.
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
		case t.IsPunct('('):
			opens = append(opens, i)
		case t.IsPunct(')'):
			if len(opens) > 0 {
				opens = opens[:len(opens)-1]
			}
		case isName(t) && strings.ToLower(t.Value) == column:
			if i > 0 && toks[i-1].IsKeyword("as") {
				continue // an output alias, not a read
			}
			for k := len(opens) - 1; k >= 0; k-- {
				o := opens[k]
				if o > 0 && toks[o-1].Kind == Word {
					if end := matchParen(toks, o); end > o {
						if expr := collapseSpace(sqlText[toks[o-1].Start:toks[end].End]); len(expr) <= 120 {
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

// scanSQL is the lenient tokens of a SQL text its field readers look
// at: comments and whitespace dropped, and a quoted name that is empty
// ("" names nothing) or that the text ends inside dropped too, since
// neither is an identifier to report.
func scanSQL(s string) []Token {
	var out []Token
	for _, t := range Tokens(s, Generic) {
		if t.Trivia() || t.Kind == Quoted && (t.Value == "" || t.Open) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// matchParen finds the ')' closing the '(' at token index open, or -1.
func matchParen(toks []Token, open int) int {
	depth := 0
	for i := open; i < len(toks); i++ {
		switch {
		case toks[i].IsPunct('('):
			depth++
		case toks[i].IsPunct(')'):
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// isName reports whether a token names something: a word or a quoted name.
func isName(t Token) bool { return t.Kind == Word || t.Kind == Quoted }

func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }
