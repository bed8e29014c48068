package groupowner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/kafka"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// graphWith is a context graph in a fresh store holding the note.
func graphWith(t testing.TB, n lineage.Note) *lineage.Graph {
	t.Helper()
	g := lineage.New(storetest.SQLite(t), clock.NewFake(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)))
	if _, err := g.RecordLineage(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	return g
}

// configWith is a configuration whose one domain, streaming, covers
// flink:// and connect:// assets and is owned by olivia.
func configWith(t testing.TB) *config.Config {
	t.Helper()
	cfg, err := config.Parse("dw.yaml", []byte(`home: `+t.TempDir()+`
people:
  - {id: olivia, name: Olivia Owner}
domains:
  - name: streaming
    assets: ["flink://*", "connect://*"]
    owners: [olivia]
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestCandidates(t *testing.T) {
	g := kafka.GroupReport{Group: "connect-bq-usage", Partitions: []kafka.PartitionReport{
		{PartitionLag: kafka.PartitionLag{ClientID: "connector-consumer-bq-usage-1"}},
		{PartitionLag: kafka.PartitionLag{ClientID: "connector-consumer-bq-usage-0"}},
		{PartitionLag: kafka.PartitionLag{ClientID: "consumer-rollup-3"}},
	}}
	var got []string
	for _, c := range candidates(g) {
		got = append(got, c.name)
	}
	want := "connect-bq-usage,bq-usage,connector-consumer-bq-usage-0,connector-consumer-bq-usage,connector-consumer-bq-usage-1,consumer-rollup-3,consumer-rollup,rollup"
	if strings.Join(got, ",") != want {
		t.Errorf("candidates:\n got %s\nwant %s", strings.Join(got, ","), want)
	}
	for id, want := range map[string]string{"flink://usage-hourly-rollup": "usage-hourly-rollup", "connect://prod/bq-sink": "bq-sink", "airflow://dag/x/": "x", "bare": "bare"} {
		if got := shortName(id); got != want {
			t.Errorf("shortName(%s) = %s, want %s", id, got, want)
		}
	}
}

// TestOwnerSources covers where an owner comes from, in order: the graph,
// the dw.yaml domain the job falls in, else only a lead upstream.
func TestOwnerSources(t *testing.T) {
	ctx := context.Background()
	g := graphWith(t, lineage.Note{
		Assets: []lineage.NoteAsset{
			{ID: "flink://usage-hourly-rollup", Kind: "stream_job", Owner: "sam"},
			{ID: "connect://bq-billing", Kind: "connector"},
			{ID: "spark://replayer", Kind: "job"},
			{ID: "kafka://prod/api-usage", Kind: "topic", Owner: "gateway-team"},
		},
		Path: []string{"kafka://prod/api-usage", "spark://replayer"},
	})
	f := New(ctx, g, nil, configWith(t))
	for _, c := range []struct {
		group kafka.GroupReport
		want  Owner
	}{
		{kafka.GroupReport{Group: "usage-hourly-rollup"},
			Owner{Asset: "flink://usage-hourly-rollup", Kind: "stream_job", MatchedBy: "group id usage-hourly-rollup", Owner: "sam", OwnerFrom: "context graph"}},
		{kafka.GroupReport{Group: "connect-bq-billing"},
			Owner{Asset: "connect://bq-billing", Kind: "connector", MatchedBy: "group id connect-bq-billing (Kafka Connect sink group)", Owner: "olivia", OwnerFrom: "domain streaming in dw.yaml"}},
		{kafka.GroupReport{Group: "x", Partitions: []kafka.PartitionReport{{PartitionLag: kafka.PartitionLag{ClientID: "consumer-replayer-2"}}}},
			Owner{Asset: "spark://replayer", Kind: "job", MatchedBy: "client id consumer-replayer-2", UpstreamOwner: "gateway-team", UpstreamOwnerAsset: "kafka://prod/api-usage",
				Note: "no owner recorded for spark://replayer; the nearest owner upstream is gateway-team (of kafka://prod/api-usage)"}},
	} {
		if got := f.Find(ctx, c.group); got != c.want {
			t.Errorf("group %s:\n got %+v\nwant %+v", c.group.Group, got, c.want)
		}
	}
	// A graph that cannot be opened is said in every answer.
	broken := New(ctx, nil, errors.New("store is locked"), configWith(t))
	if got := broken.Find(ctx, kafka.GroupReport{Group: "usage-hourly-rollup"}); got != (Owner{Note: "context graph not readable: store is locked"}) {
		t.Errorf("unreadable graph: %+v", got)
	}
}

// TestFinderBySearch covers a graph with more jobs than one read indexes:
// each name is searched on its own, with the same answers.
func TestFinderBySearch(t *testing.T) {
	ctx := context.Background()
	g := graphWith(t, lineage.Note{Assets: []lineage.NoteAsset{
		{ID: "flink://usage-hourly-rollup", Kind: "stream_job", Owner: "olivia"},
		{ID: "flink://prod/usage-hourly-rollup", Kind: "stream_job"},
		{ID: "spark://ingest", Kind: "job", Title: "Usage ingest"},
		{ID: "kafka://prod/usage-hourly-rollup", Kind: "topic", Owner: "someone"},
	}})
	cfg := &config.Config{}
	f := New(ctx, g, nil, cfg)
	if !f.complete {
		t.Fatal("a small graph was not indexed in one read")
	}
	slow := &Finder{graph: g, cfg: cfg, cache: map[string][]lineage.SearchHit{}}
	for _, ff := range []*Finder{f, slow} {
		o := ff.Find(ctx, kafka.GroupReport{Group: "usage-hourly-rollup"})
		if o.Owner != "" || !strings.Contains(o.Note, "names 2 jobs") {
			t.Errorf("ambiguous name (complete=%v): %+v", ff.complete, o)
		}
		o = ff.Find(ctx, kafka.GroupReport{Group: "usage ingest"})
		if o.Asset != "spark://ingest" || o.Owner != "" || !strings.Contains(o.Note, "no owner recorded for spark://ingest") {
			t.Errorf("by title (complete=%v): %+v", ff.complete, o)
		}
		o = ff.Find(ctx, kafka.GroupReport{Group: "nobody"})
		if o.Asset != "" || !strings.Contains(o.Note, "no stream job or connector in the context graph is named nobody") {
			t.Errorf("unknown (complete=%v): %+v", ff.complete, o)
		}
	}
}

// BenchmarkOwnerLookup names the owners of 300 consumer groups in a graph
// of 300 jobs and 3,000 tables, with the jobs indexed in one read, against
// searching the graph once per group, and reports how many times faster
// the one read is.
func BenchmarkOwnerLookup(b *testing.B) {
	ctx := context.Background()
	const jobs, tables = 300, 3000
	var assets []lineage.NoteAsset
	for i := 0; i < jobs; i++ {
		assets = append(assets, lineage.NoteAsset{ID: fmt.Sprintf("flink://rollup-%03d", i), Kind: "stream_job", Owner: fmt.Sprintf("team-%d", i%7)})
	}
	for i := 0; i < tables; i++ {
		assets = append(assets, lineage.NoteAsset{ID: fmt.Sprintf("snowflake://usage.rollup_%04d", i), Kind: "table"})
	}
	start := time.Now()
	g := graphWith(b, lineage.Note{Assets: assets})
	b.Logf("graph of %d assets recorded in %s", len(assets), time.Since(start).Round(time.Millisecond))
	cfg := &config.Config{}
	groups := make([]kafka.GroupReport, jobs)
	for i := range groups {
		groups[i] = kafka.GroupReport{Group: fmt.Sprintf("rollup-%03d", i)}
	}
	lookup := func(f *Finder) []Owner {
		out := make([]Owner, len(groups))
		for i, gr := range groups {
			out[i] = f.Find(ctx, gr)
		}
		return out
	}
	perName := func() *Finder { return &Finder{graph: g, cfg: cfg, cache: map[string][]lineage.SearchHit{}} }
	// Both ways must agree before their speed means anything.
	fast, slow := lookup(New(ctx, g, nil, cfg)), lookup(perName())
	for i := range fast {
		if fast[i] != slow[i] || fast[i].Owner != fmt.Sprintf("team-%d", i%7) {
			b.Fatalf("group %d: indexed %+v, searched %+v", i, fast[i], slow[i])
		}
	}

	b.ResetTimer()
	var indexed, searched time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		lookup(New(ctx, g, nil, cfg))
		indexed += time.Since(start)
		start = time.Now()
		lookup(perName())
		searched += time.Since(start)
	}
	b.ReportMetric(float64(indexed.Microseconds())/float64(b.N)/1000, "indexed-ms/round")
	b.ReportMetric(float64(searched.Microseconds())/float64(b.N)/1000, "per-group-search-ms/round")
	b.ReportMetric(float64(searched)/float64(indexed), "speedup-x")
}
