package suggest

import (
	"fmt"
	"strings"
)

// Pick returns the member of valid that s names, ignoring case and the
// space around it, or the member an alias names (aliases are keyed in
// lower case: other spellings people type, such as "dag" for
// orchestrator_job). ok is false when s names none of them.
func Pick[T ~string](s string, valid []T, aliases map[string]T) (v T, ok bool) {
	s = strings.TrimSpace(s)
	for _, v := range valid {
		if strings.EqualFold(string(v), s) {
			return v, true
		}
	}
	v, ok = aliases[strings.ToLower(s)]
	return v, ok
}

// Names are the members of valid as strings, in their order, for messages.
func Names[T ~string](valid []T) []string {
	out := make([]string, len(valid))
	for i, v := range valid {
		out[i] = string(v)
	}
	return out
}

// UnknownError is a name that is none of the valid ones. Its message says
// what was given, the closest valid names and all of them, so whoever
// typed it can correct it in one go.
type UnknownError struct {
	// What names the argument, e.g. "change kind".
	What  string
	Given string
	Valid []string
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("unknown %s %q; closest: %s (valid: %s)", e.What, e.Given,
		strings.Join(Closest(e.Given, e.Valid, 2), ", "), strings.Join(e.Valid, ", "))
}

// Parse returns the member of valid that s names, ignoring case and the
// space around it; otherwise an *UnknownError naming what.
func Parse[T ~string](what, s string, valid []T) (T, error) {
	if v, ok := Pick(s, valid, nil); ok {
		return v, nil
	}
	var zero T
	return zero, &UnknownError{What: what, Given: s, Valid: Names(valid)}
}
