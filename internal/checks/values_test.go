package checks

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// payments builds shop.payments with 2,000 rows whose amount runs 30 to 50
// (median 40) times scale, and every tenth fee zero.
func payments(scale float64) string {
	return `CREATE TABLE shop.payments AS SELECT range AS payment_id, (30 + range % 21) * ` + trimFloat(scale) + ` AS amount,
		CASE WHEN range % 10 = 0 THEN 0 ELSE 1.5 END AS fee FROM range(2000)`
}

// A numeric column whose median halves (a unit change upstream) is flagged
// by the profile alone: no team metric, no expectation. The value profile
// is part of the same single scan as every other check.
func TestMedianThatHalvesIsFlaggedWithoutATeamMetric(t *testing.T) {
	usual := openFixture(t, payments(1))
	halved := openFixture(t, payments(0.5))
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		start := day.Add(8 * time.Hour)
		clk := clock.NewFake(start)
		env := Env{DB: db, Warehouse: usual, Clock: clk, Agent: "dw-quality", Tool: "run_quality_check"}
		var rep *Report
		for i := range 8 {
			clk.Set(start.Add(time.Duration(i) * time.Hour))
			var err error
			if rep, err = RunCheck(ctx, env, CheckRequest{Table: "payments"}); err != nil {
				t.Fatal(err)
			}
		}
		if want := checkStatements(rep); rep.Statements != want {
			t.Errorf("the profile took %d statements, want one per check on DuckDB (%d)", rep.Statements, want)
		}
		if m := resultFor(t, rep, "distribution(amount)", MetricValueMedian); m.Status != Pass || m.Observed == nil || *m.Observed != 40 {
			t.Fatalf("usual median: %s %v (%s)", m.Status, m.Observed, m.Message)
		}
		if slices.Contains(rep.Problems, ProblemValues) {
			t.Fatalf("healthy table has a values problem: %s", rep.Summary)
		}

		clk.Set(start.Add(8 * time.Hour))
		env.Warehouse = halved
		rep, err := RunCheck(ctx, env, CheckRequest{Table: "payments"})
		if err != nil {
			t.Fatal(err)
		}
		med := resultFor(t, rep, "distribution(amount)", MetricValueMedian)
		if med.Status != Anomalous || med.Problem != ProblemValues || med.Observed == nil || *med.Observed != 20 {
			t.Fatalf("halved median: %s %s %v (%s)", med.Status, med.Problem, med.Observed, med.Message)
		}
		if med.Usual == nil || *med.Usual != 40 || med.ChangePct == nil || math.Round(*med.ChangePct) != -50 {
			t.Errorf("move: usual %v change %v", deref(med.Usual), deref(med.ChangePct))
		}
		if want := "amount median is 20, 50% below the usual level (median 40; expected"; len(med.Message) < len(want) || med.Message[:len(want)] != want {
			t.Errorf("message %q, want it to start %q", med.Message, want)
		}
		for _, m := range []string{MetricValueMean, MetricValueP95} {
			if r := resultFor(t, rep, "distribution(amount)", m); r.Status != Anomalous {
				t.Errorf("%s of a halved column: %s (%s)", m, r.Status, r.Message)
			}
		}
		// The fee column did not move, and its zero share is as usual.
		if r := resultFor(t, rep, "distribution(fee)", MetricZeroRate); r.Status != Pass || r.Observed == nil || *r.Observed != 0.1 {
			t.Errorf("fee zero share: %s %v (%s)", r.Status, r.Observed, r.Message)
		}
		if !slices.Contains(rep.Problems, ProblemValues) || rep.Statements != checkStatements(rep) {
			t.Errorf("problems %v in %d statements: %s", rep.Problems, rep.Statements, rep.Summary)
		}
	})
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// One odd hour of a value profile is chance among hundreds of judgements;
// two in a row are a shift. A row count is demoted alone only within
// loneCountScore and when no neighbour is off on the same side. Null rates
// are not affected.
func TestLoneBucketIsNotAProblem(t *testing.T) {
	at := func(h int) time.Time { return day.Add(time.Duration(h) * time.Hour) }
	mk := func(check int, metric string, h int, s Status, score float64) judged {
		return judged{obs: Observation{Check: check, Metric: metric, Bucket: at(h)}, status: s, j: &baseline.Judgement{Score: score}}
	}
	all := []judged{
		mk(0, MetricValueMedian, 2, Pass, 0), mk(0, MetricValueMedian, 1, Anomalous, 5), mk(0, MetricValueMedian, 0, Pass, 0),
		mk(0, MetricValueP95, 0, Pass, 0), mk(0, MetricValueP95, 1, Anomalous, 4), mk(0, MetricValueP95, 2, Anomalous, 4),
		mk(0, MetricNullRate, 1, Anomalous, 4),
		// A lone hour 3.9 errors low, a lone one 5.2 low, two in a row low.
		mk(1, MetricRowCount, 0, Pass, 0), mk(1, MetricRowCount, 1, Anomalous, -3.9), mk(1, MetricRowCount, 2, Pass, 1),
		mk(1, MetricRowCount, 3, Anomalous, -5.2), mk(1, MetricRowCount, 4, Pass, 0),
		mk(1, MetricRowCount, 5, Anomalous, -3.7), mk(1, MetricRowCount, 6, Anomalous, -3.8),
		// Off on both sides in a row: two lone hours, not a shift.
		mk(1, MetricRowCount, 7, Pass, 0), mk(1, MetricRowCount, 8, Anomalous, 3.8), mk(1, MetricRowCount, 9, Anomalous, -3.8),
	}
	var before []Status
	for _, jd := range all {
		before = append(before, jd.status)
	}
	demoteLoneBuckets(all)
	want := []Status{Pass, Pass, Pass, Pass, Anomalous, Anomalous, Anomalous,
		Pass, Pass, Pass, Anomalous, Pass, Anomalous, Anomalous, Pass, Pass, Pass}
	for i, jd := range all {
		if jd.status != want[i] {
			t.Errorf("%s at %s: %s, want %s", jd.obs.Metric, jd.obs.Bucket.Format("15:04"), jd.status, want[i])
		}
		if demoted := jd.lone; demoted != (want[i] == Pass && before[i] == Anomalous) {
			t.Errorf("%s at %s: lone %v", jd.obs.Metric, jd.obs.Bucket.Format("15:04"), demoted)
		}
	}
}
