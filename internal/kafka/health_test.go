package kafka

import (
	"context"
	"strings"
	"testing"
)

func part(p, leader int32, replicas, isr []int32) PartitionMeta {
	return PartitionMeta{Partition: p, Leader: leader, Replicas: replicas, ISR: isr}
}

func TestJudgeTopic(t *testing.T) {
	cfg := map[string]string{ConfigMinInsyncReplicas: "2", ConfigCleanupPolicy: "compact", ConfigRetentionMs: "604800000", ConfigRetentionBytes: "-1"}
	cases := []struct {
		name   string
		m      TopicMeta
		health string
		kinds  []string
		detail string
	}{
		{"healthy", TopicMeta{Topic: "t", Configs: cfg, Partitions: []PartitionMeta{
			part(0, 1, []int32{1, 2, 3}, []int32{1, 2, 3}),
			part(1, 2, []int32{2, 3, 1}, []int32{3, 1, 2}), // same members, other order
		}}, HealthOK, nil, ""},
		{"one replica behind", TopicMeta{Topic: "t", Configs: cfg, Partitions: []PartitionMeta{
			part(0, 1, []int32{1, 2, 3}, []int32{1, 2}),
			part(1, 2, []int32{2, 3, 1}, []int32{2, 3, 1}),
		}}, HealthWarning, []string{IssueUnderReplicated}, "0: 2 of 3 in sync, broker 3 behind"},
		{"below min ISR", TopicMeta{Topic: "t", Configs: cfg, Partitions: []PartitionMeta{
			part(0, 1, []int32{1, 2, 3}, []int32{1}),
		}}, HealthCritical, []string{IssueBelowMinISR, IssueUnderReplicated}, "acks=all are refused"},
		{"offline", TopicMeta{Topic: "t", Configs: cfg, Partitions: []PartitionMeta{
			part(0, -1, []int32{1, 2, 3}, nil),
			part(1, 2, []int32{2, 3, 1}, []int32{2, 3, 1}),
		}}, HealthCritical, []string{IssueOffline, IssueBelowMinISR, IssueUnderReplicated}, "1 of 2 partitions have no leader"},
		{"min ISR the replicas can never meet", TopicMeta{Topic: "t", Configs: map[string]string{ConfigMinInsyncReplicas: "3"}, Partitions: []PartitionMeta{
			part(0, 1, []int32{1, 2}, []int32{1, 2}),
		}}, HealthCritical, []string{IssueBelowMinISR, IssueMinISRAboveReplica}, "exceeds the replication factor 2"},
		{"configs unreadable: replication still judged", TopicMeta{Topic: "t", Error: "configs: TOPIC_AUTHORIZATION_FAILED", Partitions: []PartitionMeta{
			part(0, 1, []int32{1, 2}, []int32{1}),
		}}, HealthWarning, []string{IssueUnderReplicated}, "1 of 2 in sync"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := JudgeTopic(c.m)
			if h.Health != c.health {
				t.Fatalf("health %s, want %s: %+v", h.Health, c.health, h.Issues)
			}
			var kinds []string
			var details []string
			for _, is := range h.Issues {
				kinds = append(kinds, is.Kind)
				details = append(details, is.Detail)
			}
			if strings.Join(kinds, ",") != strings.Join(c.kinds, ",") {
				t.Fatalf("issues %v, want %v", kinds, c.kinds)
			}
			if !strings.Contains(strings.Join(details, "|"), c.detail) {
				t.Fatalf("details %q lack %q", details, c.detail)
			}
			if h.Error != c.m.Error {
				t.Fatalf("error %q", h.Error)
			}
		})
	}
	h := JudgeTopic(cases[0].m)
	if h.ReplicationFactor != 3 || h.MinInsyncReplicas != 2 || h.CleanupPolicy != "compact" || h.Retention != "7d" || h.RetentionBytes != "unlimited" {
		t.Fatalf("configs: %+v", h)
	}
	if got := retention("-1"); got != "forever" {
		t.Fatalf("retention -1: %s", got)
	}
	if got := retention("5400000"); got != "1h30m0s" {
		t.Fatalf("retention 90m: %s", got)
	}
}

func TestTopicHealthOnCluster(t *testing.T) {
	ctx := context.Background()
	tc := newTestCluster(t, 3)
	tc.createTopic(t, "member-balances", 3, 3, map[string]string{ConfigCleanupPolicy: "compact", ConfigMinInsyncReplicas: "2"})
	tc.createTopic(t, "api-usage", 2, 2, map[string]string{ConfigMinInsyncReplicas: "3", ConfigRetentionMs: "86400000"})

	rep, err := tc.client.TopicHealth(ctx, HealthParams{Topics: []string{"member-balances", "api-usage"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Topics) != 2 {
		t.Fatalf("topics %+v", rep.Topics)
	}
	mb, au := rep.Topics[0], rep.Topics[1]
	if mb.Topic != "member-balances" || mb.Health != HealthOK || mb.Partitions != 3 || mb.ReplicationFactor != 3 ||
		mb.MinInsyncReplicas != 2 || mb.CleanupPolicy != "compact" || mb.Retention != "7d" {
		t.Fatalf("member-balances: %+v", mb)
	}
	if au.Health != HealthCritical || au.Retention != "1d" || au.CleanupPolicy != "delete" ||
		len(au.Issues) == 0 || au.Issues[len(au.Issues)-1].Kind != IssueMinISRAboveReplica {
		t.Fatalf("api-usage: %+v", au)
	}
	if !strings.Contains(rep.Summary(), "api-usage (critical)") {
		t.Fatalf("summary %q", rep.Summary())
	}

	// Every topic when none are named, internal ones included.
	all, err := tc.client.TopicHealth(ctx, HealthParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Topics) < 2 {
		t.Fatalf("all topics: %d", len(all.Topics))
	}

	_, err = tc.client.TopicHealth(ctx, HealthParams{Topics: []string{"member-balance"}})
	if err == nil || !strings.Contains(err.Error(), `unknown topic "member-balance"; closest: member-balances`) {
		t.Fatalf("unknown topic: %v", err)
	}
}
