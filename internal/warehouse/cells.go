package warehouse

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Float reads a result cell as a number, as the drivers hand numbers
// back: Go integers and floats, decimal text (Snowflake NUMBER, and every
// big or unsigned number the warehouse child sends as text), big numbers
// (BigQuery NUMERIC, DuckDB HUGEINT), []byte text and DuckDB decimals.
// null is true for NULL, which callers record as no value rather than a
// made-up zero. NaN and infinities are returned as they are: whether they
// count is the caller's rule.
func Float(v any) (f float64, null bool, err error) {
	switch n := v.(type) {
	case nil:
		return 0, true, nil
	case float64:
		return n, false, nil
	case float32:
		return float64(n), false, nil
	case int64:
		return float64(n), false, nil
	case int32:
		return float64(n), false, nil
	case int:
		return float64(n), false, nil
	case int16:
		return float64(n), false, nil
	case int8:
		return float64(n), false, nil
	case uint64:
		return float64(n), false, nil
	case uint32:
		return float64(n), false, nil
	case uint16:
		return float64(n), false, nil
	case uint8:
		return float64(n), false, nil
	case bool:
		return 0, false, fmt.Errorf("value %v is a boolean, not a number", n)
	case string:
		return parseFloat(n)
	case []byte:
		return parseFloat(string(n))
	case *big.Int:
		f, _ := new(big.Float).SetInt(n).Float64()
		return f, false, nil
	case *big.Float:
		f, _ := n.Float64()
		return f, false, nil
	case *big.Rat:
		f, _ := n.Float64()
		return f, false, nil
	case interface{ Float64() float64 }:
		return n.Float64(), false, nil
	case time.Time:
		return 0, false, fmt.Errorf("value %s is a timestamp, not a number", n.Format(time.RFC3339))
	}
	// Other decimal types print as plain numbers.
	return parseFloat(fmt.Sprint(v))
}

func parseFloat(s string) (float64, bool, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, false, fmt.Errorf("value %q is not a number", truncateText(s))
	}
	return f, false, nil
}

// timeLayouts are the text forms of timestamps and dates the drivers and
// the warehouse child produce, most specific first.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05", "2006-01-02"}

// Time reads a result cell as a timestamp: time.Time as the drivers hand
// back dates and timestamps (the BigQuery driver converts civil types), or
// text or []byte in one of timeLayouts (a text without an offset is UTC).
// The location of a time.Time is kept. null is true for NULL.
func Time(v any) (t time.Time, null bool, err error) {
	switch x := v.(type) {
	case nil:
		return time.Time{}, true, nil
	case time.Time:
		return x, false, nil
	case string:
		s := strings.TrimSpace(x)
		for _, l := range timeLayouts {
			if t, err := time.Parse(l, s); err == nil {
				return t, false, nil
			}
		}
		return time.Time{}, false, fmt.Errorf("value %q is not a timestamp (want RFC 3339 or YYYY-MM-DD[ HH:MM:SS])", truncateText(x))
	case []byte:
		return Time(string(x))
	}
	return time.Time{}, false, fmt.Errorf("value %v is not a timestamp", truncateText(fmt.Sprint(v)))
}

// truncateText keeps an error about a cell short: cells can be large.
func truncateText(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "…"
}
