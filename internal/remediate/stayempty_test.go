package remediate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/incidents"
)

// deadLetters creates shop.dead_letters, empty for ten days, then n rows
// failing every minute from 14:00 (ingested 10 s later).
func deadLetters(f *fixture, n int) {
	f.exec("CREATE SCHEMA IF NOT EXISTS shop",
		"CREATE TABLE shop.dead_letters (id BIGINT, reason VARCHAR, failed_at TIMESTAMP, ingested_at TIMESTAMP)")
	letters(f, 0, bad, n)
}

// letters writes n dead letters from `from`, one a minute.
func letters(f *fixture, first int, from time.Time, n int) {
	f.exec(fmt.Sprintf(`INSERT INTO shop.dead_letters SELECT %d + i, 'schema mismatch', TIMESTAMP '%s' + to_minutes(i),
		TIMESTAMP '%s' + to_minutes(i) + to_seconds(10) FROM range(%d) t(i)`,
		first, from.Format("2006-01-02 15:04:05"), from.Format("2006-01-02 15:04:05"), n))
}

func deadLetterIncident(f *fixture) string {
	f.t.Helper()
	id, props := f.incident([]incidents.Symptom{{Kind: incidents.SymptomVolume, Asset: "duckdb://shop.dead_letters", Metric: checks.MetricRowCount,
		Observed: 60, At: bad, Source: "run_quality_check", Detail: "60 rows at 14:00; the table should stay empty"}}, hold("duckdb://shop.dead_letters"))
	f.approve(props[0])
	return id
}

func stayResult(t *testing.T, res *Result) incidents.CheckResult {
	t.Helper()
	for _, c := range res.Checks {
		if strings.HasPrefix(c.Name, "row_count on duckdb://shop.dead_letters") {
			if !c.Required || c.Asset != "duckdb://shop.dead_letters" {
				t.Errorf("stay-empty check %+v: want it required and speaking for the dead-letter table", c)
			}
			return c
		}
	}
	t.Fatalf("no stay-empty check among %+v", res.Checks)
	return incidents.CheckResult{}
}

// A dead-letter table filled from 14:00 until the fix at 15:30. Its hours
// before the fix stay full forever, so it is judged from the fix: no row
// arrived since, verified; rows still arriving after it, escalated with
// their count. Rows before the fix never fail it.
func TestDeadLetterTableIsVerifiedOnlyIfItStoppedGrowingSinceTheFix(t *testing.T) {
	fixedAt := bad.Add(90 * time.Minute)
	for _, after := range []int{0, 7} {
		t.Run(fmt.Sprintf("%d rows after the fix", after), func(t *testing.T) {
			f := newFixture(t)
			deadLetters(f, 85) // 14:00 to 15:24
			f.expect("shop.dead_letters", checks.Expectations{StayEmpty: checks.StayNoNewRows, EventTime: "failed_at", IngestTime: "ingested_at"})
			id := deadLetterIncident(f)
			if after > 0 {
				letters(f, 1000, fixedAt.Add(10*time.Minute), after)
			}
			f.clk.Set(day.Add(16*time.Hour + 5*time.Minute))
			res, err := Verify(f.ctx, f.env, Params{IncidentID: id, FixedAt: fixedAt})
			if err != nil {
				t.Fatal(err)
			}
			c := stayResult(t, res)
			if after == 0 {
				if !c.Passed || res.Verification.Outcome != incidents.OutcomeVerified {
					t.Fatalf("a dead-letter table that stopped growing at the fix: %+v; outcome %s (%s)", c, res.Verification.Outcome, res.Verification.Reason)
				}
				return
			}
			if c.Passed || res.Verification.Outcome != incidents.OutcomeEscalated {
				t.Fatalf("%d dead letters after the fix: %+v; outcome %s", after, c, res.Verification.Outcome)
			}
			if want := fmt.Sprintf("%d rows with ingested_at at or after %s", after, fixedAt.Format("2006-01-02 15:04 UTC")); c.Observed != want {
				t.Errorf("observed %q, want %q", c.Observed, want)
			}
			if len(res.Assertions) != 1 || res.Assertions[0].Passed || res.Assertions[0].Checked != c.Name {
				t.Errorf("the volume assertion should be re-run as the stay-empty check: %+v", res.Assertions)
			}
		})
	}
}

// Without a time column to tell new rows from old, growth since the fix
// is told by comparing counts: with no count taken at or after the fix,
// the answer is "not verifiable yet" saying what is missing and the
// incident stays fixing; an hour later, with the count the first call
// took and no growth, it is verified; had it grown, escalated.
func TestDeadLetterTableWithoutTimeColumnComparesCounts(t *testing.T) {
	for _, grows := range []bool{false, true} {
		t.Run(fmt.Sprintf("grows=%v", grows), func(t *testing.T) {
			f := newFixture(t)
			deadLetters(f, 85)
			f.expect("shop.dead_letters", checks.Expectations{StayEmpty: checks.StayNoNewRows})
			id := deadLetterIncident(f)
			f.clk.Set(day.Add(16*time.Hour + 5*time.Minute))
			res, err := Verify(f.ctx, f.env, Params{IncidentID: id, FixedAt: bad.Add(90 * time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			c := stayResult(t, res)
			if c.Passed || !c.NotJudged || res.Verification.Outcome != incidents.OutcomeNotVerifiable || res.Incident.Status != incidents.StatusFixing {
				t.Fatalf("first call: %+v; outcome %s, status %s", c, res.Verification.Outcome, res.Incident.Status)
			}
			if !strings.HasPrefix(c.Observed, "not verifiable yet:") || !strings.Contains(c.Observed, "declare its ingest_time") {
				t.Errorf("not verifiable yet should say what is missing: %q", c.Observed)
			}
			if grows {
				letters(f, 1000, day.Add(16*time.Hour+10*time.Minute), 3)
			}
			f.clk.Set(day.Add(17*time.Hour + 5*time.Minute))
			res, err = Verify(f.ctx, f.env, Params{IncidentID: id, FixedAt: bad.Add(90 * time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			c = stayResult(t, res)
			want := incidents.OutcomeVerified
			if grows {
				want = incidents.OutcomeEscalated
			}
			if c.Passed == grows || c.NotJudged || res.Verification.Outcome != want {
				t.Fatalf("second call: %+v; outcome %s, want %s (%s)", c, res.Verification.Outcome, want, res.Verification.Reason)
			}
		})
	}
}

// A fix time in the future or before the onset is refused and changes
// nothing.
func TestFixedAtOutOfRangeIsRefused(t *testing.T) {
	f := newFixture(t)
	deadLetters(f, 10)
	f.expect("shop.dead_letters", checks.Expectations{StayEmpty: checks.StayNoNewRows})
	id := deadLetterIncident(f)
	for _, at := range []time.Time{f.clk.Now().Add(time.Hour), bad.Add(-time.Hour)} {
		_, err := Verify(f.ctx, f.env, Params{IncidentID: id, FixedAt: at})
		if err == nil || !strings.Contains(err.Error(), "fixed_at") || !strings.Contains(err.Error(), "nothing was changed") {
			t.Errorf("fixed_at %s: err %v", at, err)
		}
	}
	inc, err := f.env.Incidents.GetIncident(f.ctx, id)
	if err != nil || inc.Status != incidents.StatusProposed {
		t.Errorf("after refusals the incident is %s (%v), want proposed", inc.Status, err)
	}
}
