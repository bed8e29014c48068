package checks

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/page/pagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestQualityHistoryWalkSurvivesWrites: points recorded after the first
// page (a newer one, and a whole daily series that now has more points
// than the hourly one shown) and one removed further back make the walk
// back in time neither skip nor repeat a point, nor jump series.
func TestQualityHistoryWalkSurvivesWrites(t *testing.T) {
	wh := openFixture(t)
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		seedHistory(t, db)
		env := Env{DB: db, Warehouse: wh, Clock: clock.NewFake(day)}
		req := HistoryRequest{Table: "events", Metric: MetricRowCount, Days: 2}
		// Pages run newest first, each listing its points oldest first:
		// the walk's order is each page reversed.
		ids := func(r *HistoryResult) []string {
			out := make([]string, len(r.Points))
			for i, p := range r.Points {
				out[len(out)-1-i] = r.Series.Grain + "@" + p.At.Format("01-02T15:04")
			}
			return out
		}
		req.Limit = 500
		all, err := History(ctx, env, req)
		if err != nil || all.Total != 48 || all.Series.Grain != "hour" {
			t.Fatalf("history: %+v, %v", all, err)
		}
		victim := all.Points[10].At
		req.Limit = 10
		pagetest.Walk(t, ids(all), func(cursor string) ([]string, string, error) {
			req.Cursor = cursor
			r, err := History(ctx, env, req)
			if err != nil {
				return nil, "", err
			}
			return ids(r), r.NextCursor, nil
		}, func() []string {
			hourly := baseline.Series{Asset: fixtureAsset, Metric: MetricRowCount, Grain: "hour"}
			samples := []baseline.Sample{{Series: hourly, Point: baseline.Point{At: day.Add(-30 * time.Minute), Value: 10}}}
			for m := range 100 {
				samples = append(samples, baseline.Sample{Series: baseline.Series{Asset: fixtureAsset, Metric: MetricRowCount, Grain: "day"},
					Point: baseline.Point{At: day.Add(-time.Duration(m+1) * 20 * time.Minute), Value: 240}})
			}
			if err := baseline.Record(ctx, db, day, samples...); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, "DELETE FROM metric_points WHERE asset = ? AND metric = ? AND grain = ? AND bucket_ms = ?",
				fixtureAsset, MetricRowCount, "hour", store.Millis(victim)); err != nil {
				t.Fatal(err)
			}
			return []string{"hour@" + victim.Format("01-02T15:04")}
		})
		// A new walk starts on the series that now has the most points.
		req.Cursor, req.Limit = "", 0
		if r, err := History(ctx, env, req); err != nil || r.Series.Grain != "day" {
			t.Fatalf("fresh walk: %v, %v", r, err)
		}
	})
}
