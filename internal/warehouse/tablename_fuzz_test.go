package warehouse

import (
	"strings"
	"testing"
)

// FuzzParseTableName: a table name is user text. It parses only when it is
// one to three dot-separated identifiers (checked here by hand, byte by
// byte), and then it round-trips: the parts, joined, are the trimmed input,
// and parsing that gives the same parts. A refusal is one short line
// whatever the input's size (under 1000 bytes: textrule.Quote shows at most
// 80 bytes of a value, each escaped to at most four characters).
func FuzzParseTableName(f *testing.F) {
	for _, s := range []string{"orders", "shop.orders", "wh.shop.orders", " acme-prod.loyalty.t$1 ", "a..b", "a.b.c.d", `"x"`, "", ".", "_", "1abc",
		strings.Repeat("a", 255), strings.Repeat("a", 256), "a;drop", "é", "a\x00b", strings.Repeat("a.", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := ParseTableName(s)
		want := strings.TrimSpace(s)
		parts := strings.Split(want, ".")
		ok := len(parts) <= 3
		for _, p := range parts {
			ok = ok && handIdent(p)
		}
		if err != nil {
			if ok {
				t.Fatalf("%q refused: %v", s, err)
			}
			if msg := err.Error(); len(msg) > 1000 || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("refusal of a %d-byte name is %d bytes or several lines: %.200q", len(s), len(msg), msg)
			}
			return
		}
		if !ok {
			t.Fatalf("%q accepted as %+v", s, ref)
		}
		if got := ref.String(); got != want {
			t.Fatalf("%q parsed as %+v, which writes back as %q", s, ref, got)
		}
		if again, err := ParseTableName(ref.String()); err != nil || again != ref {
			t.Fatalf("%+v reparsed as %+v, %v", ref, again, err)
		}
		if ref.Name == "" || ref.Database != "" && ref.Schema == "" {
			t.Fatalf("%q parsed as %+v", s, ref)
		}
	})
}

// handIdent is ValidIdentifier's rule without a regular expression: a
// letter or _, then letters, digits, _, $ or -, at most 255 bytes.
func handIdent(s string) bool {
	if len(s) == 0 || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
		if i == 0 && !letter || i > 0 && !letter && !(c >= '0' && c <= '9' || c == '$' || c == '-') {
			return false
		}
	}
	return true
}
