package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func findGroup(t *testing.T, r *LagReport, g string) GroupReport {
	t.Helper()
	for _, gr := range r.Groups {
		if gr.Group == g {
			return gr
		}
	}
	t.Fatalf("group %s missing from report", g)
	return GroupReport{}
}

func lags(g GroupReport) string {
	var parts []string
	for _, p := range g.Partitions {
		parts = append(parts, fmt.Sprintf("%s/%d=%d", p.Topic, p.Partition, p.Lag))
	}
	return strings.Join(parts, " ")
}

// TestConsumerLagOverRounds drives four groups through eight one-minute
// rounds on a real cluster while producers keep writing, and checks the
// lag numbers and the status each round.
func TestConsumerLagOverRounds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		tc := newTestCluster(t, 1)
		tc.createTopic(t, "orders", 2, 1, nil)
		tc.createTopic(t, "payments", 1, 1, nil)
		clk := clock.NewFake(t0)
		m := &Monitor{Source: tc.client, DB: db, Clock: clk, Cluster: "prod", Window: 5 * time.Minute}

		type want struct {
			billing, stalled, replayer, slowpoke Status
		}
		wants := []want{
			{StatusOK, StatusUnknown, StatusOK, StatusUnknown},      // round 0: one sample each
			{StatusOK, StatusStalled, StatusOK, StatusLagging},      // 1
			{StatusOK, StatusStalled, StatusOK, StatusLagging},      // 2
			{StatusOK, StatusStalled, StatusOK, StatusLagging},      // 3
			{StatusOK, StatusStalled, StatusRewound, StatusLagging}, // 4: replayer commits 5
			{StatusOK, StatusStalled, StatusRewound, StatusLagging}, // 5: replayer at 30 < 40
			{StatusOK, StatusStopped, StatusOK, StatusLagging},      // 6: stall outlasts 5m; replayer caught up
			{StatusOK, StatusStopped, StatusOK, StatusLagging},      // 7
		}
		for i, w := range wants {
			end := int64(10 * (i + 1))
			tc.produce(t, "orders", 10, 0, 1)
			tc.produce(t, "payments", 10, 0)
			tc.commit(t, "billing", "orders", map[int32]int64{0: end, 1: end})
			if i == 0 {
				tc.commit(t, "stalled-sink", "orders", map[int32]int64{0: 5, 1: 5})
			}
			replayed := end
			switch i {
			case 4:
				replayed = 5
			case 5:
				replayed = 30
			}
			tc.commit(t, "replayer", "payments", map[int32]int64{0: replayed})
			tc.commit(t, "slowpoke", "orders", map[int32]int64{0: 9 * int64(i+1)})

			rep, err := m.ConsumerLag(ctx, LagFilter{})
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			if len(rep.Groups) != 4 {
				t.Fatalf("round %d: %d groups", i, len(rep.Groups))
			}
			billing, stalled := findGroup(t, rep, "billing"), findGroup(t, rep, "stalled-sink")
			replayer, slowpoke := findGroup(t, rep, "replayer"), findGroup(t, rep, "slowpoke")
			for _, c := range []struct {
				g    GroupReport
				want Status
				lags string
			}{
				{billing, w.billing, "orders/0=0 orders/1=0"},
				{stalled, w.stalled, fmt.Sprintf("orders/0=%d orders/1=%d", end-5, end-5)},
				{replayer, w.replayer, fmt.Sprintf("payments/0=%d", end-replayed)},
				{slowpoke, w.slowpoke, fmt.Sprintf("orders/0=%d", i+1)},
			} {
				if c.g.Status != c.want {
					t.Errorf("round %d group %s: status %s, want %s (%s)", i, c.g.Group, c.g.Status, c.want, c.g.Partitions[0].Reason)
				}
				if got := lags(c.g); got != c.lags {
					t.Errorf("round %d group %s: lags %s, want %s", i, c.g.Group, got, c.lags)
				}
				if c.g.State != "Empty" || c.g.Members != 0 {
					t.Errorf("round %d group %s: state %s members %d", i, c.g.Group, c.g.State, c.g.Members)
				}
			}
			if i == 3 && (stalled.TotalLag != 2*(end-5) || strings.Join(stalled.Worst, ",") != "orders/0,orders/1") {
				t.Errorf("stalled group: total %d worst %v", stalled.TotalLag, stalled.Worst)
			}
			if i == 6 && !strings.Contains(rep.Summary(), "stalled-sink: stopped") {
				t.Errorf("summary: %s", rep.Summary())
			}
			clk.Advance(time.Minute)
		}

		// The samples outlive the monitor: a fresh one on the same store
		// judges the same history.
		hist, err := LoadSamples(ctx, db, "prod", []string{"stalled-sink"})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(hist[PartitionKey{Group: "stalled-sink", Topic: "orders", Partition: 1}]); n != len(wants) {
			t.Fatalf("stored samples: %d, want %d", n, len(wants))
		}
	})
}

func TestLagFilters(t *testing.T) {
	ctx := context.Background()
	tc := newTestCluster(t, 3)
	tc.createTopic(t, "orders", 3, 3, nil)
	tc.createTopic(t, "payments", 1, 3, nil)
	tc.produce(t, "orders", 7, 0, 1, 2)
	tc.produce(t, "payments", 4, 0)
	tc.commit(t, "billing", "orders", map[int32]int64{0: 7, 1: 3})
	tc.commit(t, "billing", "payments", map[int32]int64{0: 1})
	tc.commit(t, "fraud", "payments", map[int32]int64{0: 4})
	// A commit past the end (a truncated or recreated topic) is no lag.
	tc.commit(t, "ahead", "payments", map[int32]int64{0: 50})

	r, err := tc.client.Lag(ctx, LagFilter{Topics: []string{"payments"}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Groups) != 3 || r.Groups[0].Group != "ahead" || r.Groups[0].TotalLag != 0 || r.Groups[0].Partitions[0].Committed != 50 ||
		r.Groups[1].Group != "billing" || lags(GroupReport{Partitions: partitionsOf(r.Groups[1])}) != "payments/0=3" ||
		r.Groups[2].Group != "fraud" || r.Groups[2].TotalLag != 0 {
		t.Fatalf("topic filter: %+v", r.Groups)
	}
	r, err = tc.client.Lag(ctx, LagFilter{Groups: []string{"billing"}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	// Partition 2 was never committed by billing, so it is not its lag.
	if len(r.Groups) != 1 || lags(GroupReport{Partitions: partitionsOf(r.Groups[0])}) != "orders/0=0 orders/1=4 payments/0=3" || r.Groups[0].TotalLag != 7 {
		t.Fatalf("group filter: %+v", r.Groups)
	}
	if r.Groups[0].Partitions[1].Committed != 3 || r.Groups[0].Partitions[1].End != 7 {
		t.Fatalf("offsets: %+v", r.Groups[0].Partitions[1])
	}

	_, err = tc.client.Lag(ctx, LagFilter{Groups: []string{"biling"}}, t0)
	if err == nil || !strings.Contains(err.Error(), `unknown consumer group "biling"; closest: billing`) {
		t.Fatalf("unknown group: %v", err)
	}
	_, err = tc.client.Lag(ctx, LagFilter{Topics: []string{"order"}}, t0)
	if err == nil || !strings.Contains(err.Error(), `unknown topic "order"; closest: orders`) {
		t.Fatalf("unknown topic: %v", err)
	}
}

func partitionsOf(g GroupLag) []PartitionReport {
	var out []PartitionReport
	for _, p := range g.Partitions {
		out = append(out, PartitionReport{PartitionLag: p})
	}
	return out
}

// TestLagLiveConsumer checks the member details of a group that is
// actually consuming, and that a partition it owns but never committed is
// measured from the log start.
func TestLagLiveConsumer(t *testing.T) {
	ctx := context.Background()
	tc := newTestCluster(t, 1)
	tc.createTopic(t, "events", 2, 1, nil)
	tc.produce(t, "events", 5, 0, 1)

	cons, err := kgo.NewClient(kgo.SeedBrokers(tc.kf.ListenAddrs()...), kgo.ConsumerGroup("usage-hourly-rollup"),
		kgo.ConsumeTopics("events"), kgo.ClientID("rollup-worker"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := 0
	deadline := time.Now().Add(20 * time.Second)
	for got < 10 && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(pctx)
		cancel()
		got += fs.NumRecords()
	}
	if got != 10 {
		t.Fatalf("consumed %d of 10 records", got)
	}
	// Commit partition 0 only, up to offset 3.
	if err := cons.CommitRecords(ctx, &kgo.Record{Topic: "events", Partition: 0, Offset: 2, LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	r, err := tc.client.Lag(ctx, LagFilter{Groups: []string{"usage-hourly-rollup"}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	g := r.Groups[0]
	if g.State != "Stable" || g.Members != 1 {
		t.Fatalf("group: %+v", g)
	}
	if len(g.Partitions) != 2 {
		t.Fatalf("partitions: %+v", g.Partitions)
	}
	p0, p1 := g.Partitions[0], g.Partitions[1]
	if p0.Committed != 3 || p0.Lag != 2 || p0.ClientID != "rollup-worker" || p0.Host == "" {
		t.Fatalf("partition 0: %+v", p0)
	}
	if p1.Committed != -1 || p1.Lag != 5 || p1.ClientID != "rollup-worker" {
		t.Fatalf("partition 1: %+v", p1)
	}
}

func TestUnreachableBroker(t *testing.T) {
	// A listener that accepts nothing: take a free port and close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	_, err = NewClient(context.Background(), Config{Brokers: []string{addr}, DialTimeout: 700 * time.Millisecond})
	took := time.Since(start)
	if err == nil {
		t.Fatal("no error for a closed port")
	}
	if !strings.Contains(err.Error(), "no broker answered at "+addr+" within 700ms") {
		t.Fatalf("error %q does not name the broker and the timeout", err)
	}
	if took > 3*time.Second {
		t.Fatalf("took %s to give up", took)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{}, "no brokers configured"},
		{Config{Brokers: []string{" "}}, "broker 1 is empty"},
		{Config{Brokers: []string{"b:9092"}, SASL: &SASL{Mechanism: "GSSAPI", Username: "u", Password: "p"}}, "use one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"},
		{Config{Brokers: []string{"b:9092"}, SASL: &SASL{Mechanism: "scram-sha-512", Username: "u"}}, "needs both a username and a password"},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
		if _, err := NewClient(context.Background(), c.cfg); err == nil {
			t.Errorf("NewClient accepted %+v", c.cfg)
		}
	}
	var cfg Config
	cfg.SetDefaults()
	if cfg.DialTimeout != DefaultDialTimeout || cfg.RequestTimeout != DefaultRequestTimeout {
		t.Fatalf("defaults %+v", cfg)
	}
}

func TestSASL(t *testing.T) {
	for _, mech := range []string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(mech, "dw", "s3cret"))
			if err != nil {
				t.Fatal(err)
			}
			defer kf.Close()
			ctx := context.Background()
			c, err := NewClient(ctx, Config{Brokers: kf.ListenAddrs(), SASL: &SASL{Mechanism: mech, Username: "dw", Password: "s3cret"}})
			if err != nil {
				t.Fatalf("right password: %v", err)
			}
			if _, err := c.TopicHealth(ctx, HealthParams{}); err != nil {
				t.Fatalf("read after auth: %v", err)
			}
			c.Close()
			_, err = NewClient(ctx, Config{Brokers: kf.ListenAddrs(), DialTimeout: 2 * time.Second,
				SASL: &SASL{Mechanism: mech, Username: "dw", Password: "wrong"}})
			if err == nil || !strings.Contains(err.Error(), `for user "dw"`) {
				t.Fatalf("wrong password: %v", err)
			}
		})
	}
}

func TestReadTimeoutNamesBrokers(t *testing.T) {
	tc := newTestCluster(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tc.client.Lag(ctx, LagFilter{}, t0)
	if err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), tc.kf.ListenAddrs()[0]) {
		t.Fatalf("cancelled read: %v", err)
	}
}
