package kafka

import (
	"fmt"
	"sort"
	"time"
)

// Status is the judgement on a consumer over a window of samples. No lag
// threshold is involved: a large lag that is shrinking is fine and a small
// one that never moves is not, so the rules look at how the committed
// offset, the end offset and the lag move together (after the evaluation
// rules of LinkedIn's Burrow).
type Status string

// The statuses, from best to worst.
const (
	// StatusOK: lag touched zero in the window, or the consumer is keeping up.
	StatusOK Status = "ok"
	// StatusUnknown: too few samples to judge; record more rounds.
	StatusUnknown Status = "unknown"
	// StatusLagging: commits advance but the lag grew at every sample.
	StatusLagging Status = "lagging"
	// StatusRewound: the committed offset went backwards and has not yet
	// passed where it was, so records are being processed again.
	StatusRewound Status = "rewound"
	// StatusStalled: commits did not move across the window while lag
	// stayed above zero and new records kept arriving.
	StatusStalled Status = "stalled"
	// StatusStopped: no new commit for longer than the window while lag
	// is above zero.
	StatusStopped Status = "stopped"
)

var severity = map[Status]int{
	StatusOK: 0, StatusUnknown: 1, StatusLagging: 2, StatusRewound: 3, StatusStalled: 4, StatusStopped: 5,
}

// Worse reports whether s is a worse status than o.
func (s Status) Worse(o Status) bool { return severity[s] > severity[o] }

// Sample is one reading of a group on one partition.
type Sample struct {
	At time.Time `json:"at"`
	// Committed is -1 when the group has no commit on the partition.
	Committed int64 `json:"committed"`
	End       int64 `json:"end"`
	Lag       int64 `json:"lag"`
}

// Verdict is the status of one partition with the evidence behind it.
type Verdict struct {
	Status Status `json:"status" jsonschema:"ok, unknown, lagging, rewound, stalled or stopped"`
	Reason string `json:"reason" jsonschema:"the evidence from the samples behind the status"`
	// Samples is how many samples fell inside the window.
	Samples int `json:"samples" jsonschema:"samples inside the window the status was judged over"`
	// CommittedSince is when the current committed offset was first seen.
	CommittedSince time.Time `json:"committed_since,omitzero" jsonschema:"when the current committed offset was first seen"`
}

// Evaluate judges one partition from its samples (any order; the newest is
// "now"). The window is the span of time the rules look back over; older
// samples only tell how long the committed offset has been unchanged. A
// window that is not positive means DefaultWindow.
//
// The rules, first match wins:
//  1. rewound: the newest committed offset is below one committed earlier
//     in the window (the consumer went back and has not caught up).
//     A committed offset that disappears (offsets expired or deleted) is
//     unknown: the group restarts from a position no sample shows.
//  2. ok: lag was zero at some sample in the window.
//  3. stopped: the committed offset has not changed for longer than the
//     window (lag is above zero at every sample, by rule 2).
//  4. unknown: fewer than two samples in the window.
//  5. stalled: the committed offset is the same at every sample in the
//     window while the end offset moved.
//  6. lagging: commits advanced over the window and the lag grew at every
//     sample.
//  7. ok otherwise: the consumer is moving and not falling behind at every
//     step.
func Evaluate(history []Sample, window time.Duration) Verdict {
	if len(history) == 0 {
		return Verdict{Status: StatusUnknown, Reason: "no samples recorded yet"}
	}
	if window <= 0 {
		window = DefaultWindow
	}
	h := append([]Sample(nil), history...)
	sort.SliceStable(h, func(i, j int) bool { return h[i].At.Before(h[j].At) })
	last := h[len(h)-1]
	from := last.At.Add(-window)
	first := sort.Search(len(h), func(i int) bool { return !h[i].At.Before(from) })
	win := h[first:]

	since := last.At
	for i := len(h) - 1; i >= 0 && h[i].Committed == last.Committed; i-- {
		since = h[i].At
	}
	v := Verdict{Samples: len(win), CommittedSince: since}
	if last.Committed < 0 {
		v.CommittedSince = time.Time{}
	}

	// 1. rewound
	if last.Committed >= 0 {
		peak, peakIdx := int64(-1), 0
		for i, s := range win {
			if s.Committed > peak {
				peak, peakIdx = s.Committed, i
			}
		}
		if last.Committed < peak {
			drop := last
			for _, s := range win[peakIdx+1:] {
				if s.Committed >= 0 && s.Committed < peak {
					drop = s
					break
				}
			}
			v.Status = StatusRewound
			v.Reason = fmt.Sprintf("committed offset went back from %d (at %s) to %d (at %s); now %d, still %d short of where it was",
				peak, stamp(win[peakIdx].At), drop.Committed, stamp(drop.At), last.Committed, peak-last.Committed)
			return v
		}
	}
	// Commits that vanish were expired or deleted: the group will restart
	// from its auto.offset.reset position, which no sample can predict.
	if last.Committed < 0 && last.Lag > 0 {
		for _, s := range win {
			if s.Committed >= 0 {
				v.Status = StatusUnknown
				v.Reason = fmt.Sprintf("committed offset %d (at %s) is gone: the group's offsets expired or were deleted, so it will restart from its auto.offset.reset position", s.Committed, stamp(s.At))
				return v
			}
		}
	}
	// 2. ok: caught up at least once
	for i := len(win) - 1; i >= 0; i-- {
		if win[i].Lag == 0 {
			v.Status = StatusOK
			if i == len(win)-1 {
				v.Reason = "lag is zero"
			} else {
				v.Reason = fmt.Sprintf("lag was zero at %s, within the window; now %d", stamp(win[i].At), last.Lag)
			}
			return v
		}
	}
	// 3. stopped
	if unchanged := last.At.Sub(since); unchanged > window {
		if last.Committed < 0 {
			v.Status = StatusStopped
			v.Reason = fmt.Sprintf("nothing committed in %s of samples (longer than the %s window) while lag is %d", unchanged, window, last.Lag)
			return v
		}
		v.Status = StatusStopped
		v.Reason = fmt.Sprintf("no new commit since %s: offset %d unchanged for %s, longer than the %s window, while lag is %d",
			stamp(since), last.Committed, unchanged, window, last.Lag)
		return v
	}
	// 4. unknown
	if len(win) < 2 {
		v.Status = StatusUnknown
		v.Reason = fmt.Sprintf("1 sample in the %s window (lag %d); a status needs at least 2", window, last.Lag)
		return v
	}
	head := win[0]
	// 5. stalled
	flat := true
	for _, s := range win {
		if s.Committed != last.Committed {
			flat = false
			break
		}
	}
	if flat && last.End > head.End {
		v.Status = StatusStalled
		if last.Committed < 0 {
			v.Reason = fmt.Sprintf("nothing committed across %d samples over %s while the end offset went %d→%d (lag %d→%d)",
				len(win), last.At.Sub(head.At), head.End, last.End, head.Lag, last.Lag)
			return v
		}
		v.Reason = fmt.Sprintf("committed offset %d did not move across %d samples over %s while the end offset went %d→%d (lag %d→%d)",
			last.Committed, len(win), last.At.Sub(head.At), head.End, last.End, head.Lag, last.Lag)
		return v
	}
	// 6. lagging
	if last.Committed > head.Committed {
		growing := true
		for i := 1; i < len(win); i++ {
			if win[i].Lag <= win[i-1].Lag {
				growing = false
				break
			}
		}
		if growing {
			v.Status = StatusLagging
			v.Reason = fmt.Sprintf("lag grew at every one of %d samples, %d→%d over %s, while commits advanced %d→%d",
				len(win), head.Lag, last.Lag, last.At.Sub(head.At), head.Committed, last.Committed)
			return v
		}
	}
	// 7. ok
	v.Status = StatusOK
	switch {
	case flat:
		v.Reason = fmt.Sprintf("lag %d with no new commits and no new records in the window; stopped if no commit arrives by %s",
			last.Lag, stamp(since.Add(window)))
	default:
		v.Reason = fmt.Sprintf("commits advancing (%d→%d) and lag not growing at every sample (%d→%d)",
			head.Committed, last.Committed, head.Lag, last.Lag)
	}
	return v
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// PartitionKey names one group's position on one partition.
type PartitionKey struct {
	Group     string
	Topic     string
	Partition int32
}

// GroupVerdict is a group's status: the worst of its partitions'.
type GroupVerdict struct {
	Status Status `json:"status"`
	// Worst names the partitions that carry the group's status.
	Worst []string `json:"worst,omitempty" jsonschema:"topic/partition entries that carry the group's status"`
}

// JudgeGroup folds partition verdicts into the group's status. A group with
// no partitions is unknown.
func JudgeGroup(parts map[PartitionKey]Verdict) GroupVerdict {
	if len(parts) == 0 {
		return GroupVerdict{Status: StatusUnknown}
	}
	g := GroupVerdict{Status: StatusOK}
	keys := make([]PartitionKey, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Topic != keys[j].Topic {
			return keys[i].Topic < keys[j].Topic
		}
		return keys[i].Partition < keys[j].Partition
	})
	for _, k := range keys {
		v := parts[k]
		switch {
		case v.Status.Worse(g.Status):
			g.Status = v.Status
			g.Worst = []string{fmt.Sprintf("%s/%d", k.Topic, k.Partition)}
		case v.Status == g.Status && g.Status != StatusOK:
			g.Worst = append(g.Worst, fmt.Sprintf("%s/%d", k.Topic, k.Partition))
		}
	}
	return g
}
