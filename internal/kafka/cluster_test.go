package kafka

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testCluster is an in-process Kafka with a client under test, an admin to
// arrange state and a producer.
type testCluster struct {
	kf     *kfake.Cluster
	client *Client
	adm    *kadm.Client
	prod   *kgo.Client
}

func newTestCluster(t testing.TB, brokers int, opts ...kfake.Opt) *testCluster {
	t.Helper()
	kf, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(brokers)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	c, err := NewClient(context.Background(), Config{Brokers: kf.ListenAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	prod, err := kgo.NewClient(kgo.SeedBrokers(kf.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	return &testCluster{kf: kf, client: c, adm: kadm.NewClient(prod), prod: prod}
}

func (tc *testCluster) createTopic(t testing.TB, name string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := tc.adm.CreateTopic(context.Background(), partitions, rf, cfg, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// produce writes n records to each listed partition of topic.
func (tc *testCluster) produce(t testing.TB, topic string, n int, partitions ...int32) {
	t.Helper()
	var recs []*kgo.Record
	for _, p := range partitions {
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.Itoa(i))})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tc.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// commit sets a group's committed offsets as a consumer would.
func (tc *testCluster) commit(t testing.TB, group, topic string, offsets map[int32]int64) {
	t.Helper()
	os := kadm.Offsets{}
	for p, at := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
	}
	if err := tc.adm.CommitAllOffsets(context.Background(), group, os); err != nil {
		t.Fatalf("commit %s: %v", group, err)
	}
}
