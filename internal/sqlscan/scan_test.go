package sqlscan

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSQLScanner: the SQL scanner reads job SQL from notes and events.
// Whatever the text, it never panics, token positions stay inside the
// input and in order, and every column Columns reports is a word of the
// input.
func FuzzSQLScanner(f *testing.F) {
	for _, s := range []string{
		"SELECT a, b FROM t WHERE c > 1",
		"INSERT INTO out SELECT user_id, SUM(response_bytes) AS total FROM `api-usage` GROUP BY TUMBLE(ts, INTERVAL '1' HOUR), user_id",
		`SELECT "Quoted ""Col""", t.x FROM s.t AS t JOIN u ON t.id = u.id -- trailing`,
		"/* unclosed comment SELECT a",
		"SELECT 'unclosed string",
		"SELECT `unclosed",
		"SELECT 1.5e10, x FROM y; DROP TABLE z",
		"select ünïcode, col$1 from tab",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := scanSQL(s)
		last := 0
		for _, tk := range toks {
			if tk.Start < last || tk.End < tk.Start || tk.End > len(s) {
				t.Fatalf("%q: token %+v out of place (previous end %d)", s, tk, last)
			}
			last = tk.End
		}
		lower := strings.ToLower(s)
		for _, c := range Columns(s) {
			if c == "" {
				t.Fatalf("%q: empty column", s)
			}
			if utf8.ValidString(s) && !strings.Contains(lower, strings.ToLower(c)) && !strings.Contains(c, `"`) && !strings.Contains(c, "`") {
				t.Fatalf("%q: column %q is not in the text", s, c)
			}
		}
		cols := Columns(s)
		for _, m := range Mentions(s, append(cols, "never_mentioned_xyz")) {
			if m == "never_mentioned_xyz" && !strings.Contains(lower, "never_mentioned_xyz") {
				t.Fatalf("%q: mentions a column it does not contain", s)
			}
		}
	})
}

func TestColumns(t *testing.T) {
	const rollupSQL = "INSERT INTO `usage-hourly`\n" +
		"SELECT account_id, window_start, SUM(response_bytes) AS egress_bytes\n" +
		"FROM TABLE(TUMBLE(TABLE `api-usage`, DESCRIPTOR(event_time), INTERVAL '1' HOUR))\n" +
		"GROUP BY account_id, window_start, window_end"
	got := Columns(rollupSQL)
	if !slices.Equal(got, []string{"account_id", "event_time", "response_bytes", "window_end", "window_start"}) {
		t.Errorf("Columns = %v", got)
	}
	got = Columns(`SELECT u.account_id, COALESCE(u.response_kib * 1024, u.response_bytes) AS egress_bytes -- 'x'
		FROM usage u JOIN accounts AS a ON a.id = u.account_id WHERE u.endpoint <> 'health'`)
	if !slices.Equal(got, []string{"account_id", "endpoint", "id", "response_bytes", "response_kib"}) {
		t.Errorf("Columns = %v", got)
	}
	if got := Mentions(`SELECT "date", value AS amount FROM t`, []string{"date", "value", "amount", "other"}); !slices.Equal(got, []string{"date", "value"}) {
		t.Errorf("Mentions = %v", got)
	}
}

func TestExpressions(t *testing.T) {
	for _, c := range []struct {
		sql, col string
		want     []string
	}{
		{"SELECT account_id, SUM(response_bytes) AS egress_bytes FROM t GROUP BY 1", "response_bytes", []string{"SUM(response_bytes)"}},
		{"SELECT CASE WHEN COUNT(response_bytes) = COUNT(*) THEN SUM(response_bytes) END AS egress_bytes", "RESPONSE_BYTES",
			[]string{"COUNT(response_bytes)", "SUM(response_bytes)"}},
		{"SELECT SUM(COALESCE(response_kib * 1024,\n   response_bytes)) FROM t", "response_bytes", []string{"COALESCE(response_kib * 1024, response_bytes)"}},
		{"SELECT x AS response_bytes, 'SUM(response_bytes)' FROM t -- SUM(response_bytes)\n", "response_bytes", nil},
		{"SELECT response_bytes FROM t", "response_bytes", nil},
		{"SELECT SUM(\"response_bytes\") FROM t", "response_bytes", []string{`SUM("response_bytes")`}},
		{"", "response_bytes", nil},
	} {
		if got := Expressions(c.sql, c.col); !slices.Equal(got, c.want) {
			t.Errorf("Expressions(%q, %s) = %q, want %q", c.sql, c.col, got, c.want)
		}
	}
}
