package connect_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/connect"
	"github.com/dataworkers/dw/internal/connect/connecttest"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/store/storetest"
)

const bqSinkClass = "com.wepay.kafka.connect.bigquery.BigQuerySinkConnector"

func statusWorker(t *testing.T) (*connecttest.Server, *connect.Client) {
	t.Helper()
	w := connecttest.NewServer()
	t.Cleanup(w.Close)
	w.AddPlugin(bqSinkClass, "sink", "2.5.0")
	c, err := connect.NewClient(w.URL(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return w, c
}

func bqConfig(topic string) map[string]string {
	return map[string]string{"connector.class": bqSinkClass, "topics": topic, "project": "acme-loyalty",
		"defaultDataset": "loyalty", "topic2TableMap": topic + ":" + strings.ReplaceAll(topic, "-", "_")}
}

func firstPage(t *testing.T, limit int) page.Page {
	t.Helper()
	pg, err := page.Params{Limit: limit}.Resolve("test")
	if err != nil {
		t.Fatal(err)
	}
	return pg
}

// TestStatusPageRecordsEveryConnector: hops are recorded for every
// connector, not only the page's; the page is by name with counts over
// all, a long trace is cut, and a connector without a table is skipped
// with the reason.
func TestStatusPageRecordsEveryConnector(t *testing.T) {
	ctx := context.Background()
	w, c := statusWorker(t)
	for _, topic := range []string{"zz-orders", "member-balances"} {
		if err := w.AddConnector("bq-"+topic, bqConfig(topic), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddConnector("file-audit", map[string]string{
		"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "topics": "audit", "file": "/tmp/audit.txt",
	}, 1); err != nil {
		t.Fatal(err)
	}
	long := "org.apache.kafka.connect.errors.ConnectException: boom\n" + strings.Repeat("\tat x.y.Z(Z.java:1)\n", 400)
	if err := w.SetTaskState("bq-zz-orders", 0, connect.StateFailed, long); err != nil {
		t.Fatal(err)
	}
	g := lineage.New(storetest.SQLite(t), clock.NewFake(time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)))

	sp, err := c.StatusPage(ctx, connect.StatusParams{}, func(context.Context) (*lineage.Graph, error) { return g, nil }, "prod", firstPage(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	if sp.Total != 3 || sp.NextCursor == "" || len(sp.Connectors) != 2 || sp.Connectors[0].Name != "bq-member-balances" || sp.Connectors[1].Name != "bq-zz-orders" {
		t.Fatalf("page: %+v", sp)
	}
	if n := sp.HealthCounts[connect.HealthDegraded] + sp.HealthCounts[connect.HealthFailed]; n != 1 || len(sp.HealthCounts) < 2 {
		t.Errorf("health counts over all: %v", sp.HealthCounts)
	}
	trace := sp.Connectors[1].Tasks[0].Trace
	if len(trace) <= connect.MaxTrace || !strings.HasPrefix(trace, long[:connect.MaxTrace]) ||
		!strings.HasSuffix(trace, fmt.Sprintf("… %d more characters (GET /connectors/<name>/status on the Connect worker has the whole trace)", len(long)-connect.MaxTrace)) {
		t.Errorf("trace not cut at %d: %d characters", connect.MaxTrace, len(trace))
	}
	l := sp.Lineage
	if l.RecordedTotal != 2 || len(l.Recorded) != 2 || l.Recorded[0] != "bq-member-balances" || l.Recorded[1] != "bq-zz-orders" || l.EdgesCreated != 4 {
		t.Errorf("recorded: %+v", l)
	}
	if l.SkippedTotal != 1 || l.Skipped[0].Connector != "file-audit" || l.Skipped[0].Topic != "audit" {
		t.Errorf("skipped: %+v", l.Skipped)
	}
	// The connector off this page is in the graph too.
	lin, err := g.GetLineage(ctx, lineage.LineageParams{Asset: "kafka://prod/zz-orders"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lin.Downstream) != 1 || lin.Downstream[0].Asset.ID != "connect://bq-zz-orders" {
		t.Errorf("downstream of the topic: %+v", lin.Downstream)
	}

	// Read again: nothing new in the graph.
	again, err := c.StatusPage(ctx, connect.StatusParams{}, func(context.Context) (*lineage.Graph, error) { return g, nil }, "prod", firstPage(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	if again.Lineage.EdgesCreated != 0 || again.Lineage.AssetsCreated != 0 || again.Lineage.RecordedTotal != 2 {
		t.Errorf("second read: %+v", again.Lineage)
	}
}

// TestStatusPageOpensTheGraphAfterTheCluster: a worker that does not
// answer is the error, and the graph is not opened; a graph that cannot
// be opened is an error once the cluster has answered.
func TestStatusPageOpensTheGraphAfterTheCluster(t *testing.T) {
	ctx := context.Background()
	opened := false
	graph := func(context.Context) (*lineage.Graph, error) { opened = true; return nil, errors.New("store locked") }
	w, c := statusWorker(t)
	if _, err := c.StatusPage(ctx, connect.StatusParams{Connectors: []string{"no-such"}}, graph, "prod", firstPage(t, 10)); err == nil || opened {
		t.Errorf("unknown connector: %v (graph opened %v)", err, opened)
	}
	if err := w.AddConnector("bq-a", bqConfig("a"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StatusPage(ctx, connect.StatusParams{}, graph, "prod", firstPage(t, 10)); err == nil || err.Error() != "store locked" {
		t.Errorf("graph error: %v", err)
	}
}

// TestStatusPageCapsWhatItLists: a cluster of many connectors lists the
// first MaxLineageListed recorded and skipped, with the totals.
func TestStatusPageCapsWhatItLists(t *testing.T) {
	w, c := statusWorker(t)
	const each = connect.MaxLineageListed + 5
	for i := range each {
		if err := w.AddConnector(fmt.Sprintf("bq-%03d", i), bqConfig(fmt.Sprintf("t%03d", i)), 1); err != nil {
			t.Fatal(err)
		}
		if err := w.AddConnector(fmt.Sprintf("file-%03d", i), map[string]string{
			"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "topics": "audit", "file": "/tmp/a"}, 1); err != nil {
			t.Fatal(err)
		}
	}
	g := lineage.New(storetest.SQLite(t), clock.NewFake(time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)))
	sp, err := c.StatusPage(context.Background(), connect.StatusParams{}, func(context.Context) (*lineage.Graph, error) { return g, nil }, "prod", firstPage(t, 5))
	if err != nil {
		t.Fatal(err)
	}
	l := sp.Lineage
	if l.RecordedTotal != each || len(l.Recorded) != connect.MaxLineageListed || l.SkippedTotal != each || len(l.Skipped) != connect.MaxLineageListed ||
		l.Recorded[0] != "bq-000" || len(sp.Connectors) != 5 || sp.Total != 2*each {
		t.Errorf("recorded %d/%d skipped %d/%d page %d of %d", len(l.Recorded), l.RecordedTotal, len(l.Skipped), l.SkippedTotal, len(sp.Connectors), sp.Total)
	}
}
