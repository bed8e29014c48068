package routines

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// A lagging group's finding and its owner's message name the job that
// consumes the group and that job's owner, from the context graph, so the
// topic's owner who hears of it knows whom to ask.
func TestLaggingGroupNamesItsConsumer(t *testing.T) {
	ctx := context.Background()
	kf, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	prod, err := kgo.NewClient(kgo.SeedBrokers(kf.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	adm := kadm.NewClient(prod)
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, "api-usage"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	produce := func(n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: "api-usage", Partition: 0, Value: []byte("x")})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(10)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "api-usage", Partition: 0, At: 5, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "usage-hourly-rollup", offs); err != nil {
		t.Fatal(err)
	}

	yaml := fmt.Sprintf(`kafka: {name: prod, brokers: ["%s"], timeout: 2s}
people:
  - {id: sam, name: Sam Okafor, slack_id: U0SAM}
  - {id: olivia, name: Olivia Owner, slack_id: U0OLI}
domains:
  - {name: streaming, assets: ["kafka://**"], owners: [sam]}
routines:
  - name: lag
    every: 1m
    consumer_lag: [{group: usage-hourly-rollup}]
`, strings.Join(kf.ListenAddrs(), `", "`))
	cfg := writeConfig(t, yaml)
	db := storetest.SQLite(t)
	clk := clock.NewFake(utc("2026-03-10T15:05:00Z"))
	if _, err := lineage.New(db, clk).RecordLineage(ctx, lineage.Note{Assets: []lineage.NoteAsset{
		{ID: "flink://usage-hourly-rollup", Kind: "stream_job", Owner: "olivia"}}}); err != nil {
		t.Fatal(err)
	}
	slk, notifier := newFakeSlack(t)
	r := newRunner(t, db, cfg, clk, notifier)

	// The first round is the group's first sample: not judged yet. The
	// second, a minute later with records still arriving and no commit,
	// finds it stalled.
	var f Finding
	for i := 0; i < 2; i++ {
		if i > 0 {
			clk.Advance(time.Minute)
			produce(10)
		}
		runs := runOnce(t, r, clk)
		if len(runs) != 1 {
			t.Fatalf("round %d: %d runs", i, len(runs))
		}
		i := slices.IndexFunc(runs[0].Findings, func(f Finding) bool { return f.Kind == "consumer_lag" })
		if i < 0 {
			t.Fatalf("no consumer_lag finding in %+v", runs[0].Findings)
		}
		f = runs[0].Findings[i]
	}
	const consumer = "consumed by flink://usage-hourly-rollup, owner olivia"
	if want := "usage-hourly-rollup: stalled, total lag 15; " + consumer; f.Status != "problem" || f.Detail != want {
		t.Fatalf("finding %+v\nwant detail %q", f, want)
	}
	posts := slk.all()
	if len(posts) != 1 || posts[0].Channel != "U0SAM" {
		t.Fatalf("posts %+v: want one message to sam, who owns the topic", posts)
	}
	lines := strings.Split(posts[0].Text, "\n")
	if !slices.Contains(lines, "• consumer group usage-hourly-rollup: "+consumer) {
		t.Errorf("the message does not name the consumer and its owner:\n%s", posts[0].Text)
	}
}
