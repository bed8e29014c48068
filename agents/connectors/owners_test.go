package connectors

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/kafka"
	"github.com/dataworkers/dw/internal/lineage"
)

func TestOwnerCandidates(t *testing.T) {
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

// TestOwnerFinderBySearch covers a graph with more jobs than one read
// indexes: each name is searched on its own, with the same answers.
func TestOwnerFinderBySearch(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, "")
	e.note(lineage.Note{Assets: []lineage.NoteAsset{
		{ID: "flink://usage-hourly-rollup", Kind: "stream_job", Owner: "olivia"},
		{ID: "flink://prod/usage-hourly-rollup", Kind: "stream_job"},
		{ID: "spark://ingest", Kind: "job", Title: "Usage ingest"},
		{ID: "kafka://prod/usage-hourly-rollup", Kind: "topic", Owner: "someone"},
	}})
	f := e.h.newOwnerFinder(ctx)
	if !f.complete {
		t.Fatal("a small graph was not indexed in one read")
	}
	slow := &ownerFinder{h: e.h, graph: f.graph, cache: map[string][]lineage.SearchHit{}}
	for _, ff := range []*ownerFinder{f, slow} {
		o := ff.find(ctx, kafka.GroupReport{Group: "usage-hourly-rollup"})
		if o.Owner != "" || !strings.Contains(o.Note, "names 2 jobs") {
			t.Errorf("ambiguous name (complete=%v): %+v", ff.complete, o)
		}
		o = ff.find(ctx, kafka.GroupReport{Group: "usage ingest"})
		if o.Asset != "spark://ingest" || o.Owner != "" || !strings.Contains(o.Note, "no owner recorded for spark://ingest") {
			t.Errorf("by title (complete=%v): %+v", ff.complete, o)
		}
		o = ff.find(ctx, kafka.GroupReport{Group: "nobody"})
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
	e := newEnv(b, "")
	const jobs, tables = 300, 3000
	var assets []lineage.NoteAsset
	for i := 0; i < jobs; i++ {
		assets = append(assets, lineage.NoteAsset{ID: fmt.Sprintf("flink://rollup-%03d", i), Kind: "stream_job", Owner: fmt.Sprintf("team-%d", i%7)})
	}
	for i := 0; i < tables; i++ {
		assets = append(assets, lineage.NoteAsset{ID: fmt.Sprintf("snowflake://usage.rollup_%04d", i), Kind: "table"})
	}
	start := time.Now()
	if _, err := e.graph().RecordLineage(ctx, lineage.Note{Assets: assets}); err != nil {
		b.Fatal(err)
	}
	b.Logf("graph of %d assets recorded in %s", len(assets), time.Since(start).Round(time.Millisecond))
	groups := make([]kafka.GroupReport, jobs)
	for i := range groups {
		groups[i] = kafka.GroupReport{Group: fmt.Sprintf("rollup-%03d", i)}
	}
	lookup := func(f *ownerFinder) []ConsumerOwner {
		out := make([]ConsumerOwner, len(groups))
		for i, g := range groups {
			out[i] = f.find(ctx, g)
		}
		return out
	}
	perName := func() *ownerFinder {
		g, _ := e.h.lineageGraph(ctx)
		return &ownerFinder{h: e.h, graph: g, cache: map[string][]lineage.SearchHit{}}
	}
	// Both ways must agree before their speed means anything.
	fast, slow := lookup(e.h.newOwnerFinder(ctx)), lookup(perName())
	for i := range fast {
		if fast[i] != slow[i] || fast[i].Owner != fmt.Sprintf("team-%d", i%7) {
			b.Fatalf("group %d: indexed %+v, searched %+v", i, fast[i], slow[i])
		}
	}

	b.ResetTimer()
	var indexed, searched time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		lookup(e.h.newOwnerFinder(ctx))
		indexed += time.Since(start)
		start = time.Now()
		lookup(perName())
		searched += time.Since(start)
	}
	b.ReportMetric(float64(indexed.Microseconds())/float64(b.N)/1000, "indexed-ms/round")
	b.ReportMetric(float64(searched.Microseconds())/float64(b.N)/1000, "per-group-search-ms/round")
	b.ReportMetric(float64(searched)/float64(indexed), "speedup-x")
}
