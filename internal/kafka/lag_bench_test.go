package kafka

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The benchmark estate: 50 topics x 200 partitions = 10,000 partitions,
// 200 groups, each committed on 50 partitions of one topic (four groups
// share a topic, one quarter each), so 10,000 group-partitions in all.
const (
	benchTopics     = 50
	benchPartitions = 200
	benchGroups     = 200
	benchPerGroup   = 50
	benchRecords    = 3
)

type benchEstate struct {
	kf     *kfake.Cluster
	client *Client
	raw    *kgo.Client
	// owned lists each group's committed partitions, for the baseline.
	owned     map[string]map[string][]int32
	totalLag  int64
	setupTook time.Duration
	err       error
}

var (
	benchOnce sync.Once
	bench     benchEstate
)

func benchTopic(i int) string { return fmt.Sprintf("bench-%02d", i) }
func benchGroup(i int) string { return fmt.Sprintf("group-%03d", i) }

// estate builds the cluster once per test binary: a benchmark runs its
// function several times and rebuilding 10,000 partitions each time would
// measure setup, not lag.
func estate(b *testing.B) *benchEstate {
	benchOnce.Do(func() {
		start := time.Now()
		bench.err = buildEstate(&bench)
		bench.setupTook = time.Since(start)
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return &bench
}

func buildEstate(e *benchEstate) error {
	ctx := context.Background()
	kf, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		return err
	}
	e.kf = kf
	raw, err := kgo.NewClient(kgo.SeedBrokers(kf.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		return err
	}
	e.raw = raw
	adm := kadm.NewClient(raw)
	var names []string
	for i := 0; i < benchTopics; i++ {
		names = append(names, benchTopic(i))
	}
	created, err := adm.CreateTopics(ctx, benchPartitions, 1, nil, names...)
	if err != nil {
		return err
	}
	if err := created.Error(); err != nil {
		return err
	}
	recs := make([]*kgo.Record, 0, benchTopics*benchPartitions*benchRecords)
	for _, t := range names {
		for p := int32(0); p < benchPartitions; p++ {
			for r := 0; r < benchRecords; r++ {
				recs = append(recs, &kgo.Record{Topic: t, Partition: p, Value: []byte("x")})
			}
		}
	}
	if err := raw.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return err
	}
	e.owned = map[string]map[string][]int32{}
	for g := 0; g < benchGroups; g++ {
		topic := benchTopic(g % benchTopics)
		first := int32(g/benchTopics) * benchPerGroup
		os := kadm.Offsets{}
		var parts []int32
		for p := first; p < first+benchPerGroup; p++ {
			at := int64(p % (benchRecords + 1))
			os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
			e.totalLag += benchRecords - at
			parts = append(parts, p)
		}
		e.owned[benchGroup(g)] = map[string][]int32{topic: parts}
		if err := adm.CommitAllOffsets(ctx, benchGroup(g), os); err != nil {
			return err
		}
	}
	e.client, err = NewClient(ctx, Config{Brokers: kf.ListenAddrs(), RequestTimeout: 5 * time.Minute})
	return err
}

// lagPerPartition is the naive way: for every partition a group committed,
// fetch that one committed offset and list that one end offset.
func lagPerPartition(ctx context.Context, cl *kgo.Client, owned map[string]map[string][]int32) (int64, error) {
	var total int64
	for g, topics := range owned {
		for t, parts := range topics {
			for _, p := range parts {
				of := kmsg.NewPtrOffsetFetchRequest()
				of.Group = g
				ot := kmsg.NewOffsetFetchRequestTopic()
				ot.Topic, ot.Partitions = t, []int32{p}
				of.Topics = append(of.Topics, ot)
				ofr, err := of.RequestWith(ctx, cl)
				if err != nil {
					return 0, err
				}
				committed := int64(-1)
				for _, rt := range ofr.Topics {
					for _, rp := range rt.Partitions {
						committed = rp.Offset
					}
				}
				for _, rg := range ofr.Groups {
					for _, rt := range rg.Topics {
						for _, rp := range rt.Partitions {
							committed = rp.Offset
						}
					}
				}
				lo := kmsg.NewPtrListOffsetsRequest()
				lt := kmsg.NewListOffsetsRequestTopic()
				lt.Topic = t
				lp := kmsg.NewListOffsetsRequestTopicPartition()
				lp.Partition, lp.Timestamp = p, -1
				lt.Partitions = append(lt.Partitions, lp)
				lo.Topics = append(lo.Topics, lt)
				lor, err := lo.RequestWith(ctx, cl)
				if err != nil {
					return 0, err
				}
				end := lor.Topics[0].Partitions[0].Offset
				total += max(end-committed, 0)
			}
		}
	}
	return total, nil
}

// BenchmarkLag compares one batched lag round against asking each of the
// 10,000 group-partitions on its own, in the same run, and reports how many
// times faster the batched round is.
func BenchmarkLag(b *testing.B) {
	e := estate(b)
	ctx := context.Background()
	b.Logf("setup of %d partitions, %d groups took %s", benchTopics*benchPartitions, benchGroups, e.setupTook.Round(time.Millisecond))

	// Both ways must agree before their speed means anything.
	r, err := e.client.Lag(ctx, LagFilter{}, t0)
	if err != nil {
		b.Fatal(err)
	}
	var batchedTotal int64
	rows := 0
	for _, g := range r.Groups {
		batchedTotal += g.TotalLag
		rows += len(g.Partitions)
	}
	single, err := lagPerPartition(ctx, e.raw, e.owned)
	if err != nil {
		b.Fatal(err)
	}
	if len(r.Groups) != benchGroups || rows != benchGroups*benchPerGroup || batchedTotal != e.totalLag || single != e.totalLag {
		b.Fatalf("disagree: %d groups, %d rows, batched lag %d, per-partition lag %d, want %d", len(r.Groups), rows, batchedTotal, single, e.totalLag)
	}

	b.ResetTimer()
	var batchedTook, singleTook time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := e.client.Lag(ctx, LagFilter{}, t0); err != nil {
			b.Fatal(err)
		}
		batchedTook += time.Since(start)
		start = time.Now()
		if _, err := lagPerPartition(ctx, e.raw, e.owned); err != nil {
			b.Fatal(err)
		}
		singleTook += time.Since(start)
	}
	b.ReportMetric(float64(batchedTook.Milliseconds())/float64(b.N), "batched-ms/round")
	b.ReportMetric(float64(singleTook.Milliseconds())/float64(b.N), "per-partition-ms/round")
	b.ReportMetric(float64(singleTook)/float64(batchedTook), "speedup-x")
}
