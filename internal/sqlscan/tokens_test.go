package sqlscan

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

var dialects = []Dialect{Generic, ANSI, BigQuery}

// FuzzTokens: the two modes are one tokenizer. On any text, the lenient
// tokens tile the input (each starts where the last ended, and together
// they are the input byte for byte); on a text the strict mode accepts,
// the strict tokens are exactly the lenient ones and none is Open.
func FuzzTokens(f *testing.F) {
	for _, s := range []string{
		"SELECT a, b FROM t WHERE c > 1",
		"select \"a\"\"b\", `c` from s.t -- x\n/* y */ where d = 'it''s'",
		"SELECT '''multi\nline''' AS s, \"\"\"x\"\"\" FROM `p.d.t` # note",
		"SELECT 'a\\'b' FROM t",
		"SELECT $$body$$, $tag$ $x $tag$, $1, col$2 FROM t",
		"SELECT 1 /* outer /* inner */ FROM t */",
		"SELECT 'open",
		"SELECT \"open",
		"/* open",
		"SELECT 1.5e10,\f\vü FROM y;",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, d := range dialects {
			lenient := Tokens(s, d)
			var b strings.Builder
			end := 0
			for _, tk := range lenient {
				if tk.Start != end || tk.End <= tk.Start || tk.Text != s[tk.Start:tk.End] {
					t.Fatalf("dialect %d, %q: token %+v does not follow byte %d", d, s, tk, end)
				}
				if tk.Kind != Quoted && tk.Kind != String && tk.Value != tk.Text {
					t.Fatalf("dialect %d, %q: %+v has a value that is not its text", d, s, tk)
				}
				b.WriteString(tk.Text)
				end = tk.End
			}
			if b.String() != s {
				t.Fatalf("dialect %d: tokens of %q concatenate to %q", d, s, b.String())
			}
			strict, err := StrictTokens(s, d)
			if err != nil {
				var e *Error
				if !errors.As(err, &e) || e.Offset < 0 || e.Offset >= len(s) {
					t.Fatalf("dialect %d, %q: refusal %v is not an *Error inside the text", d, s, err)
				}
				continue
			}
			if !slices.Equal(strict, lenient) {
				t.Fatalf("dialect %d, %q: strict %+v\nlenient %+v", d, s, strict, lenient)
			}
			for _, tk := range strict {
				if tk.Open {
					t.Fatalf("dialect %d, %q: strict accepted an open token %+v", d, s, tk)
				}
			}
		}
	})
}

type tok struct {
	kind  Kind
	value string
}

func significant(toks []Token) []tok {
	var out []tok
	for _, t := range toks {
		if !t.Trivia() {
			out = append(out, tok{t.Kind, t.Value})
		}
	}
	return out
}

// Each dialect quotes names and strings its own way.
func TestTokensByDialect(t *testing.T) {
	for _, c := range []struct {
		d    Dialect
		in   string
		want []tok
	}{
		{Generic, "SELECT \"a\"\"b\", `c` FROM t", []tok{{Word, "SELECT"}, {Quoted, `a"b`}, {Punct, ","}, {Quoted, "c"}, {Word, "FROM"}, {Word, "t"}}},
		{ANSI, "SELECT \"a\", `c`", []tok{{Word, "SELECT"}, {Quoted, "a"}, {Punct, ","}, {Punct, "`"}, {Word, "c"}, {Punct, "`"}}},
		{BigQuery, "SELECT \"a\", `p.d.t` # c\n", []tok{{Word, "SELECT"}, {String, "a"}, {Punct, ","}, {Quoted, "p.d.t"}}},
		{BigQuery, "SELECT '''it's\n''' AS s", []tok{{Word, "SELECT"}, {String, "it's\n"}, {Word, "AS"}, {Word, "s"}}},
		{ANSI, "SELECT '''' AS q", []tok{{Word, "SELECT"}, {String, "'"}, {Word, "AS"}, {Word, "q"}}},
		{Generic, "SELECT 'it''s' -- x\n, 12.5e3, $1, col$2", []tok{{Word, "SELECT"}, {String, "it's"}, {Punct, ","}, {Number, "12.5e3"},
			{Punct, ","}, {Punct, "$"}, {Number, "1"}, {Punct, ","}, {Word, "col$2"}}},
	} {
		got, err := StrictTokens(c.in, c.d)
		if err != nil || !slices.Equal(significant(got), c.want) {
			t.Errorf("dialect %d, %q:\n got %v, %v\nwant %v", c.d, c.in, significant(got), err, c.want)
		}
	}
}

// The lenient mode reads what the strict one refuses, and says where the
// text ended inside something.
func TestLenientReadsWhatStrictRefuses(t *testing.T) {
	for _, c := range []struct {
		d      Dialect
		in     string
		reason string // the strict refusal
		want   []tok  // the lenient reading
		open   bool   // whether the last lenient token is Open
	}{
		{ANSI, "SELECT 'open", "an unterminated quote", []tok{{Word, "SELECT"}, {String, "open"}}, true},
		{Generic, "SELECT `open", "an unterminated quote", []tok{{Word, "SELECT"}, {Quoted, "open"}}, true},
		{ANSI, "SELECT 1 /* open", "an unterminated /* comment", []tok{{Word, "SELECT"}, {Number, "1"}}, true},
		{ANSI, "SELECT $$a 'b$$, $t$x$t$ FROM t", "dollar quoting", []tok{{Word, "SELECT"}, {String, "a 'b"}, {Punct, ","}, {String, "x"}, {Word, "FROM"}, {Word, "t"}}, false},
		{ANSI, "SELECT $name FROM t", "dollar quoting", []tok{{Word, "SELECT"}, {Word, "$name"}, {Word, "FROM"}, {Word, "t"}}, false},
		{ANSI, "SELECT $$open", "dollar quoting", []tok{{Word, "SELECT"}, {String, "open"}}, true},
		{ANSI, `SELECT 'a\'b'`, "a backslash", []tok{{Word, "SELECT"}, {String, `a\`}, {Word, "b"}, {String, ""}}, true},
		{BigQuery, `SELECT 'a\'b' FROM t`, "a backslash", []tok{{Word, "SELECT"}, {String, `a\'b`}, {Word, "FROM"}, {Word, "t"}}, false},
		{ANSI, "SELECT 1 /* a /* b */ FROM t */", "a /* comment opened inside another", []tok{{Word, "SELECT"}, {Number, "1"}, {Word, "FROM"}, {Word, "t"}, {Punct, "*"}, {Punct, "/"}}, false},
	} {
		_, err := StrictTokens(c.in, c.d)
		var e *Error
		if !errors.As(err, &e) || !strings.HasPrefix(e.Reason, c.reason) {
			t.Errorf("dialect %d, %q: strict error %v, want %q", c.d, c.in, err, c.reason)
		}
		toks := Tokens(c.in, c.d)
		if got := significant(toks); !slices.Equal(got, c.want) {
			t.Errorf("dialect %d, %q: lenient %v, want %v", c.d, c.in, got, c.want)
		}
		if last := toks[len(toks)-1]; last.Open != c.open {
			t.Errorf("dialect %d, %q: last token %+v, want Open %v", c.d, c.in, last, c.open)
		}
	}
}
