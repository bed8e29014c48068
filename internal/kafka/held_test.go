package kafka

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestHeldMatchesStore: two processes (two Held windows on one store) take
// turns recording rounds of different groups over twenty minutes; after
// every round each one's held window equals the window read from the
// store, including the rows the other process wrote and the ones expired.
func TestHeldMatchesStore(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		ret := Retention{Step: time.Minute, Span: 5 * time.Minute}
		a, b := &Held{db: db, cluster: "prod"}, &Held{db: db, cluster: "prod"}
		groups := []string{"billing", "fraud"}
		for i := 0; i < 40; i++ {
			at := t0.Add(time.Duration(i) * 30 * time.Second)
			g := groups[i%2]
			r := round(at, GroupLag{Group: g, Partitions: []PartitionLag{
				{Topic: "orders", Partition: 0, Committed: int64(i), End: int64(i + 2), Lag: 2},
				{Topic: "orders", Partition: 1, Committed: int64(i), End: int64(i), Lag: 0},
			}})
			if err := RecordRound(ctx, db, "prod", r, ret); err != nil {
				t.Fatal(err)
			}
			from := at.Add(-3 * time.Minute)
			want, err := LoadWindow(ctx, db, "prod", groups, from, at)
			if err != nil {
				t.Fatal(err)
			}
			for name, h := range map[string]*Held{"a": a, "b": b} {
				if name == "b" && i%3 != 0 {
					continue // b is called less often and must catch up
				}
				got, err := h.Window(ctx, groups, from, at)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("round %d, held %s:\n got %v\nwant %v", i, name, got, want)
				}
			}
		}
		// A wider window than the held one reloads from the store.
		at := t0.Add(39 * 30 * time.Second)
		want, _ := LoadWindow(ctx, db, "prod", groups, at.Add(-5*time.Minute), at)
		got, err := a.Window(ctx, groups, at.Add(-5*time.Minute), at)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("wider window: %v\n got %v\nwant %v", err, got, want)
		}
	})
}

// TestMonitorHeldJudgesAsStore: the same rounds judged with and without a
// held window give the same report.
func TestMonitorHeldJudgesAsStore(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		src := &fixedSource{groups: 3, parts: 4}
		clk := clock.NewFake(t0)
		held := &Monitor{Source: src, DB: db, Clock: clk, Cluster: "prod", Held: &Held{db: db, cluster: "prod"}}
		plain := &Monitor{Source: src, DB: db, Clock: clk, Cluster: "prod"}
		for i := 0; i < 30; i++ {
			clk.Advance(25 * time.Second)
			h, err := held.ConsumerLag(ctx, LagFilter{})
			if err != nil {
				t.Fatal(err)
			}
			src.round-- // the plain monitor reads the same round again
			p, err := plain.ConsumerLag(ctx, LagFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(h, p) {
				t.Fatalf("round %d:\nheld  %s\nplain %s", i, fmt.Sprint(h), fmt.Sprint(p))
			}
		}
	})
}
