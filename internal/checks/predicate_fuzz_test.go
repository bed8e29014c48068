package checks

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/warehouse"
)

var fuzzTable = &warehouse.Table{
	Ref: warehouse.TableRef{Schema: "shop", Name: "events"},
	Columns: []warehouse.Column{
		{Name: "amount", Type: "DOUBLE"}, {Name: "status", Type: "VARCHAR"},
		{Name: "created_at", Type: "TIMESTAMP"}, {Name: "qty", Type: "BIGINT"}, {Name: "ok", Type: "BOOLEAN"},
	},
}

// FuzzPredicate: a predicate is user text that becomes SQL. Whatever the
// input, parsing never panics, and what is rendered holds no word from the
// input outside a quoted literal or a quoted catalog column: only the
// grammar's keywords and allowed functions appear bare, and no statement
// separator or comment survives.
func FuzzPredicate(f *testing.F) {
	for _, s := range []string{
		"amount >= 0", "status IN ('ok', 'retry')", "amount BETWEEN 1 AND 2.5e3", "NOT (qty IS NULL) OR ok",
		"LOWER(status) LIKE 'a%'", "COALESCE(amount, 0) * 2 <> -qty / 3", "status = 'it''s'", "amount >= 0; DROP TABLE x",
		"amount >= .5 -- c", `"amount" > 0`, "status NOT IN ('a') AND amount NOT BETWEEN 0 AND 1", "(((amount > 0)))",
		"status || 'x' = 'y'", "ok = TRUE", "ABS(amount) > 1e308", "x.amount > 0", "CASE WHEN 1 THEN 2 END",
	} {
		f.Add(s)
	}
	dialects := []warehouse.Dialect{warehouse.DuckDB{}, warehouse.BigQuery{}, warehouse.Snowflake{}}
	f.Fuzz(func(t *testing.T, src string) {
		// A slow input crashes the worker so the fuzzer keeps it.
		defer time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("predicate took over 5s: %q", src)) }).Stop()
		for _, d := range dialects {
			e, cols, err := parsePredicate(src, fuzzTable, d)
			if err != nil {
				if err.Error() == "" {
					t.Fatal("empty error")
				}
				continue
			}
			for _, c := range cols {
				if _, err := fuzzTable.Column(d, c); err != nil {
					t.Fatalf("%q: referenced column %q is not the table's", src, c)
				}
			}
			sp, err := spellingFor(d)
			if err != nil {
				t.Fatal(err)
			}
			sql, err := e.render(sp)
			if err != nil {
				continue
			}
			if bad := unsafeSQL(sql, d.Name()); bad != "" {
				t.Fatalf("%s: %q renders as %q: %s", d.Name(), src, sql, bad)
			}
		}
	})
}

// unsafeSQL scans rendered SQL as the engine's lexer would and reports
// anything bare that is not the grammar's: it returns "" when safe.
func unsafeSQL(sql, dialect string) string {
	allowed := map[string]bool{}
	for w := range grammarWords {
		allowed[w] = true
	}
	for fn := range allowedFunctions {
		allowed[fn] = true
	}
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'':
			j := i + 1
			for ; j < len(sql); j++ {
				if sql[j] == '\\' && dialect != "duckdb" {
					j++
					continue
				}
				if sql[j] == '\'' {
					if j+1 < len(sql) && sql[j+1] == '\'' && dialect != "bigquery" {
						j++
						continue
					}
					break
				}
			}
			if j >= len(sql) {
				return "string literal never closes"
			}
			i = j + 1
		case c == '"' || c == '`':
			j := i + 1
			var name strings.Builder
			for ; j < len(sql); j++ {
				if c == '`' && sql[j] == '\\' {
					j++
					name.WriteByte(sql[j])
					continue
				}
				if sql[j] == c {
					if c == '"' && j+1 < len(sql) && sql[j+1] == '"' {
						name.WriteByte('"')
						j++
						continue
					}
					break
				}
				name.WriteByte(sql[j])
			}
			if j >= len(sql) {
				return "quoted identifier never closes"
			}
			found := false
			for _, col := range fuzzTable.Columns {
				if col.Name == name.String() {
					found = true
				}
			}
			if !found {
				return "quotes " + name.String() + ", not a column of the table"
			}
			i = j + 1
		case c >= '0' && c <= '9':
			j := i
			for j < len(sql) && (sql[j] >= '0' && sql[j] <= '9' || sql[j] == '.' || sql[j] == 'e' || sql[j] == 'E' ||
				(sql[j] == '+' || sql[j] == '-') && (sql[j-1] == 'e' || sql[j-1] == 'E')) {
				j++
			}
			i = j
		case isIdentStart(c):
			j := i
			for j < len(sql) && isIdentByte(sql[j]) {
				j++
			}
			if !allowed[sql[i:j]] {
				return "bare word " + sql[i:j]
			}
			i = j
		case c == ';':
			return "semicolon"
		case strings.HasPrefix(sql[i:], "--") || strings.HasPrefix(sql[i:], "/*") || c == '#':
			return "comment"
		default:
			i++
		}
	}
	return ""
}
