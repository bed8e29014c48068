package baseline

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// volume is a table's usual rows per hour: a day curve, weekends at 40%.
func volume(t time.Time) float64 {
	day := 1000 + 800*math.Sin(math.Pi*float64(t.Hour())/24)
	if weekend(t) {
		day *= 0.4
	}
	return day
}

// Three weeks of hourly history (3% noise, about Poisson noise at 1,000
// rows an hour) with a weekday/weekend pattern (under the
// four weeks hour-of-week needs): a healthy fourth week, weekends included,
// raises at most a couple of alarms in 168 hours, and a 20% shift on any
// hour is caught. The judgement names the weekday/weekend basis.
func TestTwentyOneDaysWeekendsQuietAndTwentyPercentCaught(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 4))
	start := time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC) // a Monday
	noisy := func(t time.Time) float64 { return math.Round(volume(t) * (1 + 0.03*rng.NormFloat64())) }
	history := hourly(start, 21*24, noisy)
	judgedFrom := start.AddDate(0, 0, 21)
	opts := Options{TrainBefore: judgedFrom, Counts: true, RelativeFloor: 0.03}

	alarms, caughtDown, caughtUp := 0, 0, 0
	for h := 0; h < 7*24; h++ {
		at := judgedFrom.Add(time.Duration(h) * time.Hour)
		j := Score(history, at, noisy(at), opts)
		if j.Basis != DayTypeHour {
			t.Fatalf("%s judged on %s, want %s with 21 days of history", at, j.Basis, DayTypeHour)
		}
		if j.Verdict == Anomalous {
			alarms++
			t.Logf("healthy hour flagged: %s %s", at.Format("Mon 15:04"), j.Reason)
		}
		if j := Score(history, at, 0.8*volume(at), opts); j.Verdict == Anomalous {
			caughtDown++
		} else {
			t.Logf("missed: %s %s spread %.1f", at.Format("Mon 15:04"), j.Reason, j.Spread)
		}
		if j := Score(history, at, 1.2*volume(at), opts); j.Verdict == Anomalous {
			caughtUp++
		} else {
			t.Logf("missed up: %s %s", at.Format("Mon 15:04"), j.Reason)
		}
	}
	if alarms > 2 {
		t.Errorf("%d alarms in a healthy week of 168 hours; want at most 2", alarms)
	}
	// A weekend hour is judged against weekends, so it is quiet; against
	// the hour of day it would be 60% low.
	sat := judgedFrom.AddDate(0, 0, 5).Add(11 * time.Hour)
	j := Score(history, sat, volume(sat), opts)
	if j.Verdict != Normal || j.Slot != "weekend 11:00" {
		t.Errorf("usual Saturday 11:00: %s on %q: %s", j.Verdict, j.Slot, j.Reason)
	}
	// The few it may miss are weekend nights of about 400 rows: there a
	// 20% rise is under four Poisson standard errors (the square-root
	// scale compresses rises), from a centre that is a median of six
	// weekend points.
	if caughtDown < 165 || caughtUp < 162 {
		t.Errorf("a 20%% shift caught in %d (down) and %d (up) of 168 hours; want nearly all", caughtDown, caughtUp)
	}
	// The band is the point: far narrower than the ±50% hour of day gives.
	if width := (j.High - j.Low) / j.Median; width > 0.4 {
		t.Errorf("expected band is %.0f%% of the median wide; want under 40%%", 100*width)
	}
}

// After four weeks the same hour of the week takes over.
func TestFourWeeksUseHourOfWeek(t *testing.T) {
	start := time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC)
	history := hourly(start, 28*24, volume)
	at := start.AddDate(0, 0, 28).Add(9 * time.Hour)
	if j := Score(history, at, volume(at), Options{}); j.Basis != HourOfWeek || j.Slot != "Monday 09:00" {
		t.Errorf("basis %s slot %q, want hour_of_week Monday 09:00", j.Basis, j.Slot)
	}
}

// Shrinkage: a weekday/weekend difference that is pure noise is taken back
// toward the hour of day; a real one is kept.
func TestDayTypeShrinkage(t *testing.T) {
	start := time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC)
	flat := hourly(start, 14*24, func(t time.Time) float64 {
		if weekend(t) {
			return 1001 // no real weekend effect
		}
		return 1000
	})
	sat := start.AddDate(0, 0, 19).Add(10 * time.Hour)
	spread := 50.0
	if got := shrinkTowardHour(flat, sat, time.UTC, 1001, spread, 4); math.Abs(got-1000) > 0.1 {
		t.Errorf("a 1-row weekend effect against a spread of 50 kept: centre %.2f, want about 1000", got)
	}
	if got := shrinkTowardHour(hourly(start, 14*24, volume), sat, time.UTC, volume(sat), 20, 4); math.Abs(got-volume(sat)) > 5 {
		t.Errorf("a real weekend dip was shrunk away: centre %.1f, want about %.1f", got, volume(sat))
	}
}

// A quiet hour of a count: 15 where 20 is usual is Poisson noise.
func TestCountsFloor(t *testing.T) {
	start := time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC)
	history := hourly(start, 28*24, func(time.Time) float64 { return 20 })
	at := start.AddDate(0, 0, 28)
	if j := Score(history, at, 12, Options{Counts: true}); j.Verdict != Normal {
		t.Errorf("12 where 20 is usual, counts: %s (%s)", j.Verdict, j.Reason)
	}
	if j := Score(history, at, 12, Options{}); j.Verdict != Anomalous {
		t.Errorf("12 where a steady 20 is usual, not counts: %s", j.Verdict)
	}
	if j := Score(history, at, 2, Options{Counts: true}); j.Verdict != Anomalous {
		t.Errorf("2 where 20 is usual, counts: %s", j.Verdict)
	}
	// Small counts: an empty hour where 10 is usual has Poisson
	// probability 0.005%, so it is news; 3 is not.
	ten := hourly(start, 28*24, func(time.Time) float64 { return 10 })
	if j := Score(ten, at, 0, Options{Counts: true}); j.Verdict != Anomalous {
		t.Errorf("0 where 10 is usual: %s (%s)", j.Verdict, j.Reason)
	}
	if j := Score(ten, at, 3, Options{Counts: true}); j.Verdict != Normal || j.Score < -3.5 {
		t.Errorf("3 where 10 is usual: %s score %.1f", j.Verdict, j.Score)
	}
}

// The reason states the move in plain words and numbers.
func TestReasonStatesTheMove(t *testing.T) {
	start := time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC)
	history := hourly(start, 35*24, func(t time.Time) float64 { return 39100 })
	at := start.AddDate(0, 0, 36).Add(11 * time.Hour) // a Tuesday
	j := Score(history, at, 28543, Options{})
	if j.Verdict != Anomalous || j.Slot != "Tuesday 11:00" {
		t.Fatalf("verdict %s slot %q", j.Verdict, j.Slot)
	}
	if pc := PercentChange(j.Value, j.Median); math.Round(pc) != -27 {
		t.Errorf("move %.1f%%, want -27%%", pc)
	}
	want := "28,543 is 27% below the usual Tuesday 11:00 (median 39,100)"
	if len(j.Reason) < len(want) || j.Reason[:len(want)] != want {
		t.Errorf("reason %q, want it to start %q", j.Reason, want)
	}
}
