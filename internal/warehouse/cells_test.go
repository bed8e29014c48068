package warehouse

import (
	"math"
	"math/big"
	"strings"
	"testing"
	"time"
)

type decimal struct{ v float64 }

func (d decimal) Float64() float64 { return d.v }

type printed struct{}

func (printed) String() string { return "12.5" }

func TestFloat(t *testing.T) {
	for _, c := range []struct {
		in   any
		want float64
	}{
		{int64(-3), -3}, {int32(4), 4}, {7, 7}, {int16(-2), -2}, {int8(1), 1}, {uint64(1 << 40), 1 << 40}, {uint32(9), 9},
		{uint16(5), 5}, {uint8(6), 6}, {float32(0.5), 0.5}, {2.25, 2.25}, {" 12.5 ", 12.5}, {[]byte("3e2"), 300},
		{big.NewInt(42), 42}, {big.NewRat(3, 4), 0.75}, {big.NewFloat(1.5), 1.5}, {decimal{8.5}, 8.5}, {printed{}, 12.5},
		{"NaN", math.NaN()},
	} {
		got, null, err := Float(c.in)
		if err != nil || null || (got != c.want && !(math.IsNaN(got) && math.IsNaN(c.want))) {
			t.Errorf("Float(%#v) = %v, %v, %v; want %v", c.in, got, null, err, c.want)
		}
	}
	if _, null, err := Float(nil); !null || err != nil {
		t.Errorf("NULL: %v, %v", null, err)
	}
	for _, bad := range []any{true, "", "12 rows", "'; DROP TABLE x; --", []byte{0, 1}, time.Now(), strings.Repeat("9x", 1000)} {
		if _, null, err := Float(bad); err == nil || null || len(err.Error()) > 200 {
			t.Errorf("Float(%T) accepted or said too much: %v", bad, err)
		}
	}
}

func TestTime(t *testing.T) {
	want := time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)
	for _, in := range []any{want, "2026-03-10T14:00:00Z", "2026-03-10T15:00:00+01:00", " 2026-03-10 14:00:00 ", "2026-03-10T14:00:00",
		"2026-03-10 14:00:00+00:00", []byte("2026-03-10T14:00:00.000Z")} {
		got, null, err := Time(in)
		if err != nil || null || !got.Equal(want) {
			t.Errorf("Time(%#v) = %v, %v, %v", in, got, null, err)
		}
	}
	if got, _, err := Time("2026-03-10"); err != nil || !got.Equal(time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("date: %v, %v", got, err)
	}
	// A time.Time keeps its location.
	loc := time.FixedZone("X", 3600)
	if got, _, _ := Time(want.In(loc)); got.Location() != loc {
		t.Errorf("location %v", got.Location())
	}
	if _, null, err := Time(nil); !null || err != nil {
		t.Errorf("NULL: %v, %v", null, err)
	}
	for _, bad := range []any{"yesterday", int64(1700000000), 1.5, true, "2026-13-40"} {
		if _, null, err := Time(bad); err == nil || null {
			t.Errorf("Time(%#v) accepted", bad)
		}
	}
}
