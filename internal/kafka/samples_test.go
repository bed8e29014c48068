package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func round(at time.Time, groups ...GroupLag) *LagRound { return &LagRound{At: at, Groups: groups} }

func TestRecordAndLoadSamples(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		const keep = 5
		// One round a minute, kept 4.5 minutes back: the newest five.
		ret := Retention{Step: time.Minute, Span: 4*time.Minute + 30*time.Second}
		for i := 0; i < 8; i++ {
			at := t0.Add(time.Duration(i) * time.Minute)
			r := round(at,
				GroupLag{Group: "billing", Partitions: []PartitionLag{
					{Topic: "orders", Partition: 0, Committed: int64(10 * i), End: int64(10*i + 3), Lag: 3},
					{Topic: "orders", Partition: 1, Committed: -1, End: -1, Lag: -1, Error: "NOT_LEADER_FOR_PARTITION"},
				}},
				GroupLag{Group: "fraud", Partitions: []PartitionLag{{Topic: "payments", Partition: 0, Committed: 1, End: int64(1 + i), Lag: int64(i)}}},
			)
			if err := RecordRound(ctx, db, "prod", r, ret); err != nil {
				t.Fatal(err)
			}
			// Recording a round twice changes nothing.
			if err := RecordRound(ctx, db, "prod", r, ret); err != nil {
				t.Fatal(err)
			}
		}
		// Another cluster's samples stay apart.
		if err := RecordRound(ctx, db, "staging", round(t0, GroupLag{Group: "billing", Partitions: []PartitionLag{{Topic: "orders", Partition: 0, Committed: 1, End: 1}}}), ret); err != nil {
			t.Fatal(err)
		}

		got, err := LoadSamples(ctx, db, "prod", []string{"billing"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("partitions: %v (an unreadable partition must not be stored)", got)
		}
		h := got[PartitionKey{Group: "billing", Topic: "orders", Partition: 0}]
		if len(h) != keep {
			t.Fatalf("kept %d samples, want %d", len(h), keep)
		}
		// The newest keep survive, oldest first.
		if !h[0].At.Equal(t0.Add(3*time.Minute)) || !h[keep-1].At.Equal(t0.Add(7*time.Minute)) || h[keep-1].Committed != 70 || h[keep-1].End != 73 || h[keep-1].Lag != 3 {
			t.Fatalf("samples %+v", h)
		}
		both, err := LoadSamples(ctx, db, "prod", []string{"billing", "fraud", "nobody"})
		if err != nil {
			t.Fatal(err)
		}
		if f := both[PartitionKey{Group: "fraud", Topic: "payments", Partition: 0}]; len(f) != keep || f[keep-1].Lag != 7 {
			t.Fatalf("fraud: %+v", f)
		}
		st, err := LoadSamples(ctx, db, "staging", []string{"billing"})
		if err != nil || len(st) != 1 {
			t.Fatalf("staging: %v %v", st, err)
		}
		if err := RecordRound(ctx, db, "", round(t0), ret); err == nil {
			t.Fatal("empty cluster name accepted")
		}
	})
}

// TestRecordRoundLarge proves the chunked insert and the IN lists hold for
// more rows and groups than one statement may carry.
func TestRecordRoundLarge(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		var groups []GroupLag
		var names []string
		for g := 0; g < 600; g++ {
			gl := GroupLag{Group: "g" + string(rune('a'+g%26)) + time.Duration(g).String()}
			for p := int32(0); p < 3; p++ {
				gl.Partitions = append(gl.Partitions, PartitionLag{Topic: "t", Partition: p, Committed: 1, End: 2, Lag: 1})
			}
			groups = append(groups, gl)
			names = append(names, gl.Group)
		}
		for i := 0; i < 3; i++ {
			if err := RecordRound(ctx, db, "prod", round(t0.Add(time.Duration(i)*time.Minute), groups...), Retention{Step: time.Minute, Span: 90 * time.Second}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := LoadSamples(ctx, db, "prod", names)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1800 {
			t.Fatalf("partitions %d", len(got))
		}
		for k, h := range got {
			if len(h) != 2 {
				t.Fatalf("%v kept %d", k, len(h))
			}
		}
		// The window read by time (more groups than fewGroups) keeps
		// only the named groups and the samples inside the window.
		win, err := LoadWindow(ctx, db, "prod", names[:300], t0.Add(2*time.Minute), t0.Add(2*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(win) != 900 {
			t.Fatalf("window partitions %d, want 900", len(win))
		}
		for k, h := range win {
			if len(h) != 1 || !h[0].At.Equal(t0.Add(2*time.Minute)) {
				t.Fatalf("%v window %+v", k, h)
			}
		}
	})
}

// TestDownsampleAndWindow: rounds every 10 seconds keep one sample per
// partition per minute (the first in its minute); samples older than the
// span expire for every group; the window read returns only samples inside
// it; the store stays bounded however many rounds come.
func TestDownsampleAndWindow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		ret := Retention{Step: time.Minute, Span: 3 * time.Minute}
		part := func(c int64) []PartitionLag {
			return []PartitionLag{{Topic: "orders", Partition: 0, Committed: c, End: c + 5, Lag: 5}}
		}
		// fraud is read once, alone, inside minute 0.
		if err := RecordRound(ctx, db, "prod", round(t0.Add(5*time.Second), GroupLag{Group: "fraud", Partitions: part(1)}), ret); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 60; i++ { // ten minutes of rounds every 10 s
			at := t0.Add(time.Duration(i) * 10 * time.Second)
			if err := RecordRound(ctx, db, "prod", round(at, GroupLag{Group: "billing", Partitions: part(int64(i))}), ret); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM kafka_lag_samples WHERE cluster = 'prod' AND group_name = 'billing'").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 4 { // three minutes back, one a minute, and the current minute's
				t.Fatalf("after round %d the store holds %d samples of one partition", i, n)
			}
		}
		all, err := LoadSamples(ctx, db, "prod", []string{"billing", "fraud"})
		if err != nil {
			t.Fatal(err)
		}
		h := all[PartitionKey{Group: "billing", Topic: "orders", Partition: 0}]
		// Last round at 9:50; kept from 6:50 on: the first of minutes 7,
		// 8 and 9, each the round at :00.
		var got []time.Duration
		for _, s := range h {
			got = append(got, s.At.Sub(t0))
		}
		want := []time.Duration{7 * time.Minute, 8 * time.Minute, 9 * time.Minute}
		if len(got) != len(want) {
			t.Fatalf("kept %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("kept %v, want %v", got, want)
			}
		}
		if h[len(h)-1].Committed != 54 {
			t.Fatalf("newest sample %+v, want the 9:00 round's", h[len(h)-1])
		}
		// fraud's lone sample expired with the span.
		if f := all[PartitionKey{Group: "fraud", Topic: "orders", Partition: 0}]; len(f) != 0 {
			t.Fatalf("fraud kept %+v past the span", f)
		}
		win, err := LoadWindow(ctx, db, "prod", []string{"billing"}, t0.Add(7*time.Minute+time.Second), t0.Add(9*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if w := win[PartitionKey{Group: "billing", Topic: "orders", Partition: 0}]; len(w) != 2 || w[0].At.Sub(t0) != 8*time.Minute {
			t.Fatalf("window %+v", w)
		}
	})
}

// TestDownsamplePerPartition: a bucket that already has a group's sample
// takes no second one, while another group's first sample in the same
// bucket is stored.
func TestDownsamplePerPartition(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		ret := Retention{Step: time.Minute, Span: time.Hour}
		p := []PartitionLag{{Topic: "orders", Partition: 0, Committed: 1, End: 2, Lag: 1}}
		if err := RecordRound(ctx, db, "prod", round(t0.Add(5*time.Second), GroupLag{Group: "billing", Partitions: p}), ret); err != nil {
			t.Fatal(err)
		}
		if err := RecordRound(ctx, db, "prod", round(t0.Add(20*time.Second), GroupLag{Group: "fraud", Partitions: p}, GroupLag{Group: "billing", Partitions: p}), ret); err != nil {
			t.Fatal(err)
		}
		if err := RecordRound(ctx, db, "prod", round(t0.Add(70*time.Second), GroupLag{Group: "billing", Partitions: p}), ret); err != nil {
			t.Fatal(err)
		}
		all, err := LoadSamples(ctx, db, "prod", []string{"billing", "fraud"})
		if err != nil {
			t.Fatal(err)
		}
		f := all[PartitionKey{Group: "fraud", Topic: "orders", Partition: 0}]
		b := all[PartitionKey{Group: "billing", Topic: "orders", Partition: 0}]
		if len(f) != 1 || f[0].At.Sub(t0) != 20*time.Second || len(b) != 2 || b[0].At.Sub(t0) != 5*time.Second || b[1].At.Sub(t0) != 70*time.Second {
			t.Fatalf("fraud %+v billing %+v", f, b)
		}
	})
}
