package baseline

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestWilson(t *testing.T) {
	lo, hi := Wilson(0, 0, 3)
	if lo != 0 || hi != 1 {
		t.Errorf("no trials: %v–%v, want 0–1", lo, hi)
	}
	lo, hi = Wilson(50, 100, 1.96)
	if lo < 0.40 || lo > 0.41 || hi < 0.59 || hi > 0.60 {
		t.Errorf("50/100 at 95%%: %.4f–%.4f, want about 0.404–0.596", lo, hi)
	}
}

// A null rate of 5% for weeks: 2 of 10 rows in a quiet hour is chance,
// 200 of 1,000 is not.
func TestScoreRateJudgesWithCounts(t *testing.T) {
	start := time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC)
	history := hourly(start, 28*24, func(time.Time) float64 { return 0.05 })
	at := start.AddDate(0, 0, 28)
	opts := Options{Direction: Up, ZeroRule: true, AbsoluteFloor: 0.002}
	if j := ScoreRate(history, at, 2, 10, opts); j.Verdict != Normal {
		t.Errorf("2 of 10 against 5%%: %s (%s)", j.Verdict, j.Reason)
	}
	if j := ScoreRate(history, at, 200, 1000, opts); j.Verdict != Anomalous || j.Value != 0.2 {
		t.Errorf("200 of 1000 against 5%%: %s value %v", j.Verdict, j.Value)
	}
	// The always-zero rule is stronger than counts: one null where there
	// never was one is news.
	zero := hourly(start, 28*24, func(time.Time) float64 { return 0 })
	if j := ScoreRate(zero, at, 1, 10, opts); j.Verdict != Anomalous {
		t.Errorf("1 of 10 after always 0%%: %s", j.Verdict)
	}
}

// Two counts that move together at 1:1: 15 against 17 in a quiet hour is
// chance; 150 against 1,700 is not.
func TestScoreRatioJudgesWithCounts(t *testing.T) {
	start := time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC)
	history := hourly(start, 28*24, func(t time.Time) float64 { return 1 + 0.001*float64(t.Hour()%3) })
	at := start.AddDate(0, 0, 28)
	if j := Score(history, at, 15.0/17, Options{}); j.Verdict != Anomalous {
		t.Fatalf("setup: the ratio alone should look anomalous, got %s", j.Verdict)
	}
	if j := ScoreRatio(history, at, 15, 17, Options{}); j.Verdict != Normal {
		t.Errorf("15 against 17: %s (%s)", j.Verdict, j.Reason)
	}
	if j := ScoreRatio(history, at, 150, 1700, Options{}); j.Verdict != Anomalous {
		t.Errorf("150 against 1700: %s", j.Verdict)
	}
	// Not counts (averages): judged on the ratio alone.
	if j := ScoreRatio(history, at, 15.5, 17, Options{}); j.Verdict != Anomalous {
		t.Errorf("ratio of non-counts: %s, want the ratio's own verdict", j.Verdict)
	}
}

// A quiet hour's rate of about 1% (one event in 27 rows one day in four,
// none the others): the slot median is 0, but the counts are judged against the
// slot's mean too, so 1 in 27 is chance; 9 in 27 is not.
func TestScoreRateQuietHourMedianZero(t *testing.T) {
	start := time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC)
	history := hourly(start, 28*24, func(t time.Time) float64 {
		if int(t.Sub(start).Hours()/24)%4 == 0 {
			return 1.0 / 27
		}
		return 0
	})
	at := start.AddDate(0, 0, 28).Add(time.Hour)
	opts := Options{AbsoluteFloor: 0.002}
	if j := ScoreRate(history, at, 1, 27, opts); j.Verdict != Normal || j.Median != 0 {
		t.Errorf("1 of 27 against a usual 0.9%%: %s (median %v; %s)", j.Verdict, j.Median, j.Reason)
	}
	if j := ScoreRate(history, at, 9, 27, opts); j.Verdict != Anomalous {
		t.Errorf("9 of 27 against a usual 0.9%%: %s (%s)", j.Verdict, j.Reason)
	}
}

// A mean of a bucket's values: the spread pooled over the day comes from
// busy hours of 400 rows; a quiet hour of 25 rows is noisier by
// sqrt(400/25) = 4, so the same move is ordinary there and news at a busy
// hour. Without sizes the night hour is judged as a busy one.
func TestSizeWidensTheSpreadOfAFewValues(t *testing.T) {
	start := time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC)
	rows := func(t time.Time) float64 {
		if t.Hour() < 6 {
			return 25
		}
		return 400
	}
	// Lag averages of about 40 min with 1 min of noise in busy hours.
	rng := rand.New(rand.NewPCG(3, 4))
	history := hourly(start, 21*24, func(t time.Time) float64 { return 2400 + 60*rng.NormFloat64() })
	sizeAt := func(t time.Time) (float64, bool) { return rows(t), true }
	night := start.AddDate(0, 0, 21).Add(3 * time.Hour)
	busy := night.Add(9 * time.Hour)
	move := 2400.0 + 600 // 10 minutes more
	if j := Score(history, night, move, Options{Size: rows(night), SizeAt: sizeAt, RelativeFloor: 0.01}); j.Verdict != Normal {
		t.Errorf("10 min more in a night hour of 25 rows: %s (%s)", j.Verdict, j.Reason)
	}
	if j := Score(history, busy, move, Options{Size: rows(busy), SizeAt: sizeAt, RelativeFloor: 0.01}); j.Verdict != Anomalous {
		t.Errorf("10 min more in a busy hour of 400 rows: %s (%s)", j.Verdict, j.Reason)
	}
	if j := Score(history, night, move, Options{RelativeFloor: 0.01}); j.Verdict != Anomalous {
		t.Errorf("10 min more at night without sizes: %s (%s)", j.Verdict, j.Reason)
	}
}
