package baseline

import (
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
