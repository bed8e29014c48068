package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/dataworkers/dw/internal/suggest"
)

// The topic configs that decide durability and retention, read for every
// topic in one batched DescribeConfigs.
const (
	ConfigCleanupPolicy     = "cleanup.policy"
	ConfigRetentionMs       = "retention.ms"
	ConfigRetentionBytes    = "retention.bytes"
	ConfigMinInsyncReplicas = "min.insync.replicas"
)

var healthConfigs = []string{ConfigCleanupPolicy, ConfigRetentionMs, ConfigRetentionBytes, ConfigMinInsyncReplicas}

// PartitionMeta is what the cluster metadata says about one partition.
type PartitionMeta struct {
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader" jsonschema:"broker id of the leader; -1 when the partition has none"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr" jsonschema:"in-sync replicas"`
	Offline   []int32 `json:"offline,omitempty" jsonschema:"replicas on offline log directories or brokers"`
	Error     string  `json:"error,omitempty"`
}

// TopicMeta is one topic's metadata and effective configs, the input to
// JudgeTopic.
type TopicMeta struct {
	Topic      string            `json:"topic"`
	Internal   bool              `json:"internal,omitempty"`
	Partitions []PartitionMeta   `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	// Error says what could not be read (configs or metadata).
	Error string `json:"error,omitempty"`
}

// Issue kinds.
const (
	IssueOffline            = "offline"
	IssueUnderReplicated    = "under_replicated"
	IssueBelowMinISR        = "below_min_isr"
	IssueMinISRAboveReplica = "min_isr_above_replication"
)

// Health levels of a topic.
const (
	HealthOK       = "ok"
	HealthWarning  = "warning"
	HealthCritical = "critical"
)

// Issue is one problem on a topic, with the partitions it touches.
type Issue struct {
	Kind       string  `json:"kind" jsonschema:"offline, under_replicated, below_min_isr or min_isr_above_replication"`
	Partitions []int32 `json:"partitions,omitempty"`
	Detail     string  `json:"detail"`
}

// TopicHealth is the judgement on one topic.
type TopicHealth struct {
	Topic             string `json:"topic"`
	Health            string `json:"health" jsonschema:"ok, warning (redundancy lost) or critical (reads or acks=all writes fail)"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	// MinInsyncReplicas is 0 when the config could not be read.
	MinInsyncReplicas int     `json:"min_insync_replicas,omitempty"`
	CleanupPolicy     string  `json:"cleanup_policy,omitempty"`
	Retention         string  `json:"retention,omitempty" jsonschema:"retention.ms as a duration, or forever"`
	RetentionBytes    string  `json:"retention_bytes,omitempty" jsonschema:"retention.bytes per partition, or unlimited"`
	Issues            []Issue `json:"issues,omitempty"`
	Error             string  `json:"error,omitempty" jsonschema:"what could not be read for this topic"`
}

// JudgeTopic finds the problems in one topic's metadata: partitions with no
// leader (offline), fewer in-sync replicas than replicas (under-replicated),
// fewer in-sync replicas than min.insync.replicas (acks=all producers are
// refused), and a min.insync.replicas the replication factor can never
// meet. It is pure so that under-replication, which a test cluster cannot
// produce, is tested on values.
func JudgeTopic(m TopicMeta) TopicHealth {
	h := TopicHealth{Topic: m.Topic, Health: HealthOK, Partitions: len(m.Partitions), Error: m.Error}
	parts := slices.Clone(m.Partitions)
	sort.Slice(parts, func(i, j int) bool { return parts[i].Partition < parts[j].Partition })
	for _, p := range parts {
		h.ReplicationFactor = max(h.ReplicationFactor, len(p.Replicas))
	}
	h.CleanupPolicy = m.Configs[ConfigCleanupPolicy]
	h.Retention = retention(m.Configs[ConfigRetentionMs])
	h.RetentionBytes = retentionBytes(m.Configs[ConfigRetentionBytes])
	if v, err := strconv.Atoi(m.Configs[ConfigMinInsyncReplicas]); err == nil && v > 0 {
		h.MinInsyncReplicas = v
	}

	var offline, under, below []int32
	var underDetail, belowDetail []string
	for _, p := range parts {
		if p.Leader < 0 {
			offline = append(offline, p.Partition)
		}
		// ISR and replicas are counted rather than compared as lists:
		// brokers report them in different orders.
		if len(p.ISR) < len(p.Replicas) {
			under = append(under, p.Partition)
			underDetail = append(underDetail, fmt.Sprintf("%d: %d of %d in sync%s", p.Partition, len(p.ISR), len(p.Replicas), missing(p)))
		}
		if h.MinInsyncReplicas > 0 && len(p.ISR) < h.MinInsyncReplicas {
			below = append(below, p.Partition)
			belowDetail = append(belowDetail, fmt.Sprintf("%d: %d in sync", p.Partition, len(p.ISR)))
		}
	}
	if len(offline) > 0 {
		h.Issues = append(h.Issues, Issue{Kind: IssueOffline, Partitions: offline,
			Detail: fmt.Sprintf("%d of %d partitions have no leader: nothing can be read from or written to them", len(offline), len(parts))})
	}
	if len(below) > 0 {
		h.Issues = append(h.Issues, Issue{Kind: IssueBelowMinISR, Partitions: below,
			Detail: fmt.Sprintf("fewer in-sync replicas than min.insync.replicas=%d, so producers with acks=all are refused (%s)", h.MinInsyncReplicas, strings.Join(belowDetail, "; "))})
	}
	if h.MinInsyncReplicas > 0 && h.ReplicationFactor > 0 && h.MinInsyncReplicas > h.ReplicationFactor {
		h.Issues = append(h.Issues, Issue{Kind: IssueMinISRAboveReplica,
			Detail: fmt.Sprintf("min.insync.replicas=%d exceeds the replication factor %d, so acks=all writes can never succeed", h.MinInsyncReplicas, h.ReplicationFactor)})
	}
	if len(under) > 0 {
		h.Issues = append(h.Issues, Issue{Kind: IssueUnderReplicated, Partitions: under,
			Detail: "in-sync replicas below the replica count: " + strings.Join(underDetail, "; ")})
	}
	for _, is := range h.Issues {
		switch is.Kind {
		case IssueOffline, IssueBelowMinISR, IssueMinISRAboveReplica:
			h.Health = HealthCritical
		case IssueUnderReplicated:
			if h.Health == HealthOK {
				h.Health = HealthWarning
			}
		}
	}
	return h
}

// missing names the replicas that dropped out of the ISR.
func missing(p PartitionMeta) string {
	var out []string
	for _, r := range p.Replicas {
		if !slices.Contains(p.ISR, r) {
			out = append(out, strconv.Itoa(int(r)))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return ", broker " + strings.Join(out, ", ") + " behind"
}

func retention(ms string) string {
	v, err := strconv.ParseInt(ms, 10, 64)
	switch {
	case ms == "":
		return ""
	case err != nil:
		return ms
	case v < 0:
		return "forever"
	case v%(24*3600*1000) == 0:
		return fmt.Sprintf("%dd", v/(24*3600*1000))
	}
	return time.Duration(v * int64(time.Millisecond)).String()
}

func retentionBytes(b string) string {
	v, err := strconv.ParseInt(b, 10, 64)
	switch {
	case b == "":
		return ""
	case err != nil:
		return b
	case v < 0:
		return "unlimited"
	}
	return b + " bytes"
}

// HealthReport answers get_topic_health.
type HealthReport struct {
	Topics []TopicHealth `json:"topics"`
}

// Summary is a few lines a person can read in the client.
func (r *HealthReport) Summary() string {
	var b strings.Builder
	bad := 0
	for _, t := range r.Topics {
		if t.Health != HealthOK || t.Error != "" {
			bad++
		}
	}
	fmt.Fprintf(&b, "%d topics checked, %d with problems", len(r.Topics), bad)
	for _, t := range r.Topics {
		for _, is := range t.Issues {
			fmt.Fprintf(&b, "\n- %s (%s): %s", t.Topic, t.Health, is.Detail)
		}
		if t.Error != "" {
			fmt.Fprintf(&b, "\n- %s: %s", t.Topic, t.Error)
		}
	}
	return b.String()
}

// HealthParams selects topics for TopicHealth.
type HealthParams struct {
	Topics []string `json:"topics,omitempty" jsonschema:"topics to check; empty means every topic, internal ones included"`
}

// TopicHealth reads metadata for the topics (all when none are named) and
// their configs in one batched round, and judges each with JudgeTopic.
func (c *Client) TopicHealth(ctx context.Context, p HealthParams) (*HealthReport, error) {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	metas, err := c.TopicMetadata(ctx, p.Topics)
	if err != nil {
		return nil, err
	}
	rep := &HealthReport{}
	for _, m := range metas {
		rep.Topics = append(rep.Topics, JudgeTopic(m))
	}
	return rep, nil
}

// TopicMetadata reads the metadata and health configs of the topics (all
// when none are named). A topic whose configs cannot be read keeps its
// metadata and says why in Error.
func (c *Client) TopicMetadata(ctx context.Context, topics []string) ([]TopicMeta, error) {
	all, err := c.adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return nil, c.wrap("read topic metadata", err)
	}
	names := topics
	if len(names) == 0 {
		names = all.Names()
	} else {
		known := all.Names()
		for _, t := range names {
			if _, ok := all[t]; !ok {
				return nil, fmt.Errorf("kafka: unknown topic %q; closest: %s", t, strings.Join(suggest.Closest(t, known, 3), ", "))
			}
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	cfgErr := map[string]string{}
	configs, err := c.adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		var se *kadm.ShardErrors
		if !errors.As(err, &se) {
			return nil, c.wrap("describe topic configs", err)
		}
		for _, t := range names {
			cfgErr[t] = "configs: " + err.Error()
		}
	}
	byName := map[string]map[string]string{}
	for _, rc := range configs {
		if rc.Err != nil {
			msg := rc.Err.Error()
			if rc.ErrMessage != "" {
				msg += ": " + rc.ErrMessage
			}
			cfgErr[rc.Name] = "configs: " + msg
			continue
		}
		delete(cfgErr, rc.Name)
		m := map[string]string{}
		for _, cf := range rc.Configs {
			if slices.Contains(healthConfigs, cf.Key) && cf.Value != nil {
				m[cf.Key] = *cf.Value
			}
		}
		byName[rc.Name] = m
	}
	out := make([]TopicMeta, 0, len(names))
	for _, t := range names {
		d := all[t]
		m := TopicMeta{Topic: t, Internal: d.IsInternal, Configs: byName[t], Error: cfgErr[t]}
		if d.Err != nil {
			m.Error = strings.TrimPrefix(strings.Join([]string{m.Error, "metadata: " + d.Err.Error()}, "; "), "; ")
		}
		for _, pd := range d.Partitions.Sorted() {
			pm := PartitionMeta{Partition: pd.Partition, Leader: pd.Leader, Replicas: pd.Replicas, ISR: pd.ISR, Offline: pd.OfflineReplicas}
			if pd.Err != nil {
				pm.Error = pd.Err.Error()
			}
			m.Partitions = append(m.Partitions, pm)
		}
		out = append(out, m)
	}
	return out, nil
}
