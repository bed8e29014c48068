package connectors

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/dataworkers/dw/internal/page"
)

// TestWideClusterIsPaged: a cluster with 130 topics and 70 consumer groups
// (one on a 120-partition topic) answers topic health and consumer lag in
// bounded pages, worst topics first, and paging visits each topic and
// group exactly once.
func TestWideClusterIsPaged(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 1)
	for i := range 129 {
		c.createTopic(t, fmt.Sprintf("t%03d", i), 1, 1, nil)
	}
	c.createTopic(t, "wide", 120, 1, nil)
	parts := make([]int32, 120)
	offsets := map[int32]int64{}
	for i := range parts {
		parts[i] = int32(i)
		offsets[int32(i)] = int64(i % 3)
	}
	c.produce(t, "wide", 3, parts...)
	for g := range 70 {
		c.commit(t, fmt.Sprintf("g%02d", g), "wide", offsets)
	}
	e := newEnv(t, c.yaml())

	first, _, err := e.h.topicHealth(ctx, TopicHealthIn{})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Topics) != page.DefaultLimit || first.Total < 130 || first.NextCursor == "" || first.HealthCounts["ok"] == 0 {
		t.Fatalf("topic health page 1: %d of %d, counts %v", len(first.Topics), first.Total, first.HealthCounts)
	}
	seen := map[string]int{}
	in := TopicHealthIn{Params: page.Params{Limit: 40}}
	for {
		out, _, err := e.h.topicHealth(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range out.Topics {
			seen[tp.Topic]++
		}
		if out.NextCursor == "" {
			break
		}
		in.Cursor = out.NextCursor
	}
	if len(seen) != first.Total {
		t.Errorf("topic pages visited %d of %d", len(seen), first.Total)
	}
	for tp, n := range seen {
		if n != 1 {
			t.Errorf("topic %s listed %d times", tp, n)
		}
	}

	lag, _, err := e.h.consumerLag(ctx, ConsumerLagIn{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(lag)
	if len(raw) > 80_000 || len(lag.Groups) != lagDefaultGroups || lag.Total != 70 || lag.NextCursor == "" {
		t.Fatalf("consumer lag page 1: %d characters, %d of %d groups", len(raw), len(lag.Groups), lag.Total)
	}
	if g := lag.Groups[0]; g.PartitionsTotal != 120 || len(g.Partitions) != maxGroupPartitions || g.Partitions[0].Lag < g.Partitions[len(g.Partitions)-1].Lag {
		t.Errorf("group %s: %d of %d partitions listed, not most lagging first", g.Group, len(g.Partitions), g.PartitionsTotal)
	}
	sum := 0
	for _, n := range lag.StatusCounts {
		sum += n
	}
	if sum != 70 {
		t.Errorf("status counts %v cover %d groups, want 70", lag.StatusCounts, sum)
	}
	groups := map[string]int{}
	lin := ConsumerLagIn{Params: page.Params{Limit: 30}}
	for {
		out, _, err := e.h.consumerLag(ctx, lin)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range out.Groups {
			groups[g.Group]++
		}
		if out.NextCursor == "" {
			break
		}
		lin.Cursor = out.NextCursor
	}
	if len(groups) != 70 {
		t.Errorf("group pages visited %d of 70", len(groups))
	}
	for g, n := range groups {
		if n != 1 {
			t.Errorf("group %s listed %d times", g, n)
		}
	}
	one, _, err := e.h.consumerLag(ctx, ConsumerLagIn{Group: "g07"})
	if err != nil || len(one.Groups) != 1 || len(one.Groups[0].Partitions) != 120 {
		t.Fatalf("one group: %+v %v", one, err)
	}
	if _, _, err := e.h.consumerLag(ctx, ConsumerLagIn{Group: "g01", Params: page.Params{Cursor: lag.NextCursor}}); err == nil {
		t.Error("a cursor of another filter was accepted")
	}
}
