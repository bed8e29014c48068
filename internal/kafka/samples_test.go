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
		for i := 0; i < 8; i++ {
			at := t0.Add(time.Duration(i) * time.Minute)
			r := round(at,
				GroupLag{Group: "billing", Partitions: []PartitionLag{
					{Topic: "orders", Partition: 0, Committed: int64(10 * i), End: int64(10*i + 3), Lag: 3},
					{Topic: "orders", Partition: 1, Committed: -1, End: -1, Lag: -1, Error: "NOT_LEADER_FOR_PARTITION"},
				}},
				GroupLag{Group: "fraud", Partitions: []PartitionLag{{Topic: "payments", Partition: 0, Committed: 1, End: int64(1 + i), Lag: int64(i)}}},
			)
			if err := RecordRound(ctx, db, "prod", r, keep); err != nil {
				t.Fatal(err)
			}
			// Recording a round twice changes nothing.
			if err := RecordRound(ctx, db, "prod", r, keep); err != nil {
				t.Fatal(err)
			}
		}
		// Another cluster's samples stay apart.
		if err := RecordRound(ctx, db, "staging", round(t0, GroupLag{Group: "billing", Partitions: []PartitionLag{{Topic: "orders", Partition: 0, Committed: 1, End: 1}}}), keep); err != nil {
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
		if err := RecordRound(ctx, db, "", round(t0), keep); err == nil {
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
			if err := RecordRound(ctx, db, "prod", round(t0.Add(time.Duration(i)*time.Minute), groups...), 2); err != nil {
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
	})
}
