package sqlscan

import (
	"sort"
	"strings"
)

// sqlKeywords are words Columns never reports as columns: clauses,
// operators, literals, types and the windowing words Flink SQL uses.
var sqlKeywords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`select from where group by order having as and or not null is in on join left right
		inner outer full cross union all distinct case when then else end insert into values update set delete create
		table view with limit offset true false between like ilike interval hour hours minute minutes second seconds day
		days month months year years week cast over partition rows range preceding following current row window
		tumble hop cumulate session descriptor asc desc exists any some lateral unnest filter statement execute replace
		temporary if overwrite using natural except intersect qualify fetch first next only nulls last bigint int integer
		smallint tinyint double float real decimal numeric varchar char string text timestamp timestamp_ltz date time
		boolean bytes binary varbinary array map row struct zone local at epoch of for system_time primary
		enforced watermark to default materialized emit changes`) {
		sqlKeywords[w] = true
	}
}

// tableIntroducers are words after which a table name (and optional alias)
// follows, not a column.
var tableIntroducers = map[string]bool{"from": true, "join": true, "into": true, "update": true, "table": true}

// Columns extracts the column identifiers a simple SQL statement
// mentions: words that are not keywords, not function names, not table
// names after FROM/JOIN/INTO/TABLE, not aliases after AS, with qualified
// names (t.col) reduced to the column. It is a heuristic for the fields a
// stream job reads; callers narrow it with the input's known columns.
func Columns(sqlText string) []string {
	toks := scanSQL(sqlText)
	set := map[string]bool{}
	word := func(i int) (string, bool) {
		if i < 0 || i >= len(toks) || !isName(toks[i]) {
			return "", false
		}
		return toks[i].Value, true
	}
	isKW := func(i int) bool {
		return i >= 0 && i < len(toks) && toks[i].Kind == Word && sqlKeywords[strings.ToLower(toks[i].Text)]
	}
	for i := 0; i < len(toks); i++ {
		w, ok := word(i)
		if !ok {
			continue
		}
		lw := strings.ToLower(w)
		if toks[i].Kind == Word && tableIntroducers[lw] {
			// Skip the table name (dotted) and an optional alias, unless
			// the introducer opens a function or subquery: TABLE(...), FROM (...).
			j := i + 1
			if j < len(toks) && toks[j].IsPunct('(') || isKW(j) {
				continue
			}
			for j < len(toks) && isName(toks[j]) {
				j++
				if j < len(toks) && toks[j].IsPunct('.') {
					j++
					continue
				}
				break
			}
			if _, ok := word(j); ok && !isKW(j) {
				j++ // alias without AS
			} else if isKW(j) && toks[j].IsKeyword("as") {
				j += 2
			}
			i = j - 1
			continue
		}
		if toks[i].Kind == Word && sqlKeywords[lw] {
			continue
		}
		if i+1 < len(toks) && toks[i+1].IsPunct('(') {
			continue // a function
		}
		if i > 0 && toks[i-1].IsKeyword("as") {
			continue // an output alias, not something read
		}
		if i+1 < len(toks) && toks[i+1].IsPunct('.') {
			continue // a qualifier; the column follows the dot
		}
		set[w] = true
	}
	out := make([]string, 0, len(set))
	for w := range set {
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}

// Mentions returns the known columns a SQL statement mentions anywhere
// as an identifier, keywords included (a column may be called "date"), but
// not as an output alias. With the input's columns known this is exact
// where Columns has to guess.
func Mentions(sqlText string, columns []string) []string {
	toks := scanSQL(sqlText)
	words := map[string]bool{}
	for i, t := range toks {
		if !isName(t) {
			continue
		}
		if i > 0 && toks[i-1].IsKeyword("as") {
			continue
		}
		words[strings.ToLower(t.Value)] = true
	}
	var out []string
	for _, c := range columns {
		if words[strings.ToLower(c)] {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}
