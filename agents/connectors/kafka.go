package connectors

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/kafka"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// ConsumerLagIn narrows a lag reading.
type ConsumerLagIn struct {
	Group string `json:"group,omitempty" jsonschema:"consumer group to report; default every consumer group in the cluster (Kafka Connect worker groups excluded)"`
	Topic string `json:"topic,omitempty" jsonschema:"only partitions of this topic; default every topic the groups consume"`
}

// GroupLag is one group's lag and status with the owner of the job that
// consumes it.
type GroupLag struct {
	kafka.GroupReport
	Owner ConsumerOwner `json:"owner" jsonschema:"the consuming job in the context graph and its owner, or why none is named"`
}

// ConsumerLagOut is the lag round with statuses and owners.
type ConsumerLagOut struct {
	Cluster string     `json:"cluster" jsonschema:"cluster name used in asset ids and stored samples (kafka.name in dw.yaml)"`
	At      time.Time  `json:"at" jsonschema:"when this round was read"`
	Window  string     `json:"window" jsonschema:"span of stored samples each status was judged over"`
	Groups  []GroupLag `json:"groups" jsonschema:"one entry per consumer group, with per-partition lag and status"`
	Errors  []string   `json:"errors,omitempty" jsonschema:"parts of the cluster that did not answer"`
	Note    string     `json:"note" jsonschema:"how statuses are judged"`
}

const lagNote = "Each call reads one batched round and stores it; a status is judged over the stored samples in the window, not from this reading alone, so a group needs at least two rounds inside the window before it can be called lagging or stalled."

var consumerLagTool = mcpserver.Tool{
	Name:  "get_consumer_lag",
	Title: "Consumer lag with status and owner",
	Description: "Reads consumer lag per group, topic and partition in one batched round, stores the round, and judges each group over the window of stored samples: ok, lagging (lag grows at every sample), rewound (committed offset went back), stalled (commits stopped while records arrive) or stopped (no commit for longer than the window), with the evidence. " +
		"Names the owner of the consuming job from the context graph (matching the group id or the members' client ids to a stream job or connector). Call it again a minute later to give the status more samples.",
	ReadOnly:   false,
	Idempotent: false,
	OpenWorld:  true,
}

func (h *handlers) consumerLag(ctx context.Context, in ConsumerLagIn) (*ConsumerLagOut, string, error) {
	var f kafka.LagFilter
	if g := strings.TrimSpace(in.Group); g != "" {
		f.Groups = []string{g}
	}
	if t := strings.TrimSpace(in.Topic); t != "" {
		f.Topics = []string{t}
	}
	c, err := h.kafkaClient(ctx)
	if err != nil {
		return nil, "", err
	}
	db, err := h.d.Store(ctx)
	if err != nil {
		return nil, "", err
	}
	m := &kafka.Monitor{Source: c, DB: db, Clock: h.d.Clock, Cluster: h.clusterName()}
	rep, err := m.ConsumerLag(ctx, f)
	if err != nil {
		return nil, "", err
	}
	owners := h.newOwnerFinder(ctx)
	out := &ConsumerLagOut{Cluster: rep.Cluster, At: rep.At, Window: rep.Window, Errors: rep.Errors, Groups: []GroupLag{}, Note: lagNote}
	for _, g := range rep.Groups {
		out.Groups = append(out.Groups, GroupLag{GroupReport: g, Owner: owners.find(ctx, g)})
	}
	var b strings.Builder
	b.WriteString(rep.Summary())
	for _, g := range out.Groups {
		if g.Status == kafka.StatusOK {
			continue
		}
		fmt.Fprintf(&b, "\n  %s: %s", g.Group, g.Owner.line())
	}
	if in.Group != "" && len(out.Groups) == 1 && out.Groups[0].Status == kafka.StatusOK {
		fmt.Fprintf(&b, "\n  %s: %s", out.Groups[0].Group, out.Groups[0].Owner.line())
	}
	return out, b.String(), nil
}

// TopicHealthIn selects a topic.
type TopicHealthIn struct {
	Topic string `json:"topic,omitempty" jsonschema:"topic to check; default every topic, internal ones included"`
}

// TopicHealthOut is the judgement on each topic.
type TopicHealthOut struct {
	Cluster string              `json:"cluster" jsonschema:"cluster name (kafka.name in dw.yaml)"`
	Brokers []string            `json:"brokers" jsonschema:"seed brokers that were asked"`
	Topics  []kafka.TopicHealth `json:"topics" jsonschema:"per topic: health, replication, min.insync.replicas, retention, cleanup policy and the issues found"`
}

var topicHealthTool = mcpserver.Tool{
	Name:  "get_topic_health",
	Title: "Topic health",
	Description: "Checks topics in one batched metadata and config read: partitions with no leader (offline), in-sync replicas fewer than replicas (under-replicated), in-sync replicas below min.insync.replicas (acks=all producers refused), a min.insync.replicas the replication factor can never meet, " +
		"and the configs that decide durability and retention (cleanup.policy, retention.ms, retention.bytes, min.insync.replicas).",
	ReadOnly:   true,
	Idempotent: true,
	OpenWorld:  true,
}

func (h *handlers) topicHealth(ctx context.Context, in TopicHealthIn) (*TopicHealthOut, string, error) {
	c, err := h.kafkaClient(ctx)
	if err != nil {
		return nil, "", err
	}
	var p kafka.HealthParams
	if t := strings.TrimSpace(in.Topic); t != "" {
		p.Topics = []string{t}
	}
	rep, err := c.TopicHealth(ctx, p)
	if err != nil {
		return nil, "", err
	}
	out := &TopicHealthOut{Cluster: h.clusterName(), Brokers: c.Brokers(), Topics: rep.Topics}
	if out.Topics == nil {
		out.Topics = []kafka.TopicHealth{}
	}
	return out, fmt.Sprintf("cluster %s: %s", out.Cluster, rep.Summary()), nil
}
