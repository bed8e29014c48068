package remediate

import (
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/warehouse"
)

// A metric's SQL is the team's own. To read a replacement table with it,
// verification never edits that text as a string: it tokenizes it (strings,
// quoted identifiers and comments kept whole), finds the table references
// in FROM and JOIN positions that name the replaced table, and swaps
// exactly those tokens for the replacement's catalog name quoted by the
// warehouse's dialect, aliased to the old name when the query had no alias
// so column qualifiers still resolve. Anything it cannot read for certain
// (the name in a string literal, a fully qualified column, a CTE of the
// same name, time travel, dollar quoting, backslash escapes) is refused:
// the metric is then "not verifiable yet" rather than read wrongly. The
// warehouse still validates the result as one read-only query.

type tokKind int

const (
	tIdent  tokKind = iota // bare identifier or keyword
	tQuoted                // quoted identifier; val is unescaped
	tString                // string literal; val is its content
	tOther                 // number or punctuation
)

type sqlTok struct {
	kind       tokKind
	val        string
	start, end int // byte range in the SQL
}

// unsubstitutable says why a metric's SQL cannot be pointed at the
// replacement safely.
type unsubstitutable struct{ why string }

func (u *unsubstitutable) Error() string { return u.why }

func refuseSubst(format string, args ...any) error {
	return &unsubstitutable{fmt.Sprintf(format, args...)}
}

func tokenize(sql string, d warehouse.Dialect) ([]sqlTok, error) {
	bq := d.Name() == "bigquery"
	var out []sqlTok
	isIdentStart := func(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' || c == '$' }
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case strings.HasPrefix(sql[i:], "--") || bq && c == '#':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case strings.HasPrefix(sql[i:], "/*"):
			j := strings.Index(sql[i+2:], "*/")
			if j < 0 {
				return nil, refuseSubst("its SQL has an unterminated /* comment")
			}
			i += j + 4
		case c == '$' && i+1 < len(sql) && (sql[i+1] == '$' || isIdentStart(sql[i+1])):
			return nil, refuseSubst("its SQL uses dollar quoting, which is not read for substitution")
		case c == '\'' || c == '"' && bq:
			val, n, err := quoted(sql[i:], c)
			if err != nil {
				return nil, err
			}
			out = append(out, sqlTok{kind: tString, val: val, start: i, end: i + n})
			i += n
		case c == '"' || c == '`' && bq:
			val, n, err := quoted(sql[i:], c)
			if err != nil {
				return nil, err
			}
			out = append(out, sqlTok{kind: tQuoted, val: val, start: i, end: i + n})
			i += n
		case isIdentStart(c):
			j := i + 1
			for j < len(sql) && isIdent(sql[j]) {
				j++
			}
			out = append(out, sqlTok{kind: tIdent, val: sql[i:j], start: i, end: j})
			i = j
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(sql) && (isIdent(sql[j]) || sql[j] == '.') {
				j++
			}
			out = append(out, sqlTok{kind: tOther, val: sql[i:j], start: i, end: j})
			i = j
		default:
			out = append(out, sqlTok{kind: tOther, val: sql[i : i+1], start: i, end: i + 1})
			i++
		}
	}
	return out, nil
}

// quoted reads a literal or identifier opened by q, with q doubled as the
// escape; a backslash makes it ambiguous across dialects, so it is refused.
func quoted(s string, q byte) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			return "", 0, refuseSubst("its SQL has a backslash inside a quoted string or name")
		case q:
			if i+1 < len(s) && s[i+1] == q {
				b.WriteByte(q)
				i++
				continue
			}
			return b.String(), i + 1, nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", 0, refuseSubst("its SQL has an unterminated quote")
}

// notAlias are the words that may follow a table reference without being
// its alias.
var notAlias = map[string]bool{
	"WHERE": true, "GROUP": true, "ORDER": true, "HAVING": true, "LIMIT": true, "JOIN": true, "LEFT": true, "RIGHT": true,
	"INNER": true, "OUTER": true, "FULL": true, "CROSS": true, "ON": true, "USING": true, "UNION": true, "EXCEPT": true,
	"INTERSECT": true, "WINDOW": true, "QUALIFY": true, "NATURAL": true, "SAMPLE": true, "TABLESAMPLE": true, "LATERAL": true,
	"PIVOT": true, "UNPIVOT": true, "ASOF": true, "POSITIONAL": true, "ANTI": true, "SEMI": true, "FETCH": true, "OFFSET": true,
	"SELECT": true, "FROM": true, "WITH": true, "AND": true, "OR": true, "NOT": true, "MINUS": true,
}

// timeTravel are the words after a table that read it as of another time:
// there is no telling which version of the replacement that would mean.
var timeTravel = map[string]bool{"AT": true, "BEFORE": true, "FOR": true, "CHANGES": true, "MATCH_RECOGNIZE": true}

// substituteTable rewrites sql to read the table `with` (quoted by d)
// wherever it reads the table whose name parts are `from`.
func substituteTable(sql string, d warehouse.Dialect, from []string, with warehouse.TableRef) (string, error) {
	toks, err := tokenize(sql, d)
	if err != nil {
		return "", err
	}
	name := from[len(from)-1]
	isName := func(t sqlTok) bool { return (t.kind == tIdent || t.kind == tQuoted) && d.SameIdent(t.val, name) }
	kw := func(i int, w string) bool {
		return i < len(toks) && toks[i].kind == tIdent && strings.EqualFold(toks[i].val, w)
	}
	punct := func(i int, p string) bool { return i < len(toks) && toks[i].kind == tOther && toks[i].val == p }

	for _, t := range toks {
		if t.kind == tString && strings.Contains(strings.ToLower(t.val), strings.ToLower(name)) {
			return "", refuseSubst("its SQL names %s inside a string literal (%q), which cannot be pointed at the replacement", name, t.val)
		}
	}
	for i := range toks {
		if isName(toks[i]) && kw(i+1, "AS") && punct(i+2, "(") {
			return "", refuseSubst("its SQL defines a CTE named %s, so which reads are of the table cannot be told", name)
		}
	}

	// Walk once, tracking which parentheses open a function call: FROM
	// inside one (EXTRACT(hour FROM ts)) is not a table position.
	type edit struct {
		start, end int
		text       string
	}
	var edits []edit
	used := map[int]bool{} // tokens that are part of a substituted reference
	var callParens []bool
	inCall := func() bool { return len(callParens) > 0 && callParens[len(callParens)-1] }
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if punct(i, "(") {
			callParens = append(callParens, i > 0 && (toks[i-1].kind == tIdent && !notAlias[strings.ToUpper(toks[i-1].val)] && !strings.EqualFold(toks[i-1].val, "AS") || toks[i-1].kind == tQuoted))
			continue
		}
		if punct(i, ")") {
			if len(callParens) > 0 {
				callParens = callParens[:len(callParens)-1]
			}
			continue
		}
		if t.kind != tIdent || inCall() || !(strings.EqualFold(t.val, "FROM") || strings.EqualFold(t.val, "JOIN")) {
			continue
		}
		// One reference, or a comma list of them after FROM.
		j := i + 1
		for {
			if j >= len(toks) || !(toks[j].kind == tIdent || toks[j].kind == tQuoted) || toks[j].kind == tIdent && notAlias[strings.ToUpper(toks[j].val)] {
				break
			}
			var parts []sqlTok
			k := j
			for {
				parts = append(parts, toks[k])
				if punct(k+1, ".") && k+2 < len(toks) && (toks[k+2].kind == tIdent || toks[k+2].kind == tQuoted) {
					k += 2
					continue
				}
				break
			}
			end := k + 1
			if punct(end, "(") {
				break // a table function, not a table
			}
			names, lastQuoted := refNames(d, parts)
			if matchesTable(d, names, from) {
				if end < len(toks) && toks[end].kind == tIdent && timeTravel[strings.ToUpper(toks[end].val)] {
					return "", refuseSubst("its SQL reads %s with %s, as of another time", name, toks[end].val)
				}
				text := d.Table(with)
				hasAlias := kw(end, "AS") || end < len(toks) && (toks[end].kind == tQuoted || toks[end].kind == tIdent && !notAlias[strings.ToUpper(toks[end].val)])
				if !hasAlias {
					last := names[len(names)-1]
					alias := d.QuoteIdent(last)
					if !lastQuoted && warehouse.ValidIdentifier(last) == nil {
						alias = last // keep the engine's case folding of the name as written
					}
					text += " AS " + alias
				}
				edits = append(edits, edit{toks[j].start, parts[len(parts)-1].end, text})
				for x := j; x < end; x++ {
					used[x] = true
				}
			}
			// Skip an alias, then continue a comma list.
			if kw(end, "AS") {
				end += 2
			} else if end < len(toks) && (toks[end].kind == tQuoted || toks[end].kind == tIdent && !notAlias[strings.ToUpper(toks[end].val)]) {
				end++
			}
			if !punct(end, ",") || strings.EqualFold(t.val, "JOIN") {
				break
			}
			j = end + 1
		}
	}
	if len(edits) == 0 {
		return "", refuseSubst("its SQL does not read %s in a FROM or JOIN that can be pointed at the replacement", strings.Join(from, "."))
	}
	// A qualified name of the table anywhere else (schema.table.column)
	// would still mean the old table.
	for i := 0; i+2 < len(toks); i++ {
		if used[i] || used[i+2] || !punct(i+1, ".") || !isName(toks[i+2]) || len(from) < 2 {
			continue
		}
		if (toks[i].kind == tIdent || toks[i].kind == tQuoted) && d.SameIdent(toks[i].val, from[len(from)-2]) {
			return "", refuseSubst("its SQL names %s.%s outside FROM and JOIN (a fully qualified column), which would still read the replaced table",
				from[len(from)-2], name)
		}
	}
	var b strings.Builder
	last := 0
	for _, e := range edits {
		b.WriteString(sql[last:e.start])
		b.WriteString(e.text)
		last = e.end
	}
	b.WriteString(sql[last:])
	return b.String(), nil
}

// refNames are a reference's name parts: BigQuery quotes a whole path in
// one pair of backticks (`project.dataset.table`), so there a quoted
// token holds several.
func refNames(d warehouse.Dialect, parts []sqlTok) (names []string, lastQuoted bool) {
	for _, p := range parts {
		if p.kind == tQuoted && d.Name() == "bigquery" {
			names = append(names, strings.Split(p.val, ".")...)
		} else {
			names = append(names, p.val)
		}
	}
	return names, parts[len(parts)-1].kind == tQuoted
}

// matchesTable reports whether a reference's name parts name the table:
// they are the last parts of its full name, compared by the engine's rules.
func matchesTable(d warehouse.Dialect, names []string, from []string) bool {
	if len(names) > len(from) {
		return false
	}
	off := len(from) - len(names)
	for i, n := range names {
		if !d.SameIdent(n, from[off+i]) {
			return false
		}
	}
	return true
}
