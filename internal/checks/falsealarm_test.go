package checks

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// The cases here are the false alarms the seeded end-to-end packs found
// (issue 14): each seeds the history that made a rule fire, checks it is
// quiet now, and checks that a real problem of the same kind still fires.

// evaluateObs judges hand-made observations of a hand-made plan, so a case
// states exactly the value and count a scan would have read.
func evaluateObs(t *testing.T, db *store.DB, plan *ScanPlan, now time.Time, obs ...Observation) *Report {
	t.Helper()
	rep, err := Evaluate(context.Background(), db, &Scan{Plan: plan, ObservedAt: now, Observations: obs})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func record(t *testing.T, db *store.DB, samples []baseline.Sample) {
	t.Helper()
	if err := baseline.Record(context.Background(), db, time.Now(), samples...); err != nil {
		t.Fatal(err)
	}
}

func point(metric, dim, grain string, at time.Time, v float64) baseline.Sample {
	return baseline.Sample{Series: baseline.Series{Asset: fixtureAsset, Metric: metric, Dimension: dim, Grain: grain},
		Point: baseline.Point{At: at, Value: v}}
}

// A continuously written table checked once a day at busy weekday hours:
// its newest row is seconds old then. On a quiet Sunday afternoon (20 rows
// an hour, a row every three minutes) the newest row is minutes old, and
// that is its usual gap, not staleness. A table that stopped writing for
// hours is stale on Sunday too, and 199 s is stale at a busy hour.
func TestStalenessFloorFollowsTheUsualGapBetweenRows(t *testing.T) {
	wh := openFixture(t)
	tab := resolve(t, wh, "events")
	sunday := time.Date(2025, 3, 9, 15, 0, 0, 0, time.UTC)
	tuesday := sunday.Add(2 * 24 * time.Hour).Add(-4 * time.Hour) // 11:00
	seed := func(t *testing.T, db *store.DB, rowsPerHour bool) {
		var samples []baseline.Sample
		if rowsPerHour {
			for h := 21 * 24; h > 0; h-- {
				at := sunday.Add(-time.Duration(h) * time.Hour)
				rows := 600.0
				if wd := at.Weekday(); wd == time.Saturday || wd == time.Sunday {
					rows = 20
				}
				samples = append(samples, point(MetricRowCount, "", "hour", at, rows+float64(h%3)))
			}
		}
		// One snapshot per daily check, all at busy weekday hours.
		for d, v := range []float64{8, 12, 10, 13, 9, 11} {
			at := time.Date(2025, 3, 3+d%5, 11, 0, 0, 0, time.UTC)
			if d == 5 {
				at = time.Date(2025, 2, 28, 11, 0, 0, 0, time.UTC)
			}
			samples = append(samples, point(MetricStaleness, "event_time", "", at, v))
		}
		record(t, db, samples)
	}
	plan := &ScanPlan{Asset: fixtureAsset, Table: tab, Dialect: wh.Dialect(),
		Checks: []PlannedCheck{{Spec: Spec{Kind: KindFreshness, Column: "event_time", Inferred: true}, Label: "freshness(event_time)"}}}
	stale := func(now time.Time, age time.Duration) Observation {
		return Observation{Metric: MetricStaleness, Dimension: "event_time", Total: true, Value: age.Seconds(), Newest: now.Add(-age)}
	}
	judge := func(t *testing.T, db *store.DB, now time.Time, age time.Duration) MetricResult {
		t.Helper()
		return resultFor(t, evaluateObs(t, db, plan, now, stale(now, age)), "freshness(event_time)", MetricStaleness)
	}

	storetest.Each(t, func(t *testing.T, db *store.DB) {
		seed(t, db, true)
		if r := judge(t, db, sunday, 199*time.Second); r.Status != Pass {
			t.Errorf("199 s on a Sunday afternoon of a row every 3 minutes: %s %s (expected %+v)", r.Status, r.Message, r.Expected)
		}
		if r := judge(t, db, sunday, 3*time.Hour); r.Status != Anomalous {
			t.Errorf("3 hours without a row on a Sunday afternoon: %s %s", r.Status, r.Message)
		}
		if r := judge(t, db, tuesday, 199*time.Second); r.Status != Anomalous {
			t.Errorf("199 s at a busy weekday hour of a row every 6 s: %s %s (expected %+v)", r.Status, r.Message, r.Expected)
		}
	})
	// Without rows-per-hour history the gap is unknown: the 30-second
	// floor stands, and the same 199 s is judged as before.
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		seed(t, db, false)
		if r := judge(t, db, sunday, 199*time.Second); r.Status != Anomalous {
			t.Errorf("no volume history: 199 s against snapshots of 8-13 s: %s %s", r.Status, r.Message)
		}
	})
}

// seller_id of seller_payouts is guessed as the key from the table's name,
// but a seller is paid several times a day: its history repeats in busy
// hours and not at night, so each night slot is "always zero" and a night
// hour with one repeat used to be anomalous. A guessed key whose history
// is unique is still judged, and a declared key always is.
func TestInferredKeyIsJudgedOnlyWhenHistoryShowsItUnique(t *testing.T) {
	wh := openFixture(t)
	tab := resolve(t, wh, "events")
	w := Window{Column: "event_time", Start: day, End: day.Add(24 * time.Hour), Grain: Hour}
	now := day.Add(5*time.Hour + 30*time.Minute)
	seed := func(t *testing.T, db *store.DB) {
		var samples []baseline.Sample
		for h := 21 * 24; h > 0; h-- {
			at := day.Add(-time.Duration(h) * time.Hour)
			repeats := 0.0
			if at.Hour() >= 7 {
				repeats = 0.05 + 0.01*float64(h%4)
			}
			samples = append(samples,
				point(MetricDuplicateRate, "seller_id", "hour", at, repeats),
				point(MetricDuplicateRate, "payout_id", "hour", at, 0))
		}
		record(t, db, samples)
	}
	key := func(col string, inferred bool) PlannedCheck {
		return PlannedCheck{Spec: Spec{Kind: KindUniqueness, Columns: []string{col}, Inferred: inferred}, Label: "uniqueness(" + col + ")"}
	}
	nightRepeat := func(check int, col string) []Observation {
		// Two night hours in a row with a repeat each.
		return []Observation{
			{Check: check, Metric: MetricDuplicateRate, Dimension: col, Bucket: day.Add(2 * time.Hour), Value: 0.1, Count: 2, Of: 20},
			{Check: check, Metric: MetricDuplicateRate, Dimension: col, Bucket: day.Add(3 * time.Hour), Value: 0.1, Count: 2, Of: 20},
		}
	}

	storetest.Each(t, func(t *testing.T, db *store.DB) {
		seed(t, db)
		plan := &ScanPlan{Asset: fixtureAsset, Table: tab, Dialect: wh.Dialect(), Window: w,
			Checks: []PlannedCheck{key("seller_id", true), key("payout_id", true)}}
		obs := append(nightRepeat(0, "seller_id"), nightRepeat(1, "payout_id")...)
		rep := evaluateObs(t, db, plan, now, obs...)
		seller := resultFor(t, rep, "uniqueness(seller_id)", MetricDuplicateRate)
		if seller.Status != Pass || !strings.Contains(seller.Message, "not judged as a key") ||
			!strings.Contains(seller.Message, "repeats in 357 of 504 earlier checks") {
			t.Errorf("seller_id repeats every day hour: %s %s", seller.Status, seller.Message)
		}
		payout := resultFor(t, rep, "uniqueness(payout_id)", MetricDuplicateRate)
		if payout.Status != Anomalous || len(payout.Buckets) == 0 || payout.Buckets[0].Status != Anomalous {
			t.Errorf("payout_id was unique for three weeks and repeats now: %s %s", payout.Status, payout.Message)
		}
	})
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		seed(t, db)
		plan := &ScanPlan{Asset: fixtureAsset, Table: tab, Dialect: wh.Dialect(), Window: w, Checks: []PlannedCheck{key("seller_id", false)}}
		obs := append(nightRepeat(0, "seller_id"),
			Observation{Metric: MetricDuplicateRate, Dimension: "seller_id", Total: true, Value: 0.1, Count: 4, Of: 40})
		r := resultFor(t, evaluateObs(t, db, plan, now, obs...), "uniqueness(seller_id)", MetricDuplicateRate)
		if r.Status != Fail || r.Expectation != "key must be unique" {
			t.Errorf("a declared key is judged whatever its history: %s %s", r.Status, r.Message)
		}
	})
}

// A skewed amount (cents) over night hours of 30 values: its p95 is the
// second-largest value and its mean follows one big payout, so two night
// hours in a row could leave the band. Below the minimum count they are
// not judged; a cents-to-units change over busy hours still is.
func TestTailStatisticsNeedEnoughValues(t *testing.T) {
	wh := openFixture(t)
	tab := resolve(t, wh, "events")
	w := Window{Column: "event_time", Start: day, End: day.Add(24 * time.Hour), Grain: Hour}
	now := day.Add(14*time.Hour + 30*time.Minute)
	plan := &ScanPlan{Asset: fixtureAsset, Table: tab, Dialect: wh.Dialect(), Window: w,
		Checks: []PlannedCheck{{Spec: Spec{Kind: KindDistribution, Column: "amount", Inferred: true}, Label: "distribution(amount)"}}}
	seed := func(t *testing.T, db *store.DB) {
		var samples []baseline.Sample
		for h := 21 * 24; h > 0; h-- {
			at := day.Add(-time.Duration(h) * time.Hour)
			wobble := float64(h%5) - 2
			samples = append(samples,
				point(MetricValueP95, "amount", "hour", at, 20000+500*wobble),
				point(MetricValueMean, "amount", "hour", at, 5000+100*wobble))
		}
		record(t, db, samples)
	}
	obs := func(hour int, p95, mean float64, n int64) []Observation {
		b := day.Add(time.Duration(hour) * time.Hour)
		return []Observation{
			{Metric: MetricValueP95, Dimension: "amount", Bucket: b, Value: p95, Of: n},
			{Metric: MetricValueMean, Dimension: "amount", Bucket: b, Value: mean, Of: n},
		}
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		seed(t, db)
		// Two night hours of 30 and 35 values with one large payout each.
		var night []Observation
		night = append(night, obs(2, 61000, 9800, 30)...)
		night = append(night, obs(3, 58000, 9500, 35)...)
		rep := evaluateObs(t, db, plan, now, night...)
		for _, m := range []string{MetricValueP95, MetricValueMean} {
			r := resultFor(t, rep, "distribution(amount)", m)
			if r.Status == Anomalous || r.Status == Fail {
				t.Errorf("%s over 30 values judged %s: %s", m, r.Status, r.Message)
			}
			if !strings.Contains(r.Message, "not judged: too few values (35; the ") {
				t.Errorf("%s message does not say why it is not judged: %s", m, r.Message)
			}
		}
		if rep.Status == Anomalous {
			t.Errorf("report %s: %s", rep.Status, rep.Summary)
		}
	})
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		seed(t, db)
		// The deploy writes units instead of cents from 12:00, busy hours.
		var units []Observation
		units = append(units, obs(12, 200, 50, 400)...)
		units = append(units, obs(13, 205, 51, 420)...)
		rep := evaluateObs(t, db, plan, now, units...)
		for _, m := range []string{MetricValueP95, MetricValueMean} {
			if r := resultFor(t, rep, "distribution(amount)", m); r.Status != Anomalous {
				t.Errorf("%s of 400 values a hundredth of usual judged %s: %s", m, r.Status, r.Message)
			}
		}
	})
}
