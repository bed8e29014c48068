package baseline

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestRecordAndLoad(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		t0 := time.Date(2025, 3, 11, 0, 0, 0, 0, time.UTC)
		nulls := Series{Asset: "duckdb://usage.usage_hourly", Metric: "null_rate", Dimension: "egress_bytes", Grain: "hour"}
		rows := Series{Asset: nulls.Asset, Metric: "row_count", Grain: "hour"}
		other := Series{Asset: "duckdb://other.t", Metric: "row_count", Grain: "hour"}
		var samples []Sample
		for h := 0; h < 250; h++ { // more than one INSERT's worth
			at := t0.Add(time.Duration(h) * time.Hour)
			samples = append(samples, Sample{nulls, Point{at, 0}}, Sample{rows, Point{at, float64(1000 + h)}})
		}
		samples = append(samples, Sample{other, Point{t0, 5}})
		if err := db.InTx(ctx, func(tx *store.Tx) error { return Record(ctx, tx, t0.Add(300*time.Hour), samples...) }); err != nil {
			t.Fatal(err)
		}
		// Re-checking a bucket replaces its value.
		if err := Record(ctx, db, t0.Add(301*time.Hour), Sample{nulls, Point{t0.Add(3 * time.Hour), 0.18}}); err != nil {
			t.Fatal(err)
		}

		got, err := Load(ctx, db, nulls, t0.Add(2*time.Hour), t0.Add(5*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		want := []Point{{t0.Add(2 * time.Hour), 0}, {t0.Add(3 * time.Hour), 0.18}, {t0.Add(4 * time.Hour), 0}}
		if len(got) != len(want) {
			t.Fatalf("loaded %v, want %v", got, want)
		}
		for i := range want {
			if !got[i].At.Equal(want[i].At) || got[i].Value != want[i].Value {
				t.Errorf("point %d = %v, want %v", i, got[i], want[i])
			}
		}

		all, err := LoadAsset(ctx, db, nulls.Asset, t0, t0.Add(1000*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 2 || len(all[nulls]) != 250 || len(all[rows]) != 250 {
			t.Fatalf("LoadAsset: %d series (%d, %d points), want 2 series of 250", len(all), len(all[nulls]), len(all[rows]))
		}
		if last := all[rows][249]; last.Value != 1249 || !last.At.Equal(t0.Add(249*time.Hour)) {
			t.Errorf("last row_count point %v, want 1249 at hour 249 (oldest first)", last)
		}

		series, err := ListSeries(ctx, db, nulls.Asset)
		if err != nil {
			t.Fatal(err)
		}
		if len(series) != 2 || series[0] != nulls || series[1] != rows {
			t.Errorf("ListSeries = %v", series)
		}
	})
}
