package checks_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/demo/seeded"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// The seeded scenario kinds (internal/demo/seeded) over many seeds, in
// process: the end-to-end tests run three seeds of each through the agents;
// this runs the same healthy week and the same incident through the same
// checks for every seed, so a false-alarm rate of a few percent per
// table-week, which three seeds cannot show, shows here (issue 14: no
// incident over a healthy week, every planted incident caught).

// seededWeekSeeds is how many seeds each kind runs (DW_SEEDED_SEEDS
// overrides, to measure a rate over more: 30 per kind were run when the
// rules were set, about 150 s of CPU); the end-to-end seeds are added.
// The default keeps `make test` on a 2-core machine within reason.
func seededWeekSeeds(t *testing.T) []uint64 {
	n := 12
	if testing.Short() {
		n = 4
	}
	if v := os.Getenv("DW_SEEDED_SEEDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("DW_SEEDED_SEEDS=%q: want a whole number of seeds, at least 1", v)
		}
	}
	var seeds []uint64
	for s := uint64(1); s <= uint64(n); s++ {
		seeds = append(seeds, s)
	}
	for _, s := range []uint64{3, 1414, 271828} {
		if !slices.Contains(seeds, s) {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

// seededProblem is the problem each kind's fault must be found as.
var seededProblem = map[seeded.Kind]checks.Problem{
	seeded.ReplayDuplicates: checks.ProblemUniqueness,
	seeded.UnitChange:       checks.ProblemValues,
	seeded.LatePartition:    checks.ProblemVolume,
}

// TestSeededHealthyWeeksStayQuietAndIncidentsAreCaught: for every seed of
// every kind, a week of daily checks of the healthy twin (each day at the
// incident's time of day, after the history before the week was
// backfilled) finds nothing, and the incident day, checked with the same
// history, is found as its kind's problem from the fault's hour on.
func TestSeededHealthyWeeksStayQuietAndIncidentsAreCaught(t *testing.T) {
	seeds := seededWeekSeeds(t)
	for _, kind := range seeded.Kinds() {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			var alarmed, missed []string
			for _, seed := range seeds {
				alarms, miss := seededWeek(t, kind, seed)
				if len(alarms) > 0 {
					alarmed = append(alarmed, fmt.Sprintf("seed %d:\n  %s", seed, strings.Join(alarms, "\n  ")))
				}
				if miss != "" {
					missed = append(missed, fmt.Sprintf("seed %d: %s", seed, miss))
				}
			}
			t.Logf("%s: %d of %d healthy weeks raised an alarm; %d of %d incidents caught", kind, len(alarmed), len(seeds),
				len(seeds)-len(missed), len(seeds))
			if len(alarmed) > 0 {
				t.Errorf("%d of %d healthy weeks raised an alarm (want none):\n%s", len(alarmed), len(seeds), strings.Join(alarmed, "\n"))
			}
			if len(missed) > 0 {
				t.Errorf("%d of %d incidents missed:\n%s", len(missed), len(seeds), strings.Join(missed, "\n"))
			}
		})
	}
}

// seededWeek runs one seed: the healthy week's alarms (one line per
// failed or anomalous result) and why the incident was missed ("" when
// caught). The incident is checked on a copy of the warehouse file as it
// stood after the healthy week's third day, with the history recorded
// until then, plus the incident's rows since: the same history the
// end-to-end test backfills, without backfilling it twice.
func seededWeek(t *testing.T, kind seeded.Kind, seed uint64) (alarms []string, missed string) {
	t.Helper()
	ctx := context.Background()
	healthy, err := seeded.Generate(kind, seed, true)
	if err != nil {
		t.Fatal(err)
	}
	incident, err := seeded.Generate(kind, seed, false)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := checks.Env{DB: storetest.SQLite(t)}
	path := filepath.Join(dir, "warehouse.duckdb")
	run := func(file string, s *seeded.Scenario, at time.Time, req checks.CheckRequest) *checks.Report {
		t.Helper()
		wh, err := duckdb.Open("wh", file, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer wh.Close()
		e := env
		e.Warehouse, e.Clock = wh, fixedClock(at)
		req.Table = s.Table.Ref()
		rep, err := checks.RunCheck(ctx, e, req)
		if err != nil {
			t.Fatalf("%s seed %d at %s: %v", kind, seed, at, err)
		}
		return rep
	}

	checkTime := incident.CheckAt.Sub(incident.Day)
	var last time.Time
	for i, day := range healthy.HealthyWeek() {
		at := day.Add(checkTime)
		if day.Equal(incident.Day) {
			missed = seededIncident(t, incident, healthy, path, last, func(file string) *checks.Report {
				return run(file, incident, incident.CheckAt, checks.CheckRequest{Period: "today", Bucket: "hour"})
			})
		}
		if i == 0 {
			if err := healthy.WriteDuckDB(ctx, path, at); err != nil {
				t.Fatal(err)
			}
			run(path, healthy, at, checks.CheckRequest{Since: healthy.HistoryStart.Format(time.RFC3339), Until: day.Format(time.RFC3339), Bucket: "hour"})
		} else if err := healthy.AppendDuckDB(ctx, path, last, at); err != nil {
			t.Fatal(err)
		}
		last = at
		rep := run(path, healthy, at, checks.CheckRequest{Period: "today", Bucket: "hour"})
		for _, r := range rep.Results {
			if r.Status == checks.Anomalous || r.Status == checks.Fail {
				alarms = append(alarms, fmt.Sprintf("%s %s: %s", day.Format("Mon 01-02"), r.Check, r.Message))
			}
		}
	}
	return alarms, missed
}

// seededIncident checks the incident day on a copy of the healthy file as
// it stood before the day's check (asOf), with the incident's rows that
// landed since appended; "" when the fault is found as its kind's problem
// and no earlier than the fault's hour.
func seededIncident(t *testing.T, incident, healthy *seeded.Scenario, path string, asOf time.Time, check func(string) *checks.Report) string {
	t.Helper()
	// The shortcut holds only while the two draws agree up to asOf: the
	// same rows (by their random ids) landed at the same instants.
	landed := func(s *seeded.Scenario) []string {
		var out []string
		for _, r := range s.Table.Rows {
			if !r.Landed.After(asOf) {
				out = append(out, fmt.Sprint(r.Values[0], r.Landed.UnixNano()))
			}
		}
		return out
	}
	if !asOf.Before(incident.FaultAt) || !slices.Equal(landed(incident), landed(healthy)) {
		t.Fatalf("%s seed %d: the incident's rows up to %s are not the healthy twin's", incident.Kind, incident.Seed, asOf)
	}
	file := filepath.Join(filepath.Dir(path), "incident.duckdb")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := incident.AppendDuckDB(context.Background(), file, asOf, incident.CheckAt); err != nil {
		t.Fatal(err)
	}
	rep := check(file)
	want := seededProblem[incident.Kind]
	if !slices.Contains(rep.Problems, want) {
		return fmt.Sprintf("no %s problem: %s", want, rep.Summary)
	}
	// Rows replayed from a few minutes before the fault carry their event
	// times, so the first hour may be the one before the fault's.
	faultHour := incident.FaultAt.Add(-time.Hour).Truncate(time.Hour)
	for _, r := range rep.Results {
		if r.Problem != want || (r.Status != checks.Anomalous && r.Status != checks.Fail) {
			continue
		}
		for _, b := range r.Buckets {
			if (b.Status == checks.Anomalous || b.Status == checks.Fail) && b.Start.Before(faultHour) {
				return fmt.Sprintf("%s fires at %s, before the fault at %s: %s", r.Check, b.Start.Format("15:04"), incident.FaultAt.Format("15:04"), r.Message)
			}
		}
	}
	return ""
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// After a first backfill of three weeks of hours, the day's check: every
// whole-day value that adds up from the backfill's hours (row counts, null and
// zero shares, load lag) has a history of days, not "0 earlier points";
// a result that passed on its hours says so, and never "not judged"
// first; exactly the results not judged (status learning) say "not
// judged" first, and the summary counts that same set.
func TestBackfillGivesDaysAHistoryAndMessagesMatchStatus(t *testing.T) {
	ctx := context.Background()
	s, err := seeded.Generate(seeded.UnitChange, 1414, true)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	at := s.Day.Add(s.CheckAt.Sub(s.Day))
	if err := s.WriteDuckDB(ctx, path, at); err != nil {
		t.Fatal(err)
	}
	wh, err := duckdb.Open("wh", path, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	env := checks.Env{DB: storetest.SQLite(t), Warehouse: wh, Clock: fixedClock(at)}
	if _, err := checks.RunCheck(ctx, env, checks.CheckRequest{Table: s.Table.Ref(), Since: s.HistoryStart.Format(time.RFC3339),
		Until: s.Day.Format(time.RFC3339), Bucket: "hour"}); err != nil {
		t.Fatal(err)
	}
	check := func(period string) *checks.Report {
		rep, err := checks.RunCheck(ctx, env, checks.CheckRequest{Table: s.Table.Ref(), Period: period, Bucket: "hour"})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	// Judged on whole days: a usual value and at least the points a
	// judgement needs (the day's slot is its kind of day, weekday or
	// weekend).
	onDays := func(rep *checks.Report, metrics ...string) {
		t.Helper()
		for _, r := range rep.Results {
			if slices.Contains(metrics, r.Metric) && (r.Usual == nil || r.History == nil || r.History.Points < 6) {
				t.Errorf("%s %s of the window judged on %+v: %s", r.Check, r.Metric, r.History, r.Message)
			}
		}
	}
	// Yesterday is a whole day: its counts, shares and lag are judged
	// against the days before it.
	onDays(check("yesterday"), checks.MetricRowCount, checks.MetricNullRate, checks.MetricZeroRate, checks.MetricLagAvg)
	// Today so far: its null shares and lag are (its row count and value
	// profile are not, as the day has not ended).
	rep := check("today")
	onDays(rep, checks.MetricNullRate, checks.MetricLagAvg)
	notJudged := 0
	for _, r := range rep.Results {
		if r.Status == checks.Learning {
			notJudged++
		}
		if said := strings.HasPrefix(r.Message, "not judged"); said != (r.Status == checks.Learning) {
			t.Errorf("%s %s is %s but its message says otherwise first: %s", r.Check, r.Metric, r.Status, r.Message)
		}
	}
	m := regexp.MustCompile(`(\d+) of (\d+) results not judged`).FindStringSubmatch(rep.Summary)
	switch {
	case notJudged == 0 && m != nil, notJudged > 0 && (m == nil || m[1] != strconv.Itoa(notJudged) || m[2] != strconv.Itoa(len(rep.Results))):
		t.Errorf("%d of %d results not judged, but the summary says %q", notJudged, len(rep.Results), rep.Summary)
	}
}
