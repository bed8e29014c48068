package benchmcp

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"
)

// The consumer-lag estate of issue 18: 200 groups, each committed on 50
// partitions of one of 50 topics (10,000 partitions), 3 records each.
const (
	lagTopics     = 50
	lagPartitions = 200
	lagGroups     = 200
	lagPerGroup   = 50
	lagRecords    = 3
)

// lagCalls is how many calls the row makes: 100 by default (the issue saw
// the time grow fivefold by then); DW_BENCH_LAG_CALLS overrides.
func lagCalls() int {
	if n, err := strconv.Atoi(os.Getenv("DW_BENCH_LAG_CALLS")); err == nil && n >= 2 {
		return n
	}
	return 100
}

// newLagCluster starts an in-process kfake cluster holding the estate.
func newLagCluster(b *testing.B) (*kfake.Cluster, *kadm.Client) {
	ctx := context.Background()
	kf, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(kf.Close)
	raw, err := kgo.NewClient(kgo.SeedBrokers(kf.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(raw.Close)
	adm := kadm.NewClient(raw)
	var topics []string
	for i := 0; i < lagTopics; i++ {
		topics = append(topics, fmt.Sprintf("bench-%02d", i))
	}
	created, err := adm.CreateTopics(ctx, lagPartitions, 1, nil, topics...)
	if err != nil {
		b.Fatal(err)
	}
	if err := created.Error(); err != nil {
		b.Fatal(err)
	}
	recs := make([]*kgo.Record, 0, lagTopics*lagPartitions*lagRecords)
	for _, t := range topics {
		for p := int32(0); p < lagPartitions; p++ {
			for r := 0; r < lagRecords; r++ {
				recs = append(recs, &kgo.Record{Topic: t, Partition: p, Value: []byte("x")})
			}
		}
	}
	if err := raw.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	for g := 0; g < lagGroups; g++ {
		topic := topics[g%lagTopics]
		first := int32(g/lagTopics) * lagPerGroup
		os := kadm.Offsets{}
		for p := first; p < first+lagPerGroup; p++ {
			os.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(p % (lagRecords + 1)), LeaderEpoch: -1})
		}
		if err := adm.CommitAllOffsets(ctx, fmt.Sprintf("group-%03d", g), os); err != nil {
			b.Fatal(err)
		}
	}
	return kf, adm
}

// BenchmarkE2EConsumerLag is issue 18's consumer-lag row: get_consumer_lag
// with no filter on a warm dw-connectors over stdio, 100 calls in a row
// against one cluster, next to the floor in the same loop: one batched kadm
// round (kadm's Lag over every group: list, describe, fetch offsets, list
// end offsets). Every call stores a round, so call 100 judges over 99
// earlier rounds' samples: the row reports the first and last ten calls
// apart to show whether the time stays flat as samples accumulate, the
// answer's size, and the stored sample count at the end.
func BenchmarkE2EConsumerLag(b *testing.B) {
	ctx := context.Background()
	t0 := time.Now()
	kf, adm := newLagCluster(b)
	b.Logf("bench cluster: %d groups, %d partitions, built in %s", lagGroups, lagGroups*lagPerGroup, time.Since(t0).Round(time.Millisecond))

	home := b.TempDir()
	conf := filepath.Join(home, "dw.yaml")
	yaml := "home: " + home + "\nkafka:\n  name: bench\n  timeout: 5m\n  brokers: [" + strings.Join(kf.ListenAddrs(), ", ") + "]\n"
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	floor := func() time.Duration {
		t := time.Now()
		lags, err := adm.Lag(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(lags) != lagGroups {
			b.Fatalf("floor read %d groups, want %d", len(lags), lagGroups)
		}
		return time.Since(t)
	}
	floor() // warm the admin client's metadata like the agent's first call does
	agent := Start(b, "dw-connectors", "DW_CONFIG="+conf, "DW_HOME="+home)
	var ans struct {
		Total        int            `json:"total"`
		StatusCounts map[string]int `json:"status_counts"`
		Groups       []struct {
			Group      string            `json:"group"`
			Partitions []json.RawMessage `json:"partitions"`
		} `json:"groups"`
	}
	var raw json.RawMessage
	calls := lagCalls()
	row := Row{Key: "lag", What: fmt.Sprintf("consumer lag, %d groups / %d partitions, %d calls", lagGroups, lagGroups*lagPerGroup, calls)}
	var size int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for c := 0; c < calls; c++ {
			row.Floor = append(row.Floor, floor())
			row.Product = append(row.Product, agent.Call(b, "get_consumer_lag", map[string]any{}, &raw))
			size = len(raw)
			ans.StatusCounts, ans.Groups = nil, nil
			if err := json.Unmarshal(raw, &ans); err != nil {
				b.Fatal(err)
			}
			// An unpaged answer (a binary from before paging) has no total.
			total := cmp.Or(ans.Total, len(ans.Groups))
			if total != lagGroups || len(ans.Groups) == 0 {
				b.Fatalf("call %d: %d groups in total, %d listed", c, total, len(ans.Groups))
			}
		}
	}
	b.StopTimer()
	row.RSSMiB = agent.RSSMiB()
	n := min(10, len(row.Product)/2)
	first, last := row.Product[:n], row.Product[len(row.Product)-n:]
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	samples := countSamples(b, filepath.Join(home, "dw.db"))
	ff, fl := row.Floor[:n], row.Floor[len(row.Floor)-n:]
	row.Note = fmt.Sprintf("first call %.0f ms; calls 1-%d median %.0f ms, calls %d-%d median %.0f ms (%.2f× the first ten; the floor's %.2f×); answer %d KiB (%d of %d groups listed, statuses %v); %d samples stored after %d rounds",
		ms(row.Product[0]), n, ms(med(first)), len(row.Product)-n+1, len(row.Product), ms(med(last)), float64(med(last))/float64(med(first)), float64(med(fl))/float64(med(ff)),
		size/1024, len(ans.Groups), cmp.Or(ans.Total, len(ans.Groups)), ans.StatusCounts, samples, len(row.Product))
	// The goal is two things: within 2× the floor, and flat (the last ten
	// calls not more than a quarter slower than the first ten).
	growth := float64(med(last)) / float64(med(first))
	_, ratio := row.Ratios()
	met := ratio <= 2 && growth <= 1.25
	row.Met = &met
	b.ReportMetric(growth, "x-last10-over-first10")
	b.ReportMetric(float64(size)/1024, "KiB-answer")
	row.Report(b)
}

// countSamples reads the number of stored lag samples from the agent's
// store (read-only, beside the running agent).
func countSamples(b *testing.B, path string) int {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM kafka_lag_samples").Scan(&n); err != nil {
		b.Logf("count samples: %v", err)
		return -1
	}
	return n
}
