package checks

import (
	"strings"
	"testing"
	"time"
)

// FuzzParseAge: a max_age is user text. Blank means none; otherwise it
// parses exactly when Go reads it as a positive duration, the duration
// round-trips through its own spelling, and a refusal is one short line
// that says what to write, whatever the input's size.
func FuzzParseAge(f *testing.F) {
	for _, s := range []string{"", " ", "90m", "2h", " 36h ", "1h30m", "0s", "-1h", "1.5h", "1d", "9999999999h", "1e3s", "h", "\x00", strings.Repeat("9", 1000) + "h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseAge(s)
		if strings.TrimSpace(s) == "" {
			if d != 0 || err != nil {
				t.Fatalf("blank %q: %v, %v", s, d, err)
			}
			return
		}
		want, perr := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			if perr == nil && want > 0 {
				t.Fatalf("%q refused though it is %v", s, want)
			}
			if msg := err.Error(); len(msg) > 1000 || strings.ContainsAny(msg, "\n\r") || !strings.Contains(msg, "max_age") {
				t.Fatalf("refusal of a %d-byte max_age is %d bytes, several lines or unnamed: %.200q", len(s), len(msg), msg)
			}
			return
		}
		if perr != nil || d != want || d <= 0 {
			t.Fatalf("%q parsed as %v; Go reads %v, %v", s, d, want, perr)
		}
		if again, err := parseAge(d.String()); err != nil || again != d {
			t.Fatalf("%v reparsed as %v, %v", d, again, err)
		}
	})
}
