package checks

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/warehouse"
)

func TestRunCheckProfilesATableWithoutExpectations(t *testing.T) {
	wh := openFixture(t)
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		env := Env{DB: db, Warehouse: wh, Clock: clock.NewFake(day.Add(5*time.Hour + 30*time.Minute)), Agent: "dw-quality", Tool: "run_quality_check"}
		rep, err := RunCheck(ctx, env, CheckRequest{Table: "events", Period: "today", Bucket: "hour"})
		if err != nil {
			t.Fatal(err)
		}
		notes := strings.Join(rep.Inferred, "\n")
		for _, want := range []string{"key event_id inferred (named after the table)", "event time event_time inferred", "ingest time loaded_at inferred"} {
			if !strings.Contains(notes, want) {
				t.Errorf("inferred notes %q lack %q", notes, want)
			}
		}
		if rep.Window == nil || rep.Window.Column != "event_time" || rep.Window.Grain != Hour || !rep.Window.Start.Equal(day) {
			t.Errorf("window %+v, want today by hour on event_time", rep.Window)
		}
		checks := map[string]bool{}
		for _, r := range rep.Results {
			checks[r.Check] = true
		}
		for _, c := range []string{"row_count", "null_rate(event_id)", "null_rate(account_id)", "null_rate(amount)", "null_rate(status)",
			"null_rate(event_time)", "null_rate(loaded_at)", "null_rate(is_test)", "uniqueness(event_id)", "freshness(event_time)",
			"load_lag(loaded_at - event_time)"} {
			if !checks[c] {
				t.Errorf("profile did not run %s", c)
			}
		}
		// No history yet: nothing can be anomalous, and an inferred key's
		// repeats are not a failure, only reported.
		if rep.Status != NotJudged || !strings.HasPrefix(strings.SplitN(rep.Summary, ": ", 2)[1], "NOT JUDGED") {
			t.Errorf("status %s without history or expectations, want not_judged said first: %s", rep.Status, rep.Summary)
		}
		u := resultFor(t, rep, "uniqueness(event_id)", MetricDuplicateRate)
		if u.Status != Learning || !strings.Contains(u.Message, "declare it with set_quality_expectations") {
			t.Errorf("inferred key result: %s %s", u.Status, u.Message)
		}
		if rep.Warehouse != "test" || rep.Statements != 1 || rep.Asset != fixtureAsset {
			t.Errorf("report header %+v", rep)
		}
	})
}

func TestExpectationsDriveTheNextCheck(t *testing.T) {
	wh := openFixture(t)
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		fake := clock.NewFake(day.Add(5*time.Hour + 30*time.Minute))
		env := Env{DB: db, Warehouse: wh, Clock: fake}
		res, err := SetExpectations(ctx, env, ExpectationsRequest{Table: "SHOP.EVENTS", Expectations: Expectations{
			Key:            []string{"EVENT_ID"},
			EventTime:      "Event_Time",
			MaxNullRate:    map[string]float64{"Account_ID": 0.05},
			MinRows:        f64(1),
			MaxStaleness:   "30m",
			AcceptedValues: []AcceptedValues{{Column: "status", Values: []string{"ok", "retry", "bogus"}}},
			Predicates:     []PredicateRule{{Name: "known_amount", SQL: "amount IS NOT NULL", MaxFailingRows: 1}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		e := res.Expectations
		if e.Key[0] != "event_id" || e.EventTime != "event_time" || e.MaxNullRate["account_id"] != 0.05 || res.Table != "shop.events" {
			t.Errorf("expectations not in catalog spelling: %+v", res)
		}
		stored, _, err := LoadExpectations(ctx, db, "test", warehouse.TableRef{Schema: "shop", Name: "events"})
		if err != nil || stored == nil || stored.MaxStaleness != "30m" {
			t.Fatalf("stored %+v %v", stored, err)
		}

		rep, err := RunCheck(ctx, env, CheckRequest{Table: "events", Period: "today", Bucket: "hour"})
		if err != nil {
			t.Fatal(err)
		}
		if r := resultFor(t, rep, "uniqueness(event_id)", MetricDuplicateRate); r.Status != Fail {
			t.Errorf("declared key with repeats: %s", r.Status)
		}
		nulls := resultFor(t, rep, "null_rate(account_id)", MetricNullRate)
		if nulls.Status != Fail || !strings.Contains(nulls.Message, "at 01:00") {
			t.Errorf("30%% nulls at 01:00 against a 5%% limit: %s %s", nulls.Status, nulls.Message)
		}
		if r := resultFor(t, rep, "accepted_values(status)", MetricRejectedRate); r.Status == Fail {
			t.Errorf("bogus is accepted now: %s", r.Message)
		}
		// One null amount is allowed; the window has exactly one.
		if r := resultFor(t, rep, "predicate(known_amount)", MetricFailingRows); r.Status == Fail {
			t.Errorf("one failing row is allowed: %s", r.Message)
		}
		if r := resultFor(t, rep, "freshness(event_time)", MetricStaleness); r.Status != Pass {
			t.Errorf("10 minutes against 30m allowed: %s %s", r.Status, r.Message)
		}
		vol := resultFor(t, rep, "row_count", MetricRowCount)
		if vol.Status != Fail || !strings.Contains(vol.Message, "0 rows at 03:00") {
			t.Errorf("the empty hour breaks min_rows 1: %s %s", vol.Status, vol.Message)
		}
		if len(rep.Inferred) != 0 {
			t.Errorf("declared key and event time, yet inferred: %v", rep.Inferred)
		}

		// An hour later the data has not moved: freshness breaks 30m.
		fake.Advance(time.Hour)
		rep, err = RunCheck(ctx, env, CheckRequest{Table: "events"})
		if err != nil {
			t.Fatal(err)
		}
		fresh := resultFor(t, rep, "freshness(event_time)", MetricStaleness)
		if fresh.Status != Fail || !strings.Contains(fresh.Message, "1h10m old") {
			t.Errorf("stale table: %s %s", fresh.Status, fresh.Message)
		}
	})
}

func TestHistoryReturnsPointsAndBaseline(t *testing.T) {
	wh := openFixture(t)
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		seedHistory(t, db)
		env := Env{DB: db, Warehouse: wh, Clock: clock.NewFake(day)}
		res, err := History(ctx, env, HistoryRequest{Table: "events", Metric: "null_rate", Dimension: "ACCOUNT_ID", Days: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Points) != 48 || res.Series.Grain != "hour" || res.Series.Dimension != "account_id" {
			t.Fatalf("got %d points of %v, want 48 hourly", len(res.Points), res.Series)
		}
		if res.Latest == nil || res.Latest.Verdict != baseline.Normal || res.Latest.Basis != baseline.AlwaysZero {
			t.Errorf("latest judgement %+v", res.Latest)
		}
		if _, err := History(ctx, env, HistoryRequest{Table: "events", Metric: "null_rat"}); err == nil || !strings.Contains(err.Error(), "closest: null_rate") {
			t.Errorf("unknown metric: %v", err)
		}
		if _, err := History(ctx, env, HistoryRequest{Table: "events", Metric: "null_rate"}); err == nil || !strings.Contains(err.Error(), "several dimensions") {
			t.Errorf("ambiguous dimension: %v", err)
		}
		if _, err := History(ctx, env, HistoryRequest{Table: "events", Metric: "row_count", Days: 1000}); err == nil {
			t.Errorf("1000 days accepted")
		}
	})
}
