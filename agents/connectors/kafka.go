package connectors

import (
	"context"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/groupowner"
	"github.com/dataworkers/dw/internal/kafka"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/page"
)

// ConsumerLagIn narrows a lag reading.
type ConsumerLagIn struct {
	Group string `json:"group,omitempty" jsonschema:"consumer group to report; default every consumer group in the cluster (Kafka Connect worker groups excluded)"`
	Topic string `json:"topic,omitempty" jsonschema:"only partitions of this topic; default every topic the groups consume"`
	page.Params
}

// GroupLag is one group's lag and status with the owner of the job that
// consumes it.
type GroupLag struct {
	kafka.GroupReport
	// PartitionsTotal counts them all when only the worst are listed.
	PartitionsTotal int              `json:"partitions_total" jsonschema:"partitions the group consumes; partitions lists the most lagging 10 (200 when one group is asked for)"`
	Owner           groupowner.Owner `json:"owner" jsonschema:"the consuming job in the context graph and its owner, or why none is named"`
}

// Bounds on get_consumer_lag's answer. A group on a 1,000-partition topic
// is judged on all of them and shows its most lagging; a partition's entry
// is about 250 characters, so groups per page times partitions per group
// stays near 200.
const (
	lagDefaultGroups      = 20
	maxGroupPartitions    = 10
	maxOneGroupPartitions = 200
)

// ConsumerLagOut is the lag round with statuses and owners.
type ConsumerLagOut struct {
	Cluster string     `json:"cluster" jsonschema:"cluster name used in asset ids and stored samples (kafka.name in dw.yaml)"`
	At      time.Time  `json:"at" jsonschema:"when this round was read"`
	Window  string     `json:"window" jsonschema:"span of stored samples each status was judged over"`
	Groups  []GroupLag `json:"groups" jsonschema:"this page of consumer groups, by name, with per-partition lag and status"`
	// StatusCounts covers every group, on every page.
	StatusCounts map[string]int `json:"status_counts" jsonschema:"groups per status, over all groups"`
	Errors       []string       `json:"errors,omitempty" jsonschema:"parts of the cluster that did not answer"`
	Note         string         `json:"note" jsonschema:"how statuses are judged"`
	page.Info
}

const lagNote = "Each call reads one batched round and stores it; a status is judged over the stored samples in the window, not from this reading alone, so a group needs at least two rounds inside the window before it can be called lagging or stalled."

var consumerLagTool = mcpserver.Tool{
	Name:  "get_consumer_lag",
	Title: "Consumer lag with status and owner",
	Description: "Reads consumer lag per group, topic and partition in one batched round, stores the round, and judges each group over the window of stored samples: ok, lagging (lag grows at every sample), rewound (committed offset went back), stalled (commits stopped while records arrive) or stopped (no commit for longer than the window), with the evidence. " +
		"Names the owner of the consuming job from the context graph (matching the group id or the members' client ids to a stream job or connector). Call it again a minute later to give the status more samples. Groups are paged by name (limit, default 20, at most 500; next_cursor; total) with status_counts over all; each lists its 10 most lagging partitions (200 when one group is asked for).",
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
	pg, err := in.ResolveWith(lagDefaultGroups, page.MaxLimit, "get_consumer_lag", h.clusterName(), in.Group, in.Topic)
	if err != nil {
		return nil, "", err
	}
	c, err := h.kafkaClient(ctx)
	if err != nil {
		return nil, "", err
	}
	db, err := h.d.Store(ctx)
	if err != nil {
		return nil, "", err
	}
	// The window is held between calls: a call reads only the samples
	// stored since the last one.
	m := &kafka.Monitor{Source: c, DB: db, Clock: h.d.Clock, Cluster: h.clusterName(), Held: kafka.HeldFor(db, h.clusterName())}
	parts := maxGroupPartitions
	if in.Group != "" {
		parts = maxOneGroupPartitions
	}
	lp, err := m.ConsumerLagPage(ctx, f, pg, parts)
	if err != nil {
		return nil, "", err
	}
	rep := lp.Report
	graph, gerr := h.lineageGraph(ctx)
	owners := groupowner.New(ctx, graph, gerr, h.d.Config)
	out := &ConsumerLagOut{Cluster: rep.Cluster, At: rep.At, Window: rep.Window, Errors: rep.Errors, Groups: []GroupLag{}, Note: lagNote,
		StatusCounts: lp.StatusCounts, Info: lp.Info}
	owned := make([]string, 0, len(lp.Groups))
	for _, g := range lp.Groups {
		gl := GroupLag{GroupReport: g.GroupReport, PartitionsTotal: g.PartitionsTotal, Owner: owners.Find(ctx, g.Whole)}
		out.Groups = append(out.Groups, gl)
		owned = append(owned, gl.Owner.Line())
	}
	return out, lp.Summary(owned, in.Group != ""), nil
}

// TopicHealthIn selects a topic.
type TopicHealthIn struct {
	Topic string `json:"topic,omitempty" jsonschema:"topic to check; default every topic, internal ones included"`
	page.Params
}

// TopicHealthOut is the judgement on each topic.
type TopicHealthOut struct {
	Cluster string              `json:"cluster" jsonschema:"cluster name (kafka.name in dw.yaml)"`
	Brokers []string            `json:"brokers" jsonschema:"seed brokers that were asked"`
	Topics  []kafka.TopicHealth `json:"topics" jsonschema:"this page of topics, critical first, then warning, then ok, by name: health, replication, min.insync.replicas, retention, cleanup policy and the issues found"`
	// HealthCounts covers every topic, on every page.
	HealthCounts map[string]int `json:"health_counts" jsonschema:"topics per health, over all topics"`
	page.Info
}

var topicHealthTool = mcpserver.Tool{
	Name:  "get_topic_health",
	Title: "Topic health",
	Description: "Checks topics in one batched metadata and config read: partitions with no leader (offline), in-sync replicas fewer than replicas (under-replicated), in-sync replicas below min.insync.replicas (acks=all producers refused), a min.insync.replicas the replication factor can never meet, " +
		"and the configs that decide durability and retention (cleanup.policy, retention.ms, retention.bytes, min.insync.replicas). Topics are paged worst first (limit, default 50, at most 500; next_cursor; total) with health_counts over all.",
	ReadOnly:   true,
	Idempotent: true,
	OpenWorld:  true,
}

func (h *handlers) topicHealth(ctx context.Context, in TopicHealthIn) (*TopicHealthOut, string, error) {
	pg, err := in.Resolve("get_topic_health", h.clusterName(), in.Topic)
	if err != nil {
		return nil, "", err
	}
	c, err := h.kafkaClient(ctx)
	if err != nil {
		return nil, "", err
	}
	var p kafka.HealthParams
	if t := strings.TrimSpace(in.Topic); t != "" {
		p.Topics = []string{t}
	}
	hp, err := c.TopicHealthPage(ctx, p, pg)
	if err != nil {
		return nil, "", err
	}
	out := &TopicHealthOut{Cluster: h.clusterName(), Brokers: c.Brokers(), Topics: hp.Topics, HealthCounts: hp.HealthCounts, Info: hp.Info}
	summary := hp.Summary(out.Cluster)
	return out, summary, nil
}
