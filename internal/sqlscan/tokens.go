package sqlscan

import (
	"fmt"
	"strings"
)

// One tokenizer serves two readers with opposite needs. Lineage reads SQL
// it did not write and must never fail on it (Tokens): a string, name or
// comment the text ends inside still becomes a token, marked Open.
// Verification rewrites a team's approved SQL to read a replacement table
// (StrictTokens): there, whatever cannot be read for certain is an error,
// never a guess. Both modes share every rule below, so on a text the
// strict mode accepts they give the same tokens; and every byte of the
// input belongs to exactly one token (whitespace and comments included),
// so a rewrite can splice between token boundaries and keep the rest of
// the text byte for byte.

// Kind is what a token is.
type Kind uint8

const (
	// Space is a run of whitespace.
	Space Kind = iota + 1
	// Comment is a -- or /* */ comment (and # in BigQuery).
	Comment
	// Word is a bare identifier or keyword.
	Word
	// Quoted is a quoted identifier; Value is the name unescaped.
	Quoted
	// String is a string literal; Value is its content.
	String
	// Number is a numeric literal as written.
	Number
	// Punct is one byte of punctuation or operator.
	Punct
)

// Token is one token of a SQL text.
type Token struct {
	Kind Kind
	// Text is the token as written: the input's bytes Start to End.
	Text string
	// Value is the name of a Quoted token and the content of a String,
	// with doubled quotes undone; for every other kind it is Text.
	Value      string
	Start, End int
	// Open marks a string, quoted name or comment the input ends inside.
	// Only Tokens produces one; StrictTokens refuses such a text.
	Open bool
}

// Trivia reports whether the token is whitespace or a comment, which no
// reader of the statement's structure looks at.
func (t Token) Trivia() bool { return t.Kind == Space || t.Kind == Comment }

// IsPunct reports whether the token is the punctuation byte c.
func (t Token) IsPunct(c byte) bool { return t.Kind == Punct && t.Text[0] == c }

// IsKeyword reports whether the token is the bare word w, in any case.
func (t Token) IsKeyword(w string) bool { return t.Kind == Word && strings.EqualFold(t.Text, w) }

// Dialect is how a text quotes names and strings.
type Dialect uint8

const (
	// Generic reads SQL of unknown origin (Flink SQL, dbt models across
	// warehouses): " and ` both quote names, ' quotes strings.
	Generic Dialect = iota
	// ANSI is DuckDB, Snowflake and PostgreSQL: " quotes names, ' strings;
	// a backtick is punctuation.
	ANSI
	// BigQuery (GoogleSQL): ` quotes names (a whole dotted path may sit in
	// one pair), ' and " quote strings, tripled for multi-line strings, a
	// backslash escapes inside them, and # starts a line comment.
	BigQuery
)

// Error is why StrictTokens refused a text.
type Error struct {
	// Offset is the byte where the unreadable part starts.
	Offset int
	// Reason says what was found, as a noun phrase ("an unterminated quote").
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("%s at byte %d", e.Reason, e.Offset) }

// Tokens reads s leniently: it never fails. A string, quoted name,
// comment or dollar-quoted string the text ends inside runs to the end
// of the input and is marked Open; a block comment ends at the first */;
// a backslash is an ordinary byte except in BigQuery, where it escapes
// the next one.
func Tokens(s string, d Dialect) []Token {
	toks, _ := scan(s, d, false)
	return toks
}

// StrictTokens reads s and refuses, with an *Error, anything whose
// tokens could differ between the engines it may be sent to or that it
// cannot read for certain: an unterminated string, quoted name or
// comment, a block comment opened inside another (PostgreSQL and DuckDB
// nest them, others do not), dollar quoting, and a backslash inside a
// string or quoted name (an escape in some engines and not in others).
// What it accepts, it tokenizes exactly as Tokens does.
func StrictTokens(s string, d Dialect) ([]Token, error) { return scan(s, d, true) }

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdentByte(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' || c == '$' }

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// run is where the bytes from j on stop being in the class.
func run(s string, j int, in func(byte) bool) int {
	for j < len(s) && in(s[j]) {
		j++
	}
	return j
}

func scan(s string, d Dialect, strict bool) ([]Token, error) {
	var out []Token
	emit := func(k Kind, start, end int, value string, open bool) {
		if k != Quoted && k != String {
			value = s[start:end]
		}
		out = append(out, Token{Kind: k, Text: s[start:end], Value: value, Start: start, End: end, Open: open})
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case isSpace(c):
			j := run(s, i+1, isSpace)
			emit(Space, i, j, "", false)
			i = j
		case strings.HasPrefix(s[i:], "--") || d == BigQuery && c == '#':
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				j = len(s) - i
			}
			emit(Comment, i, i+j, "", false)
			i += j
		case strings.HasPrefix(s[i:], "/*"):
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				if strict {
					return nil, &Error{i, "an unterminated /* comment"}
				}
				emit(Comment, i, len(s), "", true)
				i = len(s)
				continue
			}
			if strict && strings.Contains(s[i+2:i+2+j], "/*") {
				return nil, &Error{i, "a /* comment opened inside another, which engines end in different places"}
			}
			emit(Comment, i, i+j+4, "", false)
			i += j + 4
		case c == '$' && i+1 < len(s) && (s[i+1] == '$' || isIdentStart(s[i+1])):
			if strict {
				return nil, &Error{i, "dollar quoting ($$ or $name), which is not read strictly"}
			}
			i = dollar(s, i, emit)
		case c == '\'' || c == '"' && d == BigQuery:
			n, err := quoted(s, i, d, strict, String, emit)
			if err != nil {
				return nil, err
			}
			i = n
		case c == '"' || c == '`' && d != ANSI:
			n, err := quoted(s, i, d, strict, Quoted, emit)
			if err != nil {
				return nil, err
			}
			i = n
		case isIdentStart(c):
			j := run(s, i+1, isIdentByte)
			emit(Word, i, j, "", false)
			i = j
		case c >= '0' && c <= '9':
			j := run(s, i+1, func(c byte) bool { return isIdentByte(c) || c == '.' })
			emit(Number, i, j, "", false)
			i = j
		default:
			emit(Punct, i, i+1, "", false)
			i++
		}
	}
	return out, nil
}

// dollar reads, leniently, what starts with $ at i and a name byte or a
// second $: a dollar-quoted string $tag$...$tag$ (PostgreSQL, DuckDB,
// Snowflake), or else a word such as $name. It returns where it ended.
func dollar(s string, i int, emit func(Kind, int, int, string, bool)) int {
	j := i + 1
	for j < len(s) && isIdentByte(s[j]) && s[j] != '$' {
		j++
	}
	if j < len(s) && s[j] == '$' {
		tag := s[i : j+1]
		body := j + 1
		if k := strings.Index(s[body:], tag); k >= 0 {
			emit(String, i, body+k+len(tag), s[body:body+k], false)
			return body + k + len(tag)
		}
		emit(String, i, len(s), s[body:], true)
		return len(s)
	}
	j = run(s, j, isIdentByte)
	emit(Word, i, j, "", false)
	return j
}

// quoted reads the string or name opened at i, with the quote doubled as
// an escape (and, in BigQuery, a tripled quote opening a string that only
// a tripled quote closes), and returns where it ended.
func quoted(s string, i int, d Dialect, strict bool, k Kind, emit func(Kind, int, int, string, bool)) (int, error) {
	q := s[i]
	if d == BigQuery && k == String && strings.HasPrefix(s[i:], strings.Repeat(string(q), 3)) {
		return tripleQuoted(s, i, strict, emit)
	}
	var b strings.Builder
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '\\' && strict:
			return 0, &Error{j, "a backslash inside a quoted string or name, which engines read differently"}
		case c == '\\' && d == BigQuery && j+1 < len(s):
			b.WriteString(s[j : j+2]) // an escape sequence, kept as written
			j++
		case c == q && j+1 < len(s) && s[j+1] == q:
			b.WriteByte(q)
			j++
		case c == q:
			emit(k, i, j+1, b.String(), false)
			return j + 1, nil
		default:
			b.WriteByte(c)
		}
	}
	if strict {
		return 0, &Error{i, "an unterminated quote"}
	}
	emit(k, i, len(s), b.String(), true)
	return len(s), nil
}

// tripleQuoted reads a BigQuery string in tripled quotes (' or ") opened at i.
func tripleQuoted(s string, i int, strict bool, emit func(Kind, int, int, string, bool)) (int, error) {
	closer := s[i : i+3]
	for j := i + 3; j < len(s); j++ {
		switch {
		case s[j] == '\\' && strict:
			return 0, &Error{j, "a backslash inside a quoted string or name, which engines read differently"}
		case s[j] == '\\':
			j++
		case strings.HasPrefix(s[j:], closer):
			emit(String, i, j+3, s[i+3:j], false)
			return j + 3, nil
		}
	}
	if strict {
		return 0, &Error{i, "an unterminated quote"}
	}
	emit(String, i, len(s), s[i+3:], true)
	return len(s), nil
}
