package connectors

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/connect"
	"github.com/dataworkers/dw/internal/connect/connecttest"
	"github.com/dataworkers/dw/internal/lineage"
)

const bqSink = "com.wepay.kafka.connect.bigquery.BigQuerySinkConnector"

func connectWorker(t *testing.T) *connecttest.Server {
	t.Helper()
	w := connecttest.NewServer()
	t.Cleanup(w.Close)
	w.AddPlugin(bqSink, "sink", "2.5.0")
	return w
}

// TestConnectorStatus reads a degraded BigQuery sink with a failed task,
// and records its topic -> connector -> table hop in the context graph.
func TestConnectorStatus(t *testing.T) {
	ctx := context.Background()
	w := connectWorker(t)
	if err := w.AddConnector("bq-member-balances", map[string]string{
		"connector.class": bqSink, "topics": "member-balances", "project": "acme-loyalty",
		"defaultDataset": "loyalty", "topic2TableMap": "member-balances:member_balances",
	}, 2); err != nil {
		t.Fatal(err)
	}
	trace := "org.apache.kafka.connect.errors.ConnectException: table loyalty.member_balances not found\n\tat com.wepay..."
	if err := w.SetTaskState("bq-member-balances", 1, connect.StateFailed, trace); err != nil {
		t.Fatal(err)
	}
	if err := w.AddConnector("file-audit", map[string]string{
		"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "topics": "audit", "file": "/tmp/audit.txt",
	}, 1); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "kafka_connect:\n  url: "+w.URL()+"\n  timeout: 2s\nkafka:\n  name: prod\n  brokers: [\"127.0.0.1:1\"]\n")

	out, summary, err := e.h.connectorStatus(ctx, ConnectorStatusIn{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Connectors) != 2 {
		t.Fatalf("%d connectors", len(out.Connectors))
	}
	bq := out.Connectors[0]
	if bq.Name != "bq-member-balances" || bq.Health != connect.HealthDegraded || bq.FailedTasks != 1 || bq.Tasks[1].Trace != trace {
		t.Errorf("bq sink: %+v", bq)
	}
	if len(bq.Flows) != 1 || bq.Flows[0].Topic != "member-balances" || bq.Flows[0].Table != "acme-loyalty.loyalty.member_balances" {
		t.Errorf("flows: %+v", bq.Flows)
	}
	if !strings.Contains(summary, "degraded") || !strings.Contains(summary, "table loyalty.member_balances not found") {
		t.Errorf("summary does not carry the failing task's trace:\n%s", summary)
	}
	if len(out.Lineage.Recorded) != 1 || out.Lineage.Recorded[0] != "bq-member-balances" || out.Lineage.EdgesCreated != 2 {
		t.Errorf("lineage: %+v", out.Lineage)
	}
	if len(out.Lineage.Skipped) != 1 || out.Lineage.Skipped[0].Connector != "file-audit" || !strings.Contains(out.Lineage.Skipped[0].Reason, "names no table") {
		t.Errorf("skipped: %+v", out.Lineage.Skipped)
	}
	lin, err := e.graph().GetLineage(ctx, lineage.LineageParams{Asset: "kafka://prod/member-balances"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lin.Downstream) != 1 || lin.Downstream[0].Asset.ID != "connect://bq-member-balances" {
		t.Fatalf("topic downstream: %+v", lin.Downstream)
	}
	lin, err = e.graph().GetLineage(ctx, lineage.LineageParams{Asset: "connect://bq-member-balances"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lin.Downstream) != 1 || !strings.HasPrefix(lin.Downstream[0].Asset.ID, "bigquery://") || !strings.HasSuffix(lin.Downstream[0].Asset.ID, "member_balances") {
		t.Errorf("connector downstream: %+v", lin.Downstream)
	}

	// Reading again records nothing new.
	out, _, err = e.h.connectorStatus(ctx, ConnectorStatusIn{Name: "bq-member-balances"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Connectors) != 1 || out.Lineage.EdgesCreated != 0 || out.Lineage.AssetsCreated != 0 {
		t.Errorf("second read: %+v", out.Lineage)
	}
	_, _, err = e.h.connectorStatus(ctx, ConnectorStatusIn{Name: "bq-member-balance"})
	wantErr(t, err, `no connector "bq-member-balance"`, "closest: bq-member-balances")
}

// TestValidateConnectorConfig returns the cluster's own errors per field
// and creates nothing.
func TestValidateConnectorConfig(t *testing.T) {
	ctx := context.Background()
	w := connectWorker(t)
	w.SetValidationErrors(bqSink, map[string][]string{"project": {"Project acme-lyolty does not exist"}})
	e := newEnv(t, "kafka_connect:\n  url: "+w.URL()+"\n")

	v, summary, err := e.h.validateConnector(ctx, connect.ValidateParams{Plugin: bqSink, Config: map[string]string{
		"name": "bq-new", "topics": "member-balances", "project": "acme-lyolty",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if v.Valid || v.ErrorCount == 0 {
		t.Fatalf("validation: %+v", v)
	}
	found := false
	for _, fe := range v.Errors {
		if fe.Field == "project" && strings.Contains(strings.Join(fe.Errors, " "), "does not exist") {
			found = true
		}
	}
	if !found {
		t.Errorf("no error on project: %+v", v.Errors)
	}
	if !strings.Contains(summary, "project: Project acme-lyolty does not exist") || !strings.Contains(summary, "Nothing was created") {
		t.Errorf("summary: %s", summary)
	}
	st, _, err := e.h.connectorStatus(ctx, ConnectorStatusIn{})
	if err != nil || len(st.Connectors) != 0 {
		t.Errorf("validation created a connector: %v %+v", err, st)
	}

	_, _, err = e.h.validateConnector(ctx, connect.ValidateParams{Plugin: "com.wepay.kafka.connect.bigquery.BigQuerySink", Config: map[string]string{}})
	wantErr(t, err, "is not installed", "closest: "+bqSink)
	_, _, err = e.h.validateConnector(ctx, connect.ValidateParams{Plugin: " ", Config: map[string]string{}})
	wantErr(t, err, "plugin is empty")
}

// TestConnectWorkerNotReachable names the worker and the timeout.
func TestConnectWorkerNotReachable(t *testing.T) {
	e := newEnv(t, "kafka_connect:\n  url: http://127.0.0.1:1\n  timeout: 300ms\n")
	_, _, err := e.h.connectorStatus(context.Background(), ConnectorStatusIn{})
	wantErr(t, err, "http://127.0.0.1:1", "300ms")
	_, _, err = e.h.validateConnector(context.Background(), connect.ValidateParams{Plugin: bqSink, Config: map[string]string{}})
	wantErr(t, err, "http://127.0.0.1:1", "300ms")

	// A worker that accepts the connection but never answers.
	hang := make(chan struct{})
	srv := newHangingServer(t, hang)
	e = newEnv(t, "kafka_connect:\n  url: "+srv+"\n  timeout: 200ms\n")
	_, _, err = e.h.connectorStatus(context.Background(), ConnectorStatusIn{})
	close(hang)
	wantErr(t, err, srv, "did not answer", "200ms")

	e = newEnv(t, "")
	_, _, err = e.h.connectorStatus(context.Background(), ConnectorStatusIn{})
	wantErr(t, err, "set kafka_connect.url in dw.yaml")
}

// TestConnectorLineageListsAreBounded: a cluster of 400 connectors, half
// recordable and half not. The lineage part of the answer lists the first
// 50 of each with totals, and the whole answer stays bounded.
func TestConnectorLineageListsAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("records 200 connectors")
	}
	ctx := context.Background()
	w := connectWorker(t)
	const each = 200
	for i := range each {
		if err := w.AddConnector(fmt.Sprintf("bq-sink-%03d", i), map[string]string{
			"connector.class": bqSink, "topics": fmt.Sprintf("topic-%03d", i), "project": "p",
			"defaultDataset": "d", "topic2TableMap": fmt.Sprintf("topic-%03d:table_%03d", i, i),
		}, 1); err != nil {
			t.Fatal(err)
		}
		if err := w.AddConnector(fmt.Sprintf("file-sink-%03d", i), map[string]string{
			"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "topics": fmt.Sprintf("audit-%03d", i), "file": "/tmp/a.txt",
		}, 1); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t, "kafka_connect:\n  url: "+w.URL()+"\n  timeout: 5s\nkafka:\n  name: prod\n  brokers: [\"127.0.0.1:1\"]\n")
	out, summary, err := e.h.connectorStatus(ctx, ConnectorStatusIn{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(out)
	if n := len(raw) + len(summary); n > 80_000 {
		t.Errorf("answer is %d characters", n)
	}
	l := out.Lineage
	if l.RecordedTotal != each || len(l.Recorded) != connect.MaxLineageListed || l.SkippedTotal != each || len(l.Skipped) != connect.MaxLineageListed {
		t.Errorf("recorded %d of %d, skipped %d of %d", len(l.Recorded), l.RecordedTotal, len(l.Skipped), l.SkippedTotal)
	}
	if l.Recorded[0] != "bq-sink-000" || l.EdgesCreated != 2*each {
		t.Errorf("recorded starts %s, %d edges created", l.Recorded[0], l.EdgesCreated)
	}
	if !strings.Contains(summary, fmt.Sprintf("%d connectors' hops recorded", each)) {
		t.Errorf("summary does not count all: %s", summary[strings.Index(summary, "Context graph"):])
	}
}
