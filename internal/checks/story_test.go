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

// The usage-billing shape at the level of one check: an hourly rollup
// whose egress_bytes was never null goes 10% null at 14:00 and 18% at
// 15:00. At 15:05 a profile of today's hours finds a nulls problem, rising
// hour by hour, judged on 14 days of hourly history, with volume,
// uniqueness and freshness normal.
func TestBillingShapedNullsProblem(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	db, err := duckdb.OpenWrite(ctx, path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`CREATE SCHEMA usage`,
		`CREATE TABLE usage.usage_hourly (usage_id BIGINT, account_id VARCHAR, hour TIMESTAMP,
			egress_bytes BIGINT, request_count BIGINT, _ingested_at TIMESTAMP)`,
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	nullAccounts := map[int]int{14: 5, 15: 9} // of 50 accounts an hour
	for h := 0; h <= 15; h++ {
		hour := day.Add(time.Duration(h) * time.Hour)
		for a := 0; a < 50; a++ {
			var egress any = int64(1000 * (a + 1))
			if a < nullAccounts[h] {
				egress = nil
			}
			if _, err := db.ExecContext(ctx, `INSERT INTO usage.usage_hourly VALUES (?, ?, ?, ?, ?, ?)`,
				int64(h*1000+a), fmt.Sprintf("acct-%02d", a), hour, egress, int64(a), hour.Add(5*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
	db.Close()
	wh, err := duckdb.Open("demo", path, time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	storetest.Each(t, func(t *testing.T, st *store.DB) {
		asset := "duckdb://usage.usage_hourly"
		var samples []baseline.Sample
		add := func(metric, dim, grain string, at time.Time, v float64) {
			samples = append(samples, baseline.Sample{Series: baseline.Series{Asset: asset, Metric: metric, Dimension: dim, Grain: grain}, Point: baseline.Point{At: at, Value: v}})
		}
		for h := 14 * 24; h > 0; h-- {
			at := day.Add(-time.Duration(h) * time.Hour)
			add(MetricRowCount, "", "hour", at, float64(49+h%3))
			for _, c := range []string{"usage_id", "account_id", "hour", "egress_bytes", "request_count", "_ingested_at"} {
				add(MetricNullRate, c, "hour", at, 0)
			}
			add(MetricDuplicateRate, "usage_id", "hour", at, 0)
			add(MetricLagAvg, "_ingested_at-hour", "hour", at, 300)
			add(MetricLagP95, "_ingested_at-hour", "hour", at, 300)
			add(MetricStaleness, "hour", "", at.Add(5*time.Minute), float64(240+60*(h%3)))
		}
		if err := baseline.Record(ctx, st, day, samples...); err != nil {
			t.Fatal(err)
		}

		env := Env{DB: st, Warehouse: wh, Clock: clock.NewFake(day.Add(15*time.Hour + 5*time.Minute)), Agent: "dw-quality", Tool: "run_quality_check"}
		rep, err := RunCheck(ctx, env, CheckRequest{Table: "usage_hourly", Period: "today", Bucket: "hour"})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Problems) != 1 || rep.Problems[0] != ProblemNulls || rep.Status != Anomalous {
			t.Fatalf("problems %v status %s, want only nulls, anomalous:\n%s", rep.Problems, rep.Status, rep.Summary)
		}
		for _, want := range []string{
			"Nulls problem: egress_bytes null in 1.8% of rows (14 of 800) over the window; ",
			"egress_bytes null in 18.0% of rows (9 of 50) at 15:00 (0% in every earlier check for 14 days, 336 points), rising hour by hour since 14:00",
			"Volume, uniqueness and freshness normal.",
		} {
			if !strings.Contains(rep.Summary, want) {
				t.Errorf("summary lacks %q:\n%s", want, rep.Summary)
			}
		}
		nulls := resultFor(t, rep, "null_rate(egress_bytes)", MetricNullRate)
		var anomalous []int
		for _, b := range nulls.Buckets {
			if b.Status == Anomalous {
				anomalous = append(anomalous, b.Start.Hour())
			}
		}
		if fmt.Sprint(anomalous) != "[14 15]" {
			t.Errorf("anomalous hours %v, want [14 15]", anomalous)
		}
		if r := resultFor(t, rep, "load_lag(_ingested_at - hour)", MetricLagAvg); r.Status != Pass {
			t.Errorf("load lag: %s %s", r.Status, r.Message)
		}
	})
}
