package clock

import (
	"testing"
	"time"
)

// TestSlowed: a slowed clock reads At at Since, then moves Factor times
// slower than real time, and stands in for another time.
func TestSlowed(t *testing.T) {
	at := time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)
	s := Slowed{At: at, Since: time.Now().Add(-time.Hour), Factor: 60}
	got := s.Now()
	if got.Before(at.Add(time.Minute)) || got.After(at.Add(time.Minute+time.Second)) {
		t.Errorf("an hour after the anchor a 60x slowed clock reads %s, want about %s", got, at.Add(time.Minute))
	}
	if later := s.Now(); later.Before(got) {
		t.Errorf("went backwards: %s then %s", got, later)
	}
	var c Clock = s
	if r, ok := c.(Replayed); !ok || !r.Replayed() {
		t.Error("a slowed clock must say it stands in for another time")
	}
	if z := (Slowed{At: at, Since: time.Now()}).Now(); z.Before(at) || z.After(at.Add(time.Second)) {
		t.Errorf("factor 0 reads %s", z)
	}
}
