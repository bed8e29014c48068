package baseline

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// hourly builds n hourly points from start with value f(t).
func hourly(start time.Time, n int, f func(t time.Time) float64) []Point {
	out := make([]Point, n)
	for i := range out {
		t := start.Add(time.Duration(i) * time.Hour)
		out[i] = Point{At: t, Value: f(t)}
	}
	return out
}

// The billing story: egress_bytes was null in 0% of rows for 14 days of
// hourly checks, then today from 14:00 it climbs. The always-zero rule must
// fire however small the new rate is, and today's own hours must not count.
func TestAlwaysZeroRateThatIsNotZeroNow(t *testing.T) {
	today := time.Date(2025, 3, 11, 0, 0, 0, 0, time.UTC) // a Tuesday
	history := hourly(today.AddDate(0, 0, -14), 14*24, func(time.Time) float64 { return 0 })
	// Today's hours so far, already stored by earlier runs of today's check.
	history = append(history, hourly(today, 14, func(time.Time) float64 { return 0 })...)
	history = append(history, Point{At: today.Add(14 * time.Hour), Value: 0.05})

	opts := Options{TrainBefore: today, ZeroRule: true, Direction: Up}
	j := Score(history, today.Add(15*time.Hour), 0.18, opts)
	if j.Verdict != Anomalous || j.Basis != AlwaysZero {
		t.Fatalf("18%% nulls after 14 days of 0%%: got %s (%s), want anomalous by the always-zero rule", j.Verdict, j.Basis)
	}
	if j.N != 14*24 {
		t.Errorf("judged on %d points, want the 336 points before today", j.N)
	}
	if !strings.Contains(j.Reason, "every one of 336 earlier points was 0") {
		t.Errorf("reason %q should say every earlier point was 0", j.Reason)
	}
	// Even a single null in ten thousand rows breaks "0% in every check".
	if j := Score(history, today.Add(15*time.Hour), 0.0001, opts); j.Verdict != Anomalous {
		t.Errorf("0.01%% after always 0%%: got %s, want anomalous", j.Verdict)
	}
	if j := Score(history, today.Add(13*time.Hour), 0, opts); j.Verdict != Normal {
		t.Errorf("0%% at 13:00: got %s, want normal", j.Verdict)
	}
	// Without the rule the series has no spread, so it would need the
	// floors; the rule is what names the reason.
	if j := Score(history, today.Add(15*time.Hour), 0.18, Options{TrainBefore: today, Direction: Up}); j.Basis == AlwaysZero {
		t.Errorf("always-zero basis used without ZeroRule")
	}
}

// A noisy series with a Monday-morning peak three times the usual level.
// After five weeks the peak is its own normal on a Monday and an anomaly on
// a Tuesday.
func TestMondayPeakIsNormalOnMondayOnly(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	start := time.Date(2025, 2, 3, 0, 0, 0, 0, time.UTC) // a Monday
	peak := func(t time.Time) bool { return t.Weekday() == time.Monday && t.Hour() >= 9 && t.Hour() <= 12 }
	history := hourly(start, 5*7*24, func(t time.Time) float64 {
		level := 1000.0
		if peak(t) {
			level = 3000
		}
		return level * (1 + 0.08*(rng.Float64()*2-1))
	})
	monday10 := start.AddDate(0, 0, 35).Add(10 * time.Hour)
	tuesday10 := monday10.AddDate(0, 0, 1)

	j := Score(history, monday10, 3150, Options{})
	if j.Verdict != Normal {
		t.Fatalf("usual Monday peak judged %s: %s", j.Verdict, j.Reason)
	}
	if !j.Seasonal || j.Basis != HourOfWeek || j.N != 5 {
		t.Errorf("Monday 10:00 should be judged on the 5 earlier Mondays at 10:00, got basis %s n=%d", j.Basis, j.N)
	}
	if j := Score(history, tuesday10, 3150, Options{}); j.Verdict != Anomalous {
		t.Errorf("a Monday-sized peak on a Tuesday judged %s: %s", j.Verdict, j.Reason)
	}
	if j := Score(history, monday10, 1000, Options{}); j.Verdict != Anomalous {
		t.Errorf("a missing Monday peak judged %s: %s", j.Verdict, j.Reason)
	}
	if j := Score(history, tuesday10, 1040, Options{}); j.Verdict != Normal {
		t.Errorf("an ordinary Tuesday judged %s: %s", j.Verdict, j.Reason)
	}
}

// A day-long outage in the history must not teach the baseline that zero
// rows is normal.
func TestIncidentDayDoesNotTeachTheBaseline(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	start := time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC)
	outage := start.AddDate(0, 0, 14)
	history := hourly(start, 21*24, func(t time.Time) float64 {
		if !t.Before(outage) && t.Before(outage.AddDate(0, 0, 1)) {
			return 0
		}
		return 500 * (1 + 0.05*(rng.Float64()*2-1))
	})
	next := start.AddDate(0, 0, 21).Add(10 * time.Hour)
	if j := Score(history, next, 0, Options{}); j.Verdict != Anomalous {
		t.Errorf("zero rows a week after a day-long outage judged %s: %s", j.Verdict, j.Reason)
	}
	j := Score(history, next, 505, Options{})
	if j.Verdict != Normal {
		t.Errorf("a normal hour after the outage judged %s: %s", j.Verdict, j.Reason)
	}
	// The outage Monday is one of the three Mondays at 10:00 judged against;
	// the median stays at the usual level and the range stays tight.
	if j.Median < 475 || j.Median > 525 || j.Low < 350 || j.High > 650 {
		t.Errorf("baseline median %v range %v–%v was pulled by the outage", j.Median, j.Low, j.High)
	}
}

// The window being judged never trains its own baseline: with today's
// incident hours excluded the incident is anomalous; had they been used,
// the incident would have looked normal by noon.
func TestJudgedWindowDoesNotTrainItself(t *testing.T) {
	today := time.Date(2025, 3, 11, 0, 0, 0, 0, time.UTC)
	history := hourly(today.AddDate(0, 0, -10), 10, func(t time.Time) float64 { return 100 + float64(t.Day()%3) })
	history = append(history, hourly(today, 12, func(time.Time) float64 { return 300 })...)
	noon := today.Add(12 * time.Hour)

	j := Score(history, noon, 300, Options{TrainBefore: today})
	if j.Verdict != Anomalous || j.History != 10 {
		t.Errorf("with today excluded: %s on %d points, want anomalous on 10", j.Verdict, j.History)
	}
	if j := Score(history, noon, 300, Options{}); j.Verdict != Normal {
		t.Errorf("control: training on today's own hours should have hidden the incident, got %s", j.Verdict)
	}
}

func TestTooLittleHistoryIsLearning(t *testing.T) {
	now := time.Date(2025, 3, 11, 12, 0, 0, 0, time.UTC)
	history := hourly(now.Add(-5*time.Hour), 5, func(time.Time) float64 { return 10 })
	j := Score(history, now, 1e6, Options{})
	if j.Verdict != Learning || j.N != 5 {
		t.Fatalf("got %s on %d points, want learning on 5", j.Verdict, j.N)
	}
}

func TestDirectionUpIgnoresDrops(t *testing.T) {
	now := time.Date(2025, 3, 11, 12, 0, 0, 0, time.UTC)
	history := hourly(now.Add(-48*time.Hour), 48, func(t time.Time) float64 { return 0.2 + 0.001*float64(t.Hour()%5) })
	if j := Score(history, now, 0.01, Options{Direction: Up}); j.Verdict != Normal {
		t.Errorf("a drop in a rate judged with Direction Up: %s", j.Verdict)
	}
	if j := Score(history, now, 0.01, Options{}); j.Verdict != Anomalous {
		t.Errorf("the same drop judged both ways: %s", j.Verdict)
	}
	if j := Score(history, now, 0.5, Options{Direction: Up}); j.Verdict != Anomalous || j.Score <= 0 {
		t.Errorf("a rise judged with Direction Up: %s score %v", j.Verdict, j.Score)
	}
}

// A perfectly steady series still tolerates small wobbles (the relative
// floor), widened by the error of a centre taken from 72 points, and the
// expected range is reported in the metric's units.
func TestSteadySeriesUsesTheFloor(t *testing.T) {
	now := time.Date(2025, 3, 11, 12, 0, 0, 0, time.UTC)
	history := hourly(now.Add(-72*time.Hour), 72, func(time.Time) float64 { return 1000 })
	j := Score(history, now, 1010, Options{})
	spread := 20 * math.Sqrt(1+math.Pi/2/72)
	if j.Verdict != Normal || j.N != 72 || math.Abs(j.Spread-spread) > 1e-9 || math.Abs(j.Low-(1000-3.5*spread)) > 1e-9 ||
		math.Abs(j.High-(1000+3.5*spread)) > 1e-9 {
		t.Errorf("got %s spread %v range %v–%v on %d points, want normal with spread %.2f", j.Verdict, j.Spread, j.Low, j.High, j.N, spread)
	}
	if j := Score(history, now, 1100, Options{}); j.Verdict != Anomalous {
		t.Errorf("10%% above a steady series judged %s", j.Verdict)
	}
}
