package checks

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// A table that holds current state (one row per member, merged in place,
// last_activity_at the time of each member's latest change) cannot give
// back its past hours: a member who shops again leaves the hour they were
// counted in. Checked by hour after a backfill of the weeks before, today's
// hours hold far more rows than the same hours of history. That is not a
// volume problem, so the rows per hour are neither judged nor stored, and
// the shape checks (nulls, uniqueness, freshness) still run.
func TestCurrentStateTableVolumeIsNotJudgedPerHour(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	db, err := duckdb.OpenWrite(ctx, path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	now := day.Add(15*time.Hour + 5*time.Minute)
	for _, s := range []string{
		`CREATE SCHEMA loyalty`,
		`CREATE TABLE loyalty.member_balances (member_id VARCHAR, balance BIGINT, last_activity_at TIMESTAMP, ingested_at TIMESTAMP)`,
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// 3,000 members: two in three shopped today (their rows sit in today's
	// hours), the others last shopped some hour of the two weeks before.
	for m := 0; m < 3000; m++ {
		at := day.Add(time.Duration(8+m%7) * time.Hour).Add(time.Duration(m%50) * time.Minute)
		if m%3 == 0 {
			at = day.Add(-time.Duration(1+m%(14*24)) * time.Hour)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO loyalty.member_balances VALUES (?, ?, ?, ?)`,
			fmt.Sprintf("M%05d", m), int64(100+m), at, at.Add(40*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	wh, err := duckdb.Open("demo", path, time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	storetest.Each(t, func(t *testing.T, st *store.DB) {
		env := Env{DB: st, Warehouse: wh, Clock: clock.NewFake(now), Agent: "dw-quality", Tool: "run_quality_check"}
		if _, err := RunCheck(ctx, env, CheckRequest{Table: "loyalty.member_balances", Since: day.AddDate(0, 0, -14).Format(time.RFC3339),
			Until: day.Format(time.RFC3339), Bucket: "hour"}); err != nil {
			t.Fatal(err)
		}
		rep, err := RunCheck(ctx, env, CheckRequest{Table: "loyalty.member_balances", Period: "today", Bucket: "hour"})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Problems) != 0 {
			t.Fatalf("problems %v on a current-state table:\n%s", rep.Problems, rep.Summary)
		}
		rows := resultFor(t, rep, "row_count", MetricRowCount)
		if rows.Status != Learning || !strings.Contains(rows.Message, "not judged as volume: last_activity_at records each row's latest change") {
			t.Errorf("row_count %s: %s", rows.Status, rows.Message)
		}
		if r := resultFor(t, rep, "null_rate(member_id)", MetricNullRate); r.Status != Pass {
			t.Errorf("null_rate(member_id) %s: %s", r.Status, r.Message)
		}
		if r := resultFor(t, rep, "uniqueness(member_id)", MetricDuplicateRate); r.Status != Pass {
			t.Errorf("uniqueness(member_id) %s: %s", r.Status, r.Message)
		}
		for _, want := range []string{"no null, uniqueness or freshness problem", "Volume is not judged per hour: last_activity_at records each row's latest change"} {
			if !strings.Contains(rep.Summary, want) {
				t.Errorf("summary lacks %q:\n%s", want, rep.Summary)
			}
		}
		history, err := baseline.LoadAsset(ctx, st, rep.Asset, day.AddDate(0, 0, -15), now)
		if err != nil {
			t.Fatal(err)
		}
		for s, pts := range history {
			if s.Metric == MetricRowCount {
				t.Errorf("%d row_count points of %s stored as history; rows counted by their latest change are not arrivals", len(pts), s.Grain)
			}
		}
	})
}

// An append-only table counted by its event time keeps judging volume.
func TestRecordsLatestChange(t *testing.T) {
	for col, want := range map[string]bool{
		"last_activity_at": true, "updated_at": true, "modified_ts": true, "latest_event_at": true,
		"event_time": false, "window_start": false, "created_at": false, "ingested_at": false, "hour": false,
	} {
		if got := recordsLatestChange(col); got != want {
			t.Errorf("recordsLatestChange(%s) = %v, want %v", col, got, want)
		}
	}
}
