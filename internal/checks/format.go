package checks

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Formatting for messages a person reads in the client.

// percent prints a rate: 18.0%, 0.35%, 0%.
func percent(r float64) string {
	p := r * 100
	switch {
	case p == 0:
		return "0%"
	case math.Abs(p) >= 1:
		return strconv.FormatFloat(p, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(p, 'g', 2, 64) + "%"
}

// thousands prints an integer with thousands separators.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// number prints a count-like value: whole numbers with separators.
func number(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return thousands(int64(v))
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// age prints seconds as a short duration: 45s, 5m, 2h05m, 3d4h.
func age(seconds float64) string {
	neg := seconds < 0
	d := time.Duration(math.Abs(seconds) * float64(time.Second)).Round(time.Second)
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		s = fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
	}
	if neg {
		return "-" + s
	}
	return s
}

// grainLabel names a window-long point's grain for storage: window:24h.
func grainLabel(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("window:%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("window:%dm", d/time.Minute)
	}
	return "window:" + d.String()
}
