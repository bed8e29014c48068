package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/dataworkers/dw/internal/suggest"
)

// LagFilter narrows a lag round. Empty fields mean "all".
type LagFilter struct {
	Groups []string `json:"groups,omitempty" jsonschema:"consumer groups to report; empty means every consumer group in the cluster"`
	Topics []string `json:"topics,omitempty" jsonschema:"topics to report; empty means every topic the groups consume"`
}

// PartitionLag is one group's position on one partition at one moment.
type PartitionLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the group's committed offset, -1 when it never committed.
	Committed int64 `json:"committed" jsonschema:"offset the group committed; -1 when it never committed on this partition"`
	// End is the partition's end offset (high watermark), -1 when unknown.
	End int64 `json:"end" jsonschema:"end offset (high watermark) of the partition; -1 when it could not be listed"`
	// Lag is End minus Committed, clamped at zero; -1 when Error is set.
	Lag int64 `json:"lag" jsonschema:"records the group is behind, never negative; -1 when error is set"`
	// ClientID and Host name the member consuming the partition, empty when
	// the group has no member on it.
	ClientID string `json:"client_id,omitempty" jsonschema:"client id of the group member assigned this partition"`
	Host     string `json:"host,omitempty" jsonschema:"host of the group member assigned this partition"`
	Error    string `json:"error,omitempty" jsonschema:"why lag could not be computed for this partition"`
}

// GroupLag is one group's lag over the partitions it consumes.
type GroupLag struct {
	Group   string `json:"group"`
	State   string `json:"state,omitempty" jsonschema:"group state as the coordinator reports it (Stable, Empty, PreparingRebalance, ...)"`
	Members int    `json:"members" jsonschema:"number of live members"`
	// TotalLag sums the partitions whose lag is known.
	TotalLag   int64          `json:"total_lag"`
	Partitions []PartitionLag `json:"partitions"`
	// Error is set when part of the group could not be read; the
	// partitions that could be read are still listed.
	Error string `json:"error,omitempty" jsonschema:"what could not be read for this group"`
}

// LagRound is one batched reading of lag for many groups.
type LagRound struct {
	At     time.Time  `json:"at"`
	Groups []GroupLag `json:"groups"`
	// Errors lists brokers that did not answer the group listing, whose
	// groups are therefore missing from an unfiltered round.
	Errors []string `json:"errors,omitempty"`
}

// Lag reads lag for the groups and topics in f in one batched round: the
// group list, one DescribeGroups and one OffsetFetch covering every group,
// and one end ListOffsets covering every topic, plus one start ListOffsets
// when a member owns partitions its group never committed (each sharded by
// broker, never per partition). A group or broker that fails is reported
// on the groups it affects and the rest of the round is kept. Unknown group
// or topic names are an error that names the closest existing ones.
func (c *Client) Lag(ctx context.Context, f LagFilter, at time.Time) (*LagRound, error) {
	ctx, cancel := c.bound(ctx)
	defer cancel()

	listed, err := c.adm.ListGroups(ctx)
	partial := map[string]string{}
	if err != nil {
		var se *kadm.ShardErrors
		if !errors.As(err, &se) || se.AllFailed {
			return nil, c.wrap("list consumer groups", err)
		}
		// A coordinator that did not answer hides its groups: report it
		// on the round and read the groups the others listed.
		for _, e := range se.Errs {
			partial["broker "+fmt.Sprint(e.Broker.NodeID)] = e.Err.Error()
		}
	}
	groups, err := pickGroups(listed, f.Groups, partial)
	if err != nil {
		return nil, err
	}
	var topicSet map[string]bool
	if len(f.Topics) > 0 {
		topicSet, err = c.checkTopics(ctx, f.Topics)
		if err != nil {
			return nil, err
		}
	}
	round := &LagRound{At: at.UTC()}
	for where, msg := range partial {
		round.Errors = append(round.Errors, "list groups on "+where+": "+msg)
	}
	sort.Strings(round.Errors)
	if len(groups) == 0 {
		return round, nil
	}

	described, derr := c.adm.DescribeGroups(ctx, groups...)
	describeErrs := map[string]error{}
	if derr != nil {
		var se *kadm.ShardErrors
		if !errors.As(derr, &se) {
			return nil, c.wrap("describe consumer groups", derr)
		}
		for _, e := range se.Errs {
			if req, ok := e.Req.(*kmsg.DescribeGroupsRequest); ok {
				for _, g := range req.Groups {
					describeErrs[g] = e.Err
				}
			}
		}
		if se.AllFailed {
			for _, g := range groups {
				if _, ok := described[g]; !ok {
					describeErrs[g] = se
				}
			}
		}
	}
	fetched := c.adm.FetchManyOffsets(ctx, groups...)

	assigned, committed := described.AssignedPartitions(), fetched.CommittedPartitions()
	want := kadm.TopicsSet{}
	want.Merge(assigned)
	want.Merge(committed)
	// Start offsets only matter for a partition a member owns but the
	// group never committed: its lag counts from the log start.
	uncommitted := map[string]bool{}
	assigned.Each(func(t string, p int32) {
		if !committed.Lookup(t, p) {
			uncommitted[t] = true
		}
	})
	var topics, startTopics []string
	for _, t := range want.Topics() {
		if topicSet == nil || topicSet[t] {
			topics = append(topics, t)
			if uncommitted[t] {
				startTopics = append(startTopics, t)
			}
		}
	}
	var starts, ends kadm.ListedOffsets
	// A broker that fails to list leaves its partitions missing, which
	// CalculateGroupLag reports per partition; only a total failure ends
	// the round.
	if len(topics) > 0 {
		if ends, err = c.adm.ListEndOffsets(ctx, topics...); err != nil && !isPartial(err) {
			return nil, c.wrap("list end offsets", err)
		}
	}
	if len(startTopics) > 0 {
		if starts, err = c.adm.ListStartOffsets(ctx, startTopics...); err != nil && !isPartial(err) {
			return nil, c.wrap("list start offsets", err)
		}
	}

	for _, g := range groups {
		gl := GroupLag{Group: g}
		var notes []string
		d, ok := described[g]
		switch {
		case describeErrs[g] != nil:
			notes = append(notes, "describe: "+describeErrs[g].Error())
			d = kadm.DescribedGroup{Group: g}
		case !ok:
			d = kadm.DescribedGroup{Group: g}
		case d.Err != nil:
			// The group may use the KIP-848 protocol or be mid-move
			// between coordinators: its commits still give its lag.
			notes = append(notes, "describe: "+d.Err.Error())
			d = kadm.DescribedGroup{Group: g}
		}
		gl.State = d.State
		gl.Members = len(d.Members)
		fr := fetched[g]
		if fr.Err != nil {
			notes = append(notes, "fetch offsets: "+fr.Err.Error())
		}
		lag := kadm.CalculateGroupLagWithStartOffsets(d, fr.Fetched, starts, ends)
		for t, ps := range lag {
			if topicSet != nil && !topicSet[t] {
				continue
			}
			for _, ml := range ps {
				// kadm also lists every other partition of a topic the
				// group touches; one no member owns and the group never
				// committed is not one it consumes (kafka-consumer-groups
				// leaves those out too).
				if ml.Member == nil && ml.Commit.At < 0 && ml.Err == nil {
					continue
				}
				pl := PartitionLag{
					Topic: ml.Topic, Partition: ml.Partition,
					Committed: ml.Commit.At, End: -1, Lag: ml.Lag,
				}
				if ml.End.Err == nil {
					pl.End = ml.End.Offset
				}
				if ml.Member != nil {
					pl.ClientID, pl.Host = ml.Member.ClientID, ml.Member.ClientHost
				}
				if ml.Err != nil {
					pl.Lag = -1
					pl.Error = ml.Err.Error()
				} else {
					gl.TotalLag += pl.Lag
				}
				gl.Partitions = append(gl.Partitions, pl)
			}
		}
		sort.Slice(gl.Partitions, func(i, j int) bool {
			a, b := gl.Partitions[i], gl.Partitions[j]
			if a.Topic != b.Topic {
				return a.Topic < b.Topic
			}
			return a.Partition < b.Partition
		})
		if len(notes) > 0 {
			gl.Error = strings.Join(notes, "; ")
		}
		if topicSet != nil && len(gl.Partitions) == 0 && gl.Error == "" {
			continue // the group does not touch the requested topics
		}
		round.Groups = append(round.Groups, gl)
	}
	return round, nil
}

// pickGroups resolves the requested groups against the listed ones, or picks
// every consumer group when none are requested. Kafka Connect worker groups
// coordinate workers and commit no offsets, so they are left out.
func pickGroups(listed kadm.ListedGroups, want []string, partial map[string]string) ([]string, error) {
	if len(want) == 0 {
		var out []string
		for _, g := range listed.Sorted() {
			if g.ProtocolType == "connect" || g.GroupType == "share" {
				continue
			}
			out = append(out, g.Group)
		}
		return out, nil
	}
	names := listed.Groups()
	var out []string
	seen := map[string]bool{}
	for _, g := range want {
		if seen[g] {
			continue
		}
		seen[g] = true
		if _, ok := listed[g]; !ok {
			if len(partial) > 0 {
				// The group may live on a coordinator that did not
				// answer; ask for it and let the round report.
				out = append(out, g)
				continue
			}
			return nil, fmt.Errorf("kafka: unknown consumer group %q; closest: %s", g, strings.Join(suggest.Closest(g, names, 3), ", "))
		}
		out = append(out, g)
	}
	sort.Strings(out)
	return out, nil
}

// checkTopics confirms every requested topic exists.
func (c *Client) checkTopics(ctx context.Context, want []string) (map[string]bool, error) {
	all, err := c.adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return nil, c.wrap("list topics", err)
	}
	names := all.Names()
	set := map[string]bool{}
	for _, t := range want {
		if _, ok := all[t]; !ok {
			return nil, fmt.Errorf("kafka: unknown topic %q; closest: %s", t, strings.Join(suggest.Closest(t, names, 3), ", "))
		}
		set[t] = true
	}
	return set, nil
}

// isPartial reports whether err is a sharded failure that left some answers.
func isPartial(err error) bool {
	var se *kadm.ShardErrors
	return errors.As(err, &se) && !se.AllFailed
}
