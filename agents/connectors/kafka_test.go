package connectors

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dataworkers/dw/internal/kafka"
	"github.com/dataworkers/dw/internal/lineage"
)

// cluster is an in-process Kafka with an admin and a producer to arrange
// state as producers and consumers would.
type cluster struct {
	addrs []string
	adm   *kadm.Client
	prod  *kgo.Client
}

func newCluster(t *testing.T, brokers int) *cluster {
	t.Helper()
	kf, err := kfake.NewCluster(kfake.NumBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	prod, err := kgo.NewClient(kgo.SeedBrokers(kf.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	return &cluster{addrs: kf.ListenAddrs(), adm: kadm.NewClient(prod), prod: prod}
}

func (c *cluster) yaml() string {
	return fmt.Sprintf("kafka:\n  name: prod\n  brokers: [%s]\n  timeout: 2s\n", strings.Join(c.addrs, ", "))
}

func (c *cluster) createTopic(t *testing.T, name string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := c.adm.CreateTopic(context.Background(), partitions, rf, cfg, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

func (c *cluster) produce(t *testing.T, topic string, n int, partitions ...int32) {
	t.Helper()
	var recs []*kgo.Record
	for _, p := range partitions {
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.Itoa(i))})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

func (c *cluster) commit(t *testing.T, group, topic string, offsets map[int32]int64) {
	t.Helper()
	os := kadm.Offsets{}
	for p, at := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
	}
	if err := c.adm.CommitAllOffsets(context.Background(), group, os); err != nil {
		t.Fatalf("commit %s: %v", group, err)
	}
}

func group(t *testing.T, out *ConsumerLagOut, name string) GroupLag {
	t.Helper()
	for _, g := range out.Groups {
		if g.Group == name {
			return g
		}
	}
	t.Fatalf("group %s not in the report", name)
	return GroupLag{}
}

// TestConsumerLagOverCalls drives three groups through twelve one-minute
// calls while a producer keeps writing: a sink that stops committing
// (stalled, then stopped once the stall outlasts the ten-minute window), a
// consumer that rewinds and catches up, and one that keeps up. Each call
// stores a round, so the statuses come from the stored window.
func TestConsumerLagOverCalls(t *testing.T) {
	engines(t, func(t *testing.T, sy string) {
		ctx := context.Background()
		kc := newCluster(t, 1)
		kc.createTopic(t, "api-usage", 2, 1, nil)
		e := newEnv(t, sy+kc.yaml())
		e.note(lineage.Note{Assets: []lineage.NoteAsset{
			{ID: "flink://usage-hourly-rollup", Kind: "stream_job", Owner: "olivia"},
			{ID: "connect://bq-billing", Kind: "connector"},
		}})

		type want struct{ rollup, replayer, billing kafka.Status }
		wants := map[int]want{
			0:  {kafka.StatusUnknown, kafka.StatusOK, kafka.StatusOK},
			1:  {kafka.StatusStalled, kafka.StatusOK, kafka.StatusOK},
			4:  {kafka.StatusStalled, kafka.StatusRewound, kafka.StatusOK},
			5:  {kafka.StatusStalled, kafka.StatusRewound, kafka.StatusOK},
			6:  {kafka.StatusStalled, kafka.StatusOK, kafka.StatusOK},
			11: {kafka.StatusStopped, kafka.StatusOK, kafka.StatusOK},
		}
		for i := 0; i < 12; i++ {
			end := int64(10 * (i + 1))
			kc.produce(t, "api-usage", 10, 0, 1)
			if i == 0 {
				kc.commit(t, "usage-hourly-rollup", "api-usage", map[int32]int64{0: 5, 1: 5})
			}
			replayed := end
			switch i {
			case 4:
				replayed = 5
			case 5:
				replayed = 30
			}
			kc.commit(t, "replayer", "api-usage", map[int32]int64{0: replayed, 1: end})
			kc.commit(t, "connect-bq-billing", "api-usage", map[int32]int64{0: end, 1: end})

			out, summary, err := e.h.consumerLag(ctx, ConsumerLagIn{})
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			if out.Cluster != "prod" || !out.At.Equal(e.clk.Now()) || len(out.Groups) != 3 {
				t.Fatalf("call %d: cluster %s at %s, %d groups", i, out.Cluster, out.At, len(out.Groups))
			}
			rollup, replayer, billing := group(t, out, "usage-hourly-rollup"), group(t, out, "replayer"), group(t, out, "connect-bq-billing")
			if rollup.TotalLag != 2*(end-5) || rollup.Partitions[0].Lag != end-5 || rollup.Partitions[0].End != end {
				t.Errorf("call %d: rollup lag %d, partition 0 %+v", i, rollup.TotalLag, rollup.Partitions[0].PartitionLag)
			}
			if w, ok := wants[i]; ok {
				for _, c := range []struct {
					g    GroupLag
					want kafka.Status
				}{{rollup, w.rollup}, {replayer, w.replayer}, {billing, w.billing}} {
					if c.g.Status != c.want {
						t.Errorf("call %d: %s is %s, want %s (%s)", i, c.g.Group, c.g.Status, c.want, c.g.Partitions[0].Reason)
					}
				}
			}
			if i == 11 && !strings.Contains(summary, "usage-hourly-rollup: stopped") {
				t.Errorf("summary does not name the stopped group:\n%s", summary)
			}
			if i == 11 && !strings.Contains(summary, "consumed by flink://usage-hourly-rollup, owner olivia") {
				t.Errorf("summary does not name the owner:\n%s", summary)
			}
			e.clk.Advance(time.Minute)
		}

		out, _, err := e.h.consumerLag(ctx, ConsumerLagIn{Group: "usage-hourly-rollup"})
		if err != nil {
			t.Fatal(err)
		}
		rollup := out.Groups[0]
		if o := rollup.Owner; o.Asset != "flink://usage-hourly-rollup" || o.Owner != "olivia" || o.OwnerFrom != "context graph" || !strings.HasPrefix(o.MatchedBy, "group id") {
			t.Errorf("rollup owner: %+v", o)
		}
		if !strings.Contains(rollup.Partitions[0].Reason, "no new commit since") {
			t.Errorf("stopped reason: %q", rollup.Partitions[0].Reason)
		}
		out, _, err = e.h.consumerLag(ctx, ConsumerLagIn{Topic: "api-usage"})
		if err != nil {
			t.Fatal(err)
		}
		if o := group(t, out, "connect-bq-billing").Owner; o.Asset != "connect://bq-billing" || o.Owner != "olivia" || o.OwnerFrom != "domain streaming in dw.yaml" {
			t.Errorf("connector owner through the Connect group name and the domain: %+v", o)
		}
		if o := group(t, out, "replayer").Owner; o.Owner != "" || !strings.Contains(o.Note, "no owner recorded") || !strings.Contains(o.Note, "record_lineage") {
			t.Errorf("unowned group: %+v", o)
		}

		_, _, err = e.h.consumerLag(ctx, ConsumerLagIn{Group: "usage-hourly-rolup"})
		wantErr(t, err, `unknown consumer group "usage-hourly-rolup"`, "closest: usage-hourly-rollup")
		_, _, err = e.h.consumerLag(ctx, ConsumerLagIn{Topic: "api-usag"})
		wantErr(t, err, `unknown topic "api-usag"`, "closest: api-usage")
	})
}

// TestConsumerLagOwnerByClientID names the owner through a live member's
// client id when the group id says nothing: Kafka Connect's sink tasks
// consume as connector-consumer-<connector>-<task>.
func TestConsumerLagOwnerByClientID(t *testing.T) {
	ctx := context.Background()
	kc := newCluster(t, 1)
	kc.createTopic(t, "member-balances", 1, 1, nil)
	kc.produce(t, "member-balances", 20, 0)
	e := newEnv(t, kc.yaml())
	e.note(lineage.Note{Assets: []lineage.NoteAsset{{ID: "connect://bq-member-balances", Kind: "connector", Owner: "carol"}}})

	consumer, err := kgo.NewClient(kgo.SeedBrokers(kc.addrs...), kgo.ConsumerGroup("cg-7f3a"), kgo.ConsumeTopics("member-balances"),
		kgo.ClientID("connector-consumer-bq-member-balances-0"), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	fetches := consumer.PollFetches(pctx)
	cancel()
	if fetches.NumRecords() == 0 {
		t.Fatalf("consumer did not join and fetch: %v", fetches.Errors())
	}

	out, _, err := e.h.consumerLag(ctx, ConsumerLagIn{Group: "cg-7f3a"})
	if err != nil {
		t.Fatal(err)
	}
	g := out.Groups[0]
	if g.Members != 1 || g.Partitions[0].ClientID != "connector-consumer-bq-member-balances-0" || g.Partitions[0].Lag != 20 {
		t.Fatalf("group: %+v", g.GroupReport)
	}
	if o := g.Owner; o.Asset != "connect://bq-member-balances" || o.Owner != "carol" || o.MatchedBy != "client id connector-consumer-bq-member-balances-0" {
		t.Errorf("owner by client id: %+v", o)
	}
}

func TestTopicHealth(t *testing.T) {
	ctx := context.Background()
	kc := newCluster(t, 1)
	kc.createTopic(t, "member-balances", 3, 1, map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "2"})
	kc.createTopic(t, "api-usage", 2, 1, map[string]string{"retention.ms": "86400000"})
	e := newEnv(t, kc.yaml())

	out, summary, err := e.h.topicHealth(ctx, TopicHealthIn{Topic: "member-balances"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Topics) != 1 || out.Cluster != "prod" {
		t.Fatalf("%+v", out)
	}
	th := out.Topics[0]
	kinds := map[string]bool{}
	for _, is := range th.Issues {
		kinds[is.Kind] = true
	}
	if th.Health != kafka.HealthCritical || th.MinInsyncReplicas != 2 || th.CleanupPolicy != "compact" || th.ReplicationFactor != 1 ||
		!kinds[kafka.IssueBelowMinISR] || !kinds[kafka.IssueMinISRAboveReplica] {
		t.Errorf("member-balances: %+v", th)
	}
	if !strings.Contains(summary, "acks=all") {
		t.Errorf("summary: %s", summary)
	}
	out, _, err = e.h.topicHealth(ctx, TopicHealthIn{Topic: "api-usage"})
	if err != nil {
		t.Fatal(err)
	}
	if th := out.Topics[0]; th.Health != kafka.HealthOK || th.Retention != "1d" || th.Partitions != 2 {
		t.Errorf("api-usage: %+v", th)
	}
	out, _, err = e.h.topicHealth(ctx, TopicHealthIn{})
	if err != nil || len(out.Topics) < 2 {
		t.Fatalf("all topics: %v %+v", err, out)
	}
	_, _, err = e.h.topicHealth(ctx, TopicHealthIn{Topic: "member-balance"})
	wantErr(t, err, `unknown topic "member-balance"`, "closest: member-balances")
}

// TestKafkaNotReachable: a broker that does not answer is reported with
// the brokers and the timeout, and nothing is kept that would stop a
// later call from trying again.
func TestKafkaNotReachable(t *testing.T) {
	e := newEnv(t, "kafka:\n  brokers: [\"127.0.0.1:1\"]\n  timeout: 300ms\n")
	_, _, err := e.h.consumerLag(context.Background(), ConsumerLagIn{})
	wantErr(t, err, "127.0.0.1:1", "300ms")
	_, _, err = e.h.topicHealth(context.Background(), TopicHealthIn{})
	wantErr(t, err, "127.0.0.1:1", "300ms")
	// (That the failed client is not kept is deps.Cached's contract,
	// tested in internal/deps.)

	e = newEnv(t, "")
	_, _, err = e.h.topicHealth(context.Background(), TopicHealthIn{})
	wantErr(t, err, "set kafka.brokers in dw.yaml")

	// SASL credentials come from the variables dw.yaml names.
	e = newEnv(t, "kafka:\n  brokers: [\"127.0.0.1:1\"]\n  sasl: {mechanism: SCRAM-SHA-512, username_env: DW_TEST_KAFKA_USER_UNSET, password_env: DW_TEST_KAFKA_PASS_UNSET}\n")
	_, _, err = e.h.topicHealth(context.Background(), TopicHealthIn{})
	wantErr(t, err, "DW_TEST_KAFKA_USER_UNSET", "kafka.sasl.username_env")
	t.Setenv("DW_TEST_KAFKA_USER", "svc-dw")
	t.Setenv("DW_TEST_KAFKA_PASS", "pw")
	e = newEnv(t, "kafka:\n  brokers: [\"127.0.0.1:1\"]\n  timeout: 200ms\n  sasl: {mechanism: SCRAM-SHA-512, username_env: DW_TEST_KAFKA_USER, password_env: DW_TEST_KAFKA_PASS}\n")
	_, _, err = e.h.topicHealth(context.Background(), TopicHealthIn{})
	wantErr(t, err, "127.0.0.1:1", "200ms", `SASL SCRAM-SHA-512 is on for user "svc-dw"`)
}
