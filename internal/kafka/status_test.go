package kafka

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 3, 14, 0, 0, 0, time.UTC)

// series builds one sample a minute from (committed, end) pairs.
func series(pairs ...[2]int64) []Sample {
	out := make([]Sample, len(pairs))
	for i, p := range pairs {
		lag := p[1] - p[0]
		if p[0] < 0 {
			lag = p[1]
		}
		out[i] = Sample{At: t0.Add(time.Duration(i) * time.Minute), Committed: p[0], End: p[1], Lag: max(lag, 0)}
	}
	return out
}

func TestEvaluate(t *testing.T) {
	const w = 5 * time.Minute
	cases := []struct {
		name   string
		h      []Sample
		want   Status
		reason string // a fragment the reason must carry
	}{
		{"no samples", nil, StatusUnknown, "no samples"},
		{"one sample with lag", series([2]int64{10, 20}), StatusUnknown, "1 sample"},
		{"one sample at zero lag", series([2]int64{20, 20}), StatusOK, "lag is zero"},
		{"keeping up", series([2]int64{10, 20}, [2]int64{25, 30}, [2]int64{38, 40}, [2]int64{45, 50}), StatusOK, "commits advancing"},
		{"zero lag once in the window beats growth", series(
			[2]int64{10, 10}, [2]int64{11, 20}, [2]int64{12, 30}, [2]int64{13, 40}), StatusOK, "lag was zero"},
		{"lagging: lag grows at every sample while commits advance", series(
			[2]int64{10, 20}, [2]int64{15, 30}, [2]int64{20, 45}, [2]int64{25, 70}), StatusLagging, "grew at every one of 4 samples, 10→45"},
		{"big but shrinking lag is ok", series(
			[2]int64{0, 10000}, [2]int64{3000, 10500}, [2]int64{6000, 11000}, [2]int64{9000, 11500}), StatusOK, "not growing"},
		{"lag grows but not at every sample", series(
			[2]int64{10, 20}, [2]int64{15, 30}, [2]int64{28, 35}, [2]int64{30, 50}), StatusOK, ""},
		{"stalled: commits flat while end moves", series(
			[2]int64{50, 60}, [2]int64{50, 70}, [2]int64{50, 80}, [2]int64{50, 95}), StatusStalled, "did not move across 4 samples"},
		{"assigned but never committing while records arrive", series(
			[2]int64{-1, 10}, [2]int64{-1, 20}), StatusStalled, "nothing committed across 2 samples"},
		{"flat commits, flat end, inside the window: not yet judged bad", series(
			[2]int64{50, 60}, [2]int64{50, 60}, [2]int64{50, 60}), StatusOK, "stopped if no commit arrives by 2026-03-03T14:05:00Z"},
		{"stopped: unchanged for longer than the window", series(
			[2]int64{50, 60}, [2]int64{50, 60}, [2]int64{50, 60}, [2]int64{50, 60}, [2]int64{50, 60}, [2]int64{50, 60}, [2]int64{50, 61}),
			StatusStopped, "unchanged for 6m0s, longer than the 5m0s window"},
		{"stalled becomes stopped once it outlasts the window", series(
			[2]int64{40, 50}, [2]int64{50, 60}, [2]int64{50, 70}, [2]int64{50, 80}, [2]int64{50, 90}, [2]int64{50, 100}, [2]int64{50, 110}, [2]int64{50, 120}),
			StatusStopped, "no new commit since 2026-03-03T14:01:00Z"},
		{"never committed for longer than the window", series(
			[2]int64{-1, 5}, [2]int64{-1, 6}, [2]int64{-1, 7}, [2]int64{-1, 8}, [2]int64{-1, 9}, [2]int64{-1, 10}, [2]int64{-1, 11}),
			StatusStopped, "nothing committed"},
		{"rewound: offset went back", series(
			[2]int64{100, 120}, [2]int64{110, 130}, [2]int64{20, 140}, [2]int64{60, 150}), StatusRewound, "went back from 110"},
		{"rewound beats zero lag earlier in the window", series(
			[2]int64{100, 100}, [2]int64{110, 110}, [2]int64{0, 120}), StatusRewound, "still 110 short"},
		{"rewind already recovered falls through to the usual rules", series(
			[2]int64{100, 120}, [2]int64{10, 130}, [2]int64{125, 140}, [2]int64{140, 150}), StatusOK, ""},
		{"rewind before the window is forgotten", series(
			[2]int64{500, 510}, [2]int64{10, 520}, [2]int64{100, 530}, [2]int64{200, 540}, [2]int64{300, 550}, [2]int64{400, 560}, [2]int64{450, 570}, [2]int64{500, 580}),
			StatusOK, ""},
		{"offsets deleted is not a rewind", series(
			[2]int64{100, 120}, [2]int64{-1, 130}), StatusUnknown, "expired or were deleted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Evaluate(c.h, w)
			if v.Status != c.want {
				t.Fatalf("status %s, want %s (reason: %s)", v.Status, c.want, v.Reason)
			}
			if !strings.Contains(v.Reason, c.reason) {
				t.Fatalf("reason %q lacks %q", v.Reason, c.reason)
			}
		})
	}
}

func TestEvaluateOrderAndWindow(t *testing.T) {
	h := series([2]int64{50, 60}, [2]int64{50, 70}, [2]int64{50, 80})
	// Samples arrive in any order; the rules sort them.
	rev := []Sample{h[2], h[0], h[1]}
	if v := Evaluate(rev, 5*time.Minute); v.Status != StatusStalled {
		t.Fatalf("unsorted input: %s (%s)", v.Status, v.Reason)
	}
	// With a window of one minute only the last two samples count.
	if v := Evaluate(h, time.Minute); v.Samples != 2 {
		t.Fatalf("samples in a 1m window: %d, want 2", v.Samples)
	}
	// Old zero lag outside the window does not excuse a stall now.
	old := append(series([2]int64{40, 40}), series([2]int64{50, 60}, [2]int64{50, 70}, [2]int64{50, 80})...)
	for i := range old[1:] {
		old[i+1].At = t0.Add(time.Hour + time.Duration(i)*time.Minute)
	}
	if v := Evaluate(old, 5*time.Minute); v.Status != StatusStalled {
		t.Fatalf("zero lag an hour ago: %s (%s)", v.Status, v.Reason)
	}
	if v := Evaluate(h, 5*time.Minute); !v.CommittedSince.Equal(t0) {
		t.Fatalf("committed since %s, want %s", v.CommittedSince, t0)
	}
}

func TestJudgeGroup(t *testing.T) {
	if g := JudgeGroup(nil); g.Status != StatusUnknown {
		t.Fatalf("empty group: %s", g.Status)
	}
	g := JudgeGroup(map[PartitionKey]Verdict{
		{Group: "g", Topic: "a", Partition: 0}: {Status: StatusOK},
		{Group: "g", Topic: "a", Partition: 2}: {Status: StatusStalled},
		{Group: "g", Topic: "b", Partition: 1}: {Status: StatusLagging},
		{Group: "g", Topic: "a", Partition: 1}: {Status: StatusStalled},
	})
	if g.Status != StatusStalled || strings.Join(g.Worst, ",") != "a/1,a/2" {
		t.Fatalf("group %+v", g)
	}
	if !StatusStopped.Worse(StatusStalled) || !StatusRewound.Worse(StatusLagging) || StatusOK.Worse(StatusUnknown) {
		t.Fatal("severity order broken")
	}
}

func TestJudgeMarksUnreadablePartitions(t *testing.T) {
	round := &LagRound{At: t0, Groups: []GroupLag{{Group: "g", Partitions: []PartitionLag{
		{Topic: "a", Partition: 0, Committed: 5, End: 5, Lag: 0},
		{Topic: "a", Partition: 1, Committed: -1, End: -1, Lag: -1, Error: "NOT_LEADER_FOR_PARTITION"},
	}}}}
	rep := Judge("prod", round, map[PartitionKey][]Sample{
		{Group: "g", Topic: "a", Partition: 0}: {{At: t0, Committed: 5, End: 5}, {At: t0.Add(time.Hour), Committed: 9, End: 9}},
	}, time.Minute)
	g := rep.Groups[0]
	if g.Partitions[0].Status != StatusOK || g.Partitions[1].Status != StatusUnknown ||
		!strings.Contains(g.Partitions[1].Reason, "NOT_LEADER") {
		t.Fatalf("%+v", g.Partitions)
	}
	if g.Status != StatusUnknown {
		t.Fatalf("group status %s", g.Status)
	}
	if s := rep.Summary(); !strings.Contains(s, "g: unknown") {
		t.Fatalf("summary %q", s)
	}
}
