package routines

import (
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/config"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func mustSchedule(t *testing.T, r config.Routine) Schedule {
	t.Helper()
	if r.Name == "" {
		r.Name = "test"
	}
	s, err := ParseSchedule(r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A daily 09:00 in Berlin moves by an hour in UTC across the spring DST
// change, and Prev agrees with Next on both sides of it.
func TestCronTimezoneAcrossDST(t *testing.T) {
	for _, r := range []config.Routine{
		{Cron: "0 9 * * *", Timezone: "Europe/Berlin"},
		{Cron: "CRON_TZ=Europe/Berlin 0 9 * * *"},
	} {
		s := mustSchedule(t, r)
		cases := []struct{ at, prev, next string }{
			{"2026-03-28T08:30:00Z", "2026-03-28T08:00:00Z", "2026-03-29T07:00:00Z"}, // CET: 09:00 = 08:00Z
			{"2026-03-29T06:59:00Z", "2026-03-28T08:00:00Z", "2026-03-29T07:00:00Z"},
			{"2026-03-29T07:00:00Z", "2026-03-29T07:00:00Z", "2026-03-30T07:00:00Z"}, // CEST: 09:00 = 07:00Z
			{"2026-10-25T07:59:00Z", "2026-10-24T07:00:00Z", "2026-10-25T08:00:00Z"}, // back to CET
		}
		for _, c := range cases {
			if got := s.Prev(utc(c.at)); !got.Equal(utc(c.prev)) {
				t.Errorf("%s: Prev(%s) = %s, want %s", s, c.at, got.Format(time.RFC3339), c.prev)
			}
			if got := s.Next(utc(c.at)); !got.Equal(utc(c.next)) {
				t.Errorf("%s: Next(%s) = %s, want %s", s, c.at, got.Format(time.RFC3339), c.next)
			}
		}
	}
}

// A time inside the spring-forward gap (02:30 Berlin on 29 March) does not
// exist, so that day has no tick; on the autumn day 02:30 happens twice.
// Due computation follows the library's ticks, so neither day double-runs
// a tick or invents one.
func TestCronDSTGapAndRepeat(t *testing.T) {
	s := mustSchedule(t, config.Routine{Cron: "30 2 * * *", Timezone: "Europe/Berlin"})
	var got []string
	for x := utc("2026-03-28T00:00:00Z"); x.Before(utc("2026-03-31T00:00:00Z")); {
		x = s.Next(x)
		got = append(got, x.Format(time.RFC3339))
	}
	want := []string{"2026-03-28T01:30:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"}
	if len(got) != len(want) {
		t.Fatalf("spring ticks %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("spring ticks %v, want %v", got, want)
		}
	}
	// Downtime over the gap: one catch-up run for the latest tick, and
	// the missing 29 March is not counted as missed.
	d := DueAt(s, utc("2026-03-28T01:30:00Z"), time.Time{}, utc("2026-03-30T12:00:00Z"))
	if !d.Tick.Equal(utc("2026-03-30T00:30:00Z")) || d.Missed != 0 {
		t.Fatalf("due over the gap = %+v", d)
	}
	d = DueAt(s, utc("2026-10-24T00:30:00Z"), time.Time{}, utc("2026-10-25T01:45:00Z"))
	if !d.Tick.Equal(utc("2026-10-25T01:30:00Z")) || d.Missed != 1 {
		t.Fatalf("due on the repeated hour = %+v, want tick 01:30Z with the 00:30Z tick missed", d)
	}
}

func TestEveryIsEpochAligned(t *testing.T) {
	s := mustSchedule(t, config.Routine{Every: 5 * time.Minute})
	if got := s.Prev(utc("2026-03-10T10:07:30Z")); !got.Equal(utc("2026-03-10T10:05:00Z")) {
		t.Errorf("Prev = %s", got)
	}
	if got := s.Next(utc("2026-03-10T10:05:00Z")); !got.Equal(utc("2026-03-10T10:10:00Z")) {
		t.Errorf("Next = %s", got)
	}
	if got := s.Prev(utc("2026-03-10T10:05:00Z")); !got.Equal(utc("2026-03-10T10:05:00Z")) {
		t.Errorf("Prev at a tick = %s, want the tick itself", got)
	}
	if _, err := ParseSchedule(config.Routine{Name: "x", Every: 90 * time.Second}); err == nil {
		t.Error("every 90s accepted; schedules are whole minutes")
	}
}

// The due computation with a moving fake clock: first start, a run per
// tick, then a long downtime that catches up once (saying how many ticks
// it skipped), never once per missed tick.
func TestDueCatchesUpOnceAfterDowntime(t *testing.T) {
	s := mustSchedule(t, config.Routine{Every: 5 * time.Minute})
	since := utc("2026-03-10T10:03:00Z")
	// Never ran, and the latest tick is before the watcher started: wait.
	if d := DueAt(s, time.Time{}, since, utc("2026-03-10T10:04:00Z")); !d.Tick.IsZero() {
		t.Fatalf("due before the first tick after start: %+v", d)
	}
	// The first tick after start is due.
	d := DueAt(s, time.Time{}, since, utc("2026-03-10T10:05:20Z"))
	if !d.Tick.Equal(utc("2026-03-10T10:05:00Z")) || d.Missed != 0 {
		t.Fatalf("first tick: %+v", d)
	}
	last := d.Tick
	// Same tick again: not due.
	if d := DueAt(s, last, since, utc("2026-03-10T10:09:59Z")); !d.Tick.IsZero() {
		t.Fatalf("due twice for one tick: %+v", d)
	}
	// Next tick: due, nothing missed.
	if d := DueAt(s, last, since, utc("2026-03-10T10:10:00Z")); !d.Tick.Equal(utc("2026-03-10T10:10:00Z")) || d.Missed != 0 {
		t.Fatalf("next tick: %+v", d)
	}
	// Down from 10:05 to 11:02: one run, for 11:00, having missed 10:10 … 10:55.
	d = DueAt(s, last, since, utc("2026-03-10T11:02:00Z"))
	if !d.Tick.Equal(utc("2026-03-10T11:00:00Z")) || d.Missed != 10 {
		t.Fatalf("after downtime: %+v, want tick 11:00 with 10 missed", d)
	}
	// And once that run is recorded, nothing more is due until 11:05.
	if d := DueAt(s, d.Tick, since, utc("2026-03-10T11:04:00Z")); !d.Tick.IsZero() {
		t.Fatalf("caught up twice: %+v", d)
	}
}
