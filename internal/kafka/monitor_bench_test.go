package kafka

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
)

// fixedSource answers every round with the same groups, offsets moving on
// by one record a round.
type fixedSource struct {
	groups, parts int
	round         int64
}

func (s *fixedSource) Lag(_ context.Context, _ LagFilter, at time.Time) (*LagRound, error) {
	s.round++
	r := &LagRound{At: at}
	for g := 0; g < s.groups; g++ {
		gl := GroupLag{Group: fmt.Sprintf("group-%03d", g), State: "Stable", Members: 1}
		for p := 0; p < s.parts; p++ {
			pl := PartitionLag{Topic: fmt.Sprintf("t%02d", g%50), Partition: int32(p), Committed: s.round + int64(p%4), End: s.round + 3}
			pl.Lag = max(pl.End-pl.Committed, 0)
			gl.TotalLag += pl.Lag
			gl.Partitions = append(gl.Partitions, pl)
		}
		r.Groups = append(r.Groups, gl)
	}
	return r, nil
}

// BenchmarkMonitorRounds: the store side of get_consumer_lag, 200 groups
// × 50 partitions, 100 rounds 5 seconds apart (8 minutes of samples): the
// time of the last ten rounds over the first ten must stay near 1 however
// many rounds were recorded.
func BenchmarkMonitorRounds(b *testing.B) {
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		db, err := store.OpenSQLite(ctx, filepath.Join(b.TempDir(), "dw.db"))
		if err != nil {
			b.Fatal(err)
		}
		clk := clock.NewFake(t0)
		m := &Monitor{Source: &fixedSource{groups: 200, parts: 50}, DB: db, Clock: clk, Cluster: "bench", Held: &Held{db: db, cluster: "bench"}}
		var took []time.Duration
		for r := 0; r < 100; r++ {
			t := time.Now()
			rep, err := m.ConsumerLag(ctx, LagFilter{})
			if err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(t))
			if len(rep.Groups) != 200 {
				b.Fatalf("%d groups", len(rep.Groups))
			}
			clk.Advance(5 * time.Second)
		}
		first, last := medianOf(took[:10]), medianOf(took[90:])
		var n int
		db.QueryRowContext(ctx, "SELECT COUNT(*) FROM kafka_lag_samples").Scan(&n)
		db.Close()
		b.ReportMetric(float64(first.Microseconds())/1000, "ms-first10")
		b.ReportMetric(float64(last.Microseconds())/1000, "ms-last10")
		b.ReportMetric(float64(last)/float64(first), "x-growth")
		b.Logf("rounds 1-10 median %s, 91-100 median %s; %d samples stored", first, last, n)
	}
}

func medianOf(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
