package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
)

// DefaultWindow is the span a status is judged over: ten one-minute rounds,
// Burrow's default.
const DefaultWindow = 10 * time.Minute

// LagSource reads one lag round; *Client is the real one.
type LagSource interface {
	Lag(ctx context.Context, f LagFilter, at time.Time) (*LagRound, error)
}

// Monitor reads lag, keeps the samples in the store and judges each group
// over its window. Because the samples live in the store, any process (and
// every call of the tool) adds to the same history.
type Monitor struct {
	Source  LagSource
	DB      *store.DB
	Clock   clock.Clock
	Cluster string        // names the cluster in the store, e.g. "prod"
	Window  time.Duration // DefaultWindow when zero
	// Retention downsamples and expires the stored samples; its zero
	// value is DefaultStep and DefaultSpan. A span shorter than the
	// window is raised to twice the window.
	Retention Retention
	// Held, when set, keeps the window in memory between calls (see
	// HeldFor); otherwise every call reads its window from the store.
	Held *Held
}

// PartitionReport is a partition's current lag and its judged status.
type PartitionReport struct {
	PartitionLag
	Verdict
}

// GroupReport is a group's lag and status.
type GroupReport struct {
	Group    string `json:"group"`
	Status   Status `json:"status" jsonschema:"worst partition status: ok, unknown, lagging, rewound, stalled or stopped"`
	State    string `json:"state,omitempty" jsonschema:"group state as the coordinator reports it"`
	Members  int    `json:"members" jsonschema:"number of live members"`
	TotalLag int64  `json:"total_lag"`
	// Worst names the partitions that carry the group's status.
	Worst      []string          `json:"worst,omitempty" jsonschema:"topic/partition entries that carry the group's status"`
	Partitions []PartitionReport `json:"partitions"`
	Error      string            `json:"error,omitempty" jsonschema:"what could not be read for this group"`
}

// LagReport answers get_consumer_lag.
type LagReport struct {
	Cluster string        `json:"cluster"`
	At      time.Time     `json:"at"`
	Window  string        `json:"window" jsonschema:"span of samples each status was judged over"`
	Groups  []GroupReport `json:"groups"`
	Errors  []string      `json:"errors,omitempty" jsonschema:"parts of the cluster that did not answer"`
}

// ConsumerLag reads one round now, records it, and judges every reported
// partition over the stored window.
func (m *Monitor) ConsumerLag(ctx context.Context, f LagFilter) (*LagReport, error) {
	if m.Source == nil || m.DB == nil || m.Clock == nil {
		return nil, errors.New("kafka: monitor needs a lag source, a store and a clock")
	}
	window := m.Window
	if window <= 0 {
		window = DefaultWindow
	}
	round, err := m.Source.Lag(ctx, f, m.Clock.Now())
	if err != nil {
		return nil, err
	}
	ret := m.Retention.orDefault()
	if ret.Span < window {
		ret.Span = 2 * window
	}
	names := make([]string, 0, len(round.Groups))
	for _, g := range round.Groups {
		names = append(names, g.Group)
	}
	// Only the window is read back: that is all a status is judged on,
	// and it holds at most window/step samples per partition however
	// long the history is.
	from := round.At.Add(-window)
	var history map[PartitionKey][]Sample
	if m.Held != nil {
		// The held window says which partitions already have a sample in
		// this round's bucket; only the others are offered to the store,
		// so calls in quick succession write nothing.
		if history, err = m.Held.Window(ctx, names, from, round.At); err != nil {
			return nil, err
		}
		err = RecordRound(ctx, m.DB, m.Cluster, unsampled(round, history, ret.Step), ret)
	} else if err = RecordRound(ctx, m.DB, m.Cluster, round, ret); err == nil {
		history, err = LoadWindow(ctx, m.DB, m.Cluster, names, from, round.At)
	}
	if err != nil {
		return nil, err
	}
	// This round is the newest sample even where its bucket already had
	// one stored and it was not kept.
	for _, g := range round.Groups {
		for _, p := range g.Partitions {
			if p.Error != "" || p.Lag < 0 {
				continue
			}
			k := PartitionKey{Group: g.Group, Topic: p.Topic, Partition: p.Partition}
			history[k] = insertSample(history[k], Sample{At: round.At, Committed: p.Committed, End: p.End, Lag: p.Lag})
		}
	}
	// Except where the committed offset did not move across the whole
	// window and lag never reached zero in it: how long it has not moved
	// (stopped, and committed_since) needs the samples before the window.
	flat := map[PartitionKey]bool{}
	for k, h := range history {
		if unmovedWithLag(h) {
			flat[k] = true
		}
	}
	if len(flat) > 0 {
		before, err := LoadBefore(ctx, m.DB, m.Cluster, flat, from)
		if err != nil {
			return nil, err
		}
		for k, h := range before {
			history[k] = append(h, history[k]...)
		}
	}
	return Judge(m.Cluster, round, history, window), nil
}

// unsampled is the part of round whose partitions have no sample in h in
// the round's bucket.
func unsampled(round *LagRound, h map[PartitionKey][]Sample, step time.Duration) *LagRound {
	lo, hi := bucketOf(store.Millis(round.At), step)
	out := &LagRound{At: round.At}
	for _, g := range round.Groups {
		ng := GroupLag{Group: g.Group}
		for _, p := range g.Partitions {
			k := PartitionKey{Group: g.Group, Topic: p.Topic, Partition: p.Partition}
			has := false
			for _, s := range h[k] {
				if ms := store.Millis(s.At); ms >= lo && ms < hi {
					has = true
					break
				}
			}
			if !has {
				ng.Partitions = append(ng.Partitions, p)
			}
		}
		if len(ng.Partitions) > 0 {
			out.Groups = append(out.Groups, ng)
		}
	}
	return out
}

// unmovedWithLag reports whether every sample has the last committed offset
// and none has zero lag.
func unmovedWithLag(h []Sample) bool {
	if len(h) == 0 {
		return false
	}
	last := h[len(h)-1].Committed
	for _, s := range h {
		if s.Committed != last || s.Lag == 0 {
			return false
		}
	}
	return true
}

// Judge combines a round with the stored history into a report. It is pure,
// so the rules can be tested without a cluster or a store.
func Judge(cluster string, round *LagRound, history map[PartitionKey][]Sample, window time.Duration) *LagReport {
	rep := &LagReport{Cluster: cluster, At: round.At, Window: window.String(), Errors: round.Errors}
	for _, g := range round.Groups {
		gr := GroupReport{Group: g.Group, State: g.State, Members: g.Members, TotalLag: g.TotalLag, Error: g.Error}
		verdicts := map[PartitionKey]Verdict{}
		for _, p := range g.Partitions {
			k := PartitionKey{Group: g.Group, Topic: p.Topic, Partition: p.Partition}
			var v Verdict
			if p.Error != "" {
				v = Verdict{Status: StatusUnknown, Reason: "could not read this partition now: " + p.Error}
			} else {
				v = Evaluate(upTo(history[k], round.At), window)
			}
			verdicts[k] = v
			gr.Partitions = append(gr.Partitions, PartitionReport{PartitionLag: p, Verdict: v})
		}
		gv := JudgeGroup(verdicts)
		gr.Status, gr.Worst = gv.Status, gv.Worst
		rep.Groups = append(rep.Groups, gr)
	}
	return rep
}

// upTo drops samples newer than at, which another process may have written
// with a clock running ahead.
func upTo(h []Sample, at time.Time) []Sample {
	out := h[:0:0]
	for _, s := range h {
		if !s.At.After(at) {
			out = append(out, s)
		}
	}
	return out
}

// Summary is a few lines a person can read in the client.
func (r *LagReport) Summary() string {
	if len(r.Groups) == 0 {
		return fmt.Sprintf("cluster %s: no consumer groups matched", r.Cluster)
	}
	counts := map[Status]int{}
	var b strings.Builder
	for _, g := range r.Groups {
		counts[g.Status]++
	}
	fmt.Fprintf(&b, "cluster %s, %d groups judged over %s:", r.Cluster, len(r.Groups), r.Window)
	for _, s := range []Status{StatusStopped, StatusStalled, StatusRewound, StatusLagging, StatusUnknown, StatusOK} {
		if counts[s] > 0 {
			fmt.Fprintf(&b, " %d %s", counts[s], s)
		}
	}
	for _, g := range r.Groups {
		if g.Status == StatusOK {
			continue
		}
		fmt.Fprintf(&b, "\n- %s: %s, lag %d", g.Group, g.Status, g.TotalLag)
		if len(g.Worst) > 0 {
			fmt.Fprintf(&b, " on %s", strings.Join(g.Worst, ", "))
			for _, p := range g.Partitions {
				if fmt.Sprintf("%s/%d", p.Topic, p.Partition) == g.Worst[0] {
					fmt.Fprintf(&b, " (%s)", p.Reason)
					break
				}
			}
		}
		if g.Error != "" {
			fmt.Fprintf(&b, "; %s", g.Error)
		}
	}
	return b.String()
}
