package orchestrate

import (
	"strings"
	"testing"
)

// FuzzParseDagsterTarget: a Dagster target is text in an approved
// proposal. It parses only when it is location/job or location/repository/
// job with each part a Dagster name (checked here by hand), then it
// round-trips through DagsterTarget; a refusal is one short line whatever
// the input's size.
func FuzzParseDagsterTarget(f *testing.F) {
	for _, s := range []string{"billing_location/refresh_usage", "billing_location/__repository__/refresh_usage", "my_pkg.defs/repo/job",
		"repo.py/j", "./j", "../j", "a/b/c/d", "a//b", "/j", "loc/jo-b", " loc/job ", "loc/job\n", "é/j", strings.Repeat("l", 256) + "/j",
		strings.Repeat("x/", 5000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dt, err := parseDagsterTarget(s)
		parts := strings.Split(strings.TrimSpace(s), "/")
		ok := len(parts) == 2 || len(parts) == 3
		if ok {
			loc, job := parts[0], parts[len(parts)-1]
			ok = dagsterPart(loc, true) && loc != "." && loc != ".." && dagsterPart(job, false) &&
				(len(parts) == 2 || dagsterPart(parts[1], false))
		}
		if err != nil {
			if ok {
				t.Fatalf("%q refused: %v", s, err)
			}
			if msg := err.Error(); len(msg) > 1000 || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("refusal of a %d-byte target is %d bytes or several lines: %.200q", len(s), len(msg), msg)
			}
			return
		}
		if !ok {
			t.Fatalf("%q accepted as %+v", s, dt)
		}
		if again, err := parseDagsterTarget(DagsterTarget(dt.location, dt.repository, dt.job)); err != nil || again != dt {
			t.Fatalf("%+v written and reparsed as %+v, %v", dt, again, err)
		}
		if len(parts) == 2 && dt.repository != DefaultDagsterRepository {
			t.Fatalf("%q without a repository got %q", s, dt.repository)
		}
	})
}

// dagsterPart is Dagster's name rule by hand: 1 to 255 ASCII letters,
// digits and _ (and . and - in a code location).
func dagsterPart(s string, location bool) bool {
	if len(s) == 0 || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || location && (c == '.' || c == '-')) {
			return false
		}
	}
	return true
}
