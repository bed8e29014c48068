package remediate

import (
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/sqlscan"
	"github.com/dataworkers/dw/internal/warehouse"
)

// A metric's SQL is the team's own. To read a replacement table with it,
// verification never edits that text as a string: it tokenizes it (strings,
// quoted identifiers and comments kept whole), finds the table references
// in FROM and JOIN positions that name the replaced table, and swaps
// exactly those tokens for the replacement's catalog name quoted by the
// warehouse's dialect, aliased to the old name when the query had no alias
// so column qualifiers still resolve. Anything it cannot read for certain
// (what sqlscan.StrictTokens refuses: unterminated quotes and comments,
// nested comments, dollar quoting, backslash escapes; and the name in a
// string literal, a fully qualified column, a CTE of the same name, time
// travel) is refused:
// the metric is then "not verifiable yet" rather than read wrongly. The
// warehouse still validates the result as one read-only query.

// unsubstitutable says why a metric's SQL cannot be pointed at the
// replacement safely.
type unsubstitutable struct{ why string }

func (u *unsubstitutable) Error() string { return u.why }

func refuseSubst(format string, args ...any) error {
	return &unsubstitutable{fmt.Sprintf(format, args...)}
}

// tokenize reads sql strictly in the dialect's quoting and keeps the
// tokens substitution looks at: no whitespace, no comments.
func tokenize(sql string, d warehouse.Dialect) ([]sqlscan.Token, error) {
	dialect := sqlscan.ANSI
	if d.Name() == "bigquery" {
		dialect = sqlscan.BigQuery
	}
	all, err := sqlscan.StrictTokens(sql, dialect)
	if err != nil {
		return nil, refuseSubst("its SQL cannot be read for certain: it has %v", err)
	}
	toks := all[:0]
	for _, t := range all {
		if !t.Trivia() {
			toks = append(toks, t)
		}
	}
	return toks, nil
}

// nameTok reports whether a token can be part of a name: a bare word or a
// quoted name.
func nameTok(t sqlscan.Token) bool { return t.Kind == sqlscan.Word || t.Kind == sqlscan.Quoted }

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
	isName := func(t sqlscan.Token) bool { return nameTok(t) && d.SameIdent(t.Value, name) }
	kw := func(i int, w string) bool { return i < len(toks) && toks[i].IsKeyword(w) }
	punct := func(i int, p byte) bool { return i < len(toks) && toks[i].IsPunct(p) }

	for _, t := range toks {
		if t.Kind == sqlscan.String && strings.Contains(strings.ToLower(t.Value), strings.ToLower(name)) {
			return "", refuseSubst("its SQL names %s inside a string literal (%q), which cannot be pointed at the replacement", name, t.Value)
		}
	}
	for i := range toks {
		if isName(toks[i]) && kw(i+1, "AS") && punct(i+2, '(') {
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
		if punct(i, '(') {
			callParens = append(callParens, i > 0 && (toks[i-1].Kind == sqlscan.Word && !notAlias[strings.ToUpper(toks[i-1].Value)] && !strings.EqualFold(toks[i-1].Value, "AS") || toks[i-1].Kind == sqlscan.Quoted))
			continue
		}
		if punct(i, ')') {
			if len(callParens) > 0 {
				callParens = callParens[:len(callParens)-1]
			}
			continue
		}
		if t.Kind != sqlscan.Word || inCall() || !(strings.EqualFold(t.Value, "FROM") || strings.EqualFold(t.Value, "JOIN")) {
			continue
		}
		// One reference, or a comma list of them after FROM.
		j := i + 1
		for {
			if j >= len(toks) || !nameTok(toks[j]) || toks[j].Kind == sqlscan.Word && notAlias[strings.ToUpper(toks[j].Value)] {
				break
			}
			var parts []sqlscan.Token
			k := j
			for {
				parts = append(parts, toks[k])
				if punct(k+1, '.') && k+2 < len(toks) && nameTok(toks[k+2]) {
					k += 2
					continue
				}
				break
			}
			end := k + 1
			if punct(end, '(') {
				break // a table function, not a table
			}
			names, lastQuoted := refNames(d, parts)
			if matchesTable(d, names, from) {
				if end < len(toks) && toks[end].Kind == sqlscan.Word && timeTravel[strings.ToUpper(toks[end].Value)] {
					return "", refuseSubst("its SQL reads %s with %s, as of another time", name, toks[end].Value)
				}
				text := d.Table(with)
				hasAlias := kw(end, "AS") || end < len(toks) && (toks[end].Kind == sqlscan.Quoted || toks[end].Kind == sqlscan.Word && !notAlias[strings.ToUpper(toks[end].Value)])
				if !hasAlias {
					last := names[len(names)-1]
					alias := d.QuoteIdent(last)
					if !lastQuoted && warehouse.ValidIdentifier(last) == nil {
						alias = last // keep the engine's case folding of the name as written
					}
					text += " AS " + alias
				}
				edits = append(edits, edit{toks[j].Start, parts[len(parts)-1].End, text})
				for x := j; x < end; x++ {
					used[x] = true
				}
			}
			// Skip an alias, then continue a comma list.
			if kw(end, "AS") {
				end += 2
			} else if end < len(toks) && (toks[end].Kind == sqlscan.Quoted || toks[end].Kind == sqlscan.Word && !notAlias[strings.ToUpper(toks[end].Value)]) {
				end++
			}
			if !punct(end, ',') || strings.EqualFold(t.Value, "JOIN") {
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
		if used[i] || used[i+2] || !punct(i+1, '.') || !isName(toks[i+2]) || len(from) < 2 {
			continue
		}
		if nameTok(toks[i]) && d.SameIdent(toks[i].Value, from[len(from)-2]) {
			return "", refuseSubst("its SQL names %s.%s outside FROM and JOIN (a fully qualified column), which would still read the replaced table",
				from[len(from)-2], name)
		}
	}
	var b strings.Builder
	last := 0
	for _, e := range edits {
		b.WriteString(sql[last:e.start])
		b.WriteString(e.text)
		// The replacement ends in a quote or a name: what followed the old
		// reference with no space between (an alias written orders"o")
		// would otherwise run into it and read as part of the name
		// ("orders_v2""o" is one quoted name).
		if e.end < len(sql) && joinsName(sql[e.end]) {
			b.WriteByte(' ')
		}
		last = e.end
	}
	b.WriteString(sql[last:])
	return b.String(), nil
}

// refNames are a reference's name parts: BigQuery quotes a whole path in
// one pair of backticks (`project.dataset.table`), so there a quoted
// token holds several.
func refNames(d warehouse.Dialect, parts []sqlscan.Token) (names []string, lastQuoted bool) {
	for _, p := range parts {
		if p.Kind == sqlscan.Quoted && d.Name() == "bigquery" {
			names = append(names, strings.Split(p.Value, ".")...)
		} else {
			names = append(names, p.Value)
		}
	}
	return names, parts[len(parts)-1].Kind == sqlscan.Quoted
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

// joinsName reports whether a byte right after a name would be read as
// part of it or of its quoting.
func joinsName(c byte) bool {
	return c == '"' || c == '`' || c == '\'' || c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
