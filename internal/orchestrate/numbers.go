package orchestrate

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"sync"
)

// exactLimit is 2^53: below it a JSON number (read as a float64) holds
// every whole number exactly; from it on neighbours merge, so 2^53+1
// arrives as 2^53 and 2^63 as 9223372036854775808.
const exactLimit = 1 << 53

// exactNumbers refuses a params number that may not be the one the caller
// wrote: its magnitude is 2^53 or more, where the decoder already rounded
// it. The approver would see, and the orchestrator get, the rounded value,
// so the caller is told to send it as a string instead. The error names
// the param by its path (params.conf.n, params.steps_override[2]).
func exactNumbers(params map[string]any) error {
	return exactIn("params", params)
}

func exactIn(path string, v any) error {
	switch x := v.(type) {
	case map[string]any:
		// In key order, so the same params always name the same param.
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if err := exactIn(path+keyPath(k), x[k]); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := exactIn(fmt.Sprintf("%s[%d]", path, i), e); err != nil {
				return err
			}
		}
	case float64:
		// Shown as JSON writes it, which is what the approver would read.
		return exactFloat(path, x, strconv.FormatFloat(x, 'f', -1, 64))
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !math.IsInf(f, 0) {
			return invalid("%s: %s is not a number", path, clipText(string(x)))
		}
		return exactFloat(path, f, clipText(string(x)))
	}
	return nil
}

func exactFloat(path string, f float64, shown string) error {
	if math.Abs(f) < exactLimit {
		return nil
	}
	return invalid("%s: %s cannot be carried exactly: a JSON number of magnitude 2^53 (9007199254740992) or more may already have been rounded (2^53+1 reads as 2^53), so the run would not get the value you wrote; send it as a string, e.g. \"9007199254740993\"",
		path, shown)
}

// Compiled on first use, not at every agent's start (see warehouse.identRE).
var plainKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`) })

// keyPath is one step of a param's path: .name for a plain key, else the
// key quoted (and clipped), so no key can forge or hide a path.
func keyPath(k string) string {
	if plainKey().MatchString(k) {
		return "." + k
	}
	return "[" + strconv.QuoteToASCII(clipText(k)) + "]"
}

func clipText(s string) string {
	if r := []rune(s); len(r) > 64 {
		return string(r[:64]) + "…"
	}
	return s
}
