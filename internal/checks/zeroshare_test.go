package checks

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// The value profile's zero share, on seeded hourly data: amounts are 0 in
// about 2% of rows (free orders), a day curve of 20 to 300 rows an hour.
// Three weeks of history, then a healthy week checked each afternoon opens
// nothing; a day on which a deploy starts writing 0 for a fifth of the
// amounts (a failed price lookup) is flagged as a values problem from that
// hour, as is a column that never held a 0 and starts to.
func TestZeroShareChangeIsFlaggedAndAHealthyWeekIsQuiet(t *testing.T) {
	wh := openFixture(t)
	tab := resolve(t, wh, "events")
	start := day.AddDate(0, 0, -21)
	rows := func(rng *rand.Rand, at time.Time) int64 {
		level := 20 + 280*math.Pow(math.Sin(math.Pi*float64(at.Hour())/24), 2)
		return int64(math.Round(level + math.Sqrt(level)*rng.NormFloat64()))
	}
	binomial := func(rng *rand.Rand, n int64, p float64) int64 {
		k := int64(0)
		for range n {
			if rng.Float64() < p {
				k++
			}
		}
		return k
	}
	// share is the zero share of column col at hour at.
	type column struct {
		name  string
		share func(at time.Time) float64
	}
	obsAt := func(rng *rand.Rand, at time.Time, cols []column) []Observation {
		n := rows(rng, at)
		out := []Observation{{Check: 0, Metric: MetricRowCount, Bucket: at, Value: float64(n), Count: n, Of: n}}
		for i, c := range cols {
			z := binomial(rng, n, c.share(at))
			out = append(out, Observation{Check: i + 1, Metric: MetricZeroRate, Dimension: c.name, Bucket: at, Count: z, Of: n, Value: float64(z) / float64(n)})
		}
		return out
	}
	planFor := func(w Window, cols []column) *ScanPlan {
		checks := []PlannedCheck{{Spec: Spec{Kind: KindRowCount}, Label: "row_count"}}
		for _, c := range cols {
			checks = append(checks, PlannedCheck{Spec: Spec{Kind: KindDistribution, Column: c.name, Inferred: true}, Label: "distribution(" + c.name + ")"})
		}
		return &ScanPlan{Asset: fixtureAsset, Table: tab, Dialect: wh.Dialect(), Window: w, Checks: checks}
	}
	// checkDay judges hours 0–15 of d at 16:10, as a daily check would.
	checkDay := func(t *testing.T, db *store.DB, rng *rand.Rand, d time.Time, cols []column) *Report {
		w := Window{Column: "event_time", Start: d, End: d.Add(24 * time.Hour), Grain: Hour}
		var obs []Observation
		for h := range 16 {
			obs = append(obs, obsAt(rng, d.Add(time.Duration(h)*time.Hour), cols)...)
		}
		return evaluateObs(t, db, planFor(w, cols), d.Add(16*time.Hour+10*time.Minute), obs...)
	}
	usual := func(time.Time) float64 { return 0.02 }
	never := func(time.Time) float64 { return 0 }
	seed := func(t *testing.T, db *store.DB, rng *rand.Rand, cols []column) {
		var samples []baseline.Sample
		for at := start; at.Before(day); at = at.Add(time.Hour) {
			for _, o := range obsAt(rng, at, cols) {
				samples = append(samples, point(o.Metric, o.Dimension, "hour", at, o.Value))
			}
		}
		record(t, db, samples)
	}
	zeroResult := func(t *testing.T, rep *Report, col string) MetricResult {
		return resultFor(t, rep, "distribution("+col+")", MetricZeroRate)
	}

	storetest.Each(t, func(t *testing.T, db *store.DB) {
		rng := rand.New(rand.NewPCG(14, 5))
		cols := []column{{"amount", usual}, {"fee", never}}
		seed(t, db, rng, cols)
		for i := range 7 {
			rep := checkDay(t, db, rng, day.AddDate(0, 0, i), cols)
			for _, r := range rep.Results {
				if r.Status == Anomalous || r.Status == Fail {
					t.Errorf("healthy %s: %s %s %s", day.AddDate(0, 0, i).Format("Mon 01-02"), r.Check, r.Status, r.Message)
				}
			}
		}
		// The deploy at 10:00: a fifth of the amounts are 0, and fee, 0 in
		// no row for four weeks, is 0 in 6% of them.
		bad := day.AddDate(0, 0, 7)
		deploy := bad.Add(10 * time.Hour)
		after := func(share float64) func(time.Time) float64 {
			return func(at time.Time) float64 {
				if at.Before(deploy) {
					return 0
				}
				return share
			}
		}
		cols = []column{{"amount", func(at time.Time) float64 { return usual(at) + after(0.18)(at) }}, {"fee", after(0.06)}}
		rep := checkDay(t, db, rng, bad, cols)
		for _, col := range []string{"amount", "fee"} {
			r := zeroResult(t, rep, col)
			first := time.Time{}
			for _, b := range r.Buckets {
				if b.Status == Anomalous && first.IsZero() {
					first = b.Start
				}
			}
			if r.Status != Anomalous || r.Problem != ProblemValues || !first.Equal(deploy) {
				t.Errorf("%s zero share after the deploy at 10:00: %s, first anomalous hour %s: %s", col, r.Status, first.Format("15:04"), r.Message)
			}
		}
	})
}
