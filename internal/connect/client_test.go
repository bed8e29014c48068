package connect_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/connect"
	"github.com/dataworkers/dw/internal/connect/connecttest"
	"github.com/dataworkers/dw/internal/rest/resttest"
)

// fixtureWorker answers with the captured REST bodies, verbatim, so the
// client is proven on real Connect output rather than on our fake's.
func fixtureWorker(t *testing.T) *connect.Client {
	t.Helper()
	routes := map[string]string{
		"GET /connectors?expand=status&expand=info":                                                       "sourcelab__getConnectorsWithAllExpandedMetadata.json",
		"GET /connectors/My Test Connector/status":                                                        "sourcelab__getConnectorStatus.json",
		"GET /connectors/hdfs-sink-connector/status":                                                      "jcustenborder__statusConnector.json",
		"GET /connectors/MyTestConnector/tasks/0/status":                                                  "sourcelab__getConnectorTaskStatus.json",
		"GET /connector-plugins":                                                                          "sourcelab__getConnectorPlugins.json",
		"PUT /connector-plugins/io.confluent.connect.activemq.ActiveMQSourceConnector/config/validate":    "jcustenborder__validate.json",
		"PUT /connector-plugins/org.apache.kafka.connect.tools.VerifiableSourceConnector/config/validate": "sourcelab__putConnectorPluginConfigValidate.json",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Method + " " + r.URL.Path
		if r.URL.RawQuery != "" {
			key += "?" + r.URL.RawQuery
		}
		name, ok := routes[key]
		status := http.StatusOK
		if !ok {
			name, status = "sourcelab__errorResourceNotFound.json", http.StatusNotFound
		}
		body, err := connecttest.Fixture(name)
		if err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	c, err := connect.NewClient(srv.URL, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientReadsCapturedAnswers(t *testing.T) {
	ctx := context.Background()
	c := fixtureWorker(t)

	all, err := c.ListConnectors(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Info.Name != "MyTestConnector" || all[0].Info.Type != "source" ||
		all[0].Info.Config["tasks.max"] != "3" || len(all[0].Info.Tasks) != 3 || all[0].Info.Tasks[2].Task != 2 {
		t.Fatalf("connectors: %+v", all)
	}
	st := all[0].Status
	if st.Connector.State != "RUNNING" || st.Connector.WorkerID != "127.0.0.1:8083" || len(st.Tasks) != 3 ||
		st.Tasks[0].State != "FAILED" || st.Tasks[0].Trace != "trace0" || st.Tasks[2].State != "PAUSED" {
		t.Fatalf("status: %+v", st)
	}
	r := connect.Fold(all[0], nil)
	if r.Health != connect.HealthDegraded || r.FailedTasks != 1 || r.Flows[0].Topic != "test-topic" {
		t.Fatalf("folded: %+v", r)
	}

	s, err := c.Status(ctx, "My Test Connector")
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "My Test Connector" || s.Type != "unknown" || len(s.Tasks) != 0 || s.Connector.WorkerID != "192.168.86.201:8083" {
		t.Fatalf("status: %+v", s)
	}
	s, err = c.Status(ctx, "hdfs-sink-connector")
	if err != nil {
		t.Fatal(err)
	}
	if s.Tasks[1].ID != 1 || s.Tasks[1].State != "FAILED" || s.Tasks[1].Trace != "org.apache.kafka.common.errors.RecordTooLargeException\n" {
		t.Fatalf("status: %+v", s)
	}

	ts, err := c.TaskStatus(ctx, "MyTestConnector", 0)
	if err != nil {
		t.Fatal(err)
	}
	if ts.State != "FAILED" || !strings.HasPrefix(ts.Trace, "org.apache.kafka.connect.errors.ConnectException: Invalid VerifiableSourceTask configuration\n\tat ") ||
		!strings.Contains(ts.Trace, "Caused by: java.lang.NumberFormatException: null") {
		t.Fatalf("task: %+v", ts)
	}

	ps, err := c.Plugins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Class != "org.apache.kafka.connect.file.FileStreamSinkConnector" || ps[0].Type != "sink" || ps[0].Version != "1.0.0-cp1" {
		t.Fatalf("plugins: %+v", ps)
	}

	v, err := c.Validate(ctx, "io.confluent.connect.activemq.ActiveMQSourceConnector", map[string]string{"tasks.max": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if v.Valid || v.ErrorCount != 5 || len(v.Errors) != 5 || len(v.Groups) != 7 {
		t.Fatalf("validation: %+v", v)
	}
	var fields []string
	for _, e := range v.Errors {
		fields = append(fields, e.Field+"@"+e.Group)
	}
	if got := strings.Join(fields, " "); got != "name@Common activemq.url@ActiveMQ Connection jms.destination.name@ActiveMQ Session kafka.topic@Kafka confluent.topic.bootstrap.servers@Confluent Platform" {
		t.Fatalf("fields: %s", got)
	}
	if v.Errors[3].Errors[0] != `Missing required configuration "kafka.topic" which has no default value.` || !v.Errors[3].Required || v.Errors[3].Value != nil {
		t.Fatalf("kafka.topic: %+v", v.Errors[3])
	}
	if !strings.Contains(v.Summary(), "5 errors validating against io.confluent.connect.activemq.ActiveMQSourceConnector") {
		t.Fatalf("summary %q", v.Summary())
	}

	// Connect's error body comes through.
	_, err = c.Status(ctx, "DoesNotExist")
	if err == nil || !connect.IsNotFound(err) || !strings.Contains(err.Error(), "404: Connector DoesNotExist not found") {
		t.Fatalf("404: %v", err)
	}
}

func newFake(t *testing.T) (*connecttest.Server, *connect.Client) {
	t.Helper()
	fake := connecttest.NewServer()
	t.Cleanup(fake.Close)
	fake.AddPlugin("com.wepay.kafka.connect.bigquery.BigQuerySinkConnector", "sink", "2.5.0")
	if err := fake.AddConnector("member-balances-bq", map[string]string{
		"connector.class": "com.wepay.kafka.connect.bigquery.BigQuerySinkConnector", "tasks.max": "2",
		"topics": "member-balances", "project": "acme", "defaultDataset": "loyalty", "topic2TableMap": "member-balances:member_balances",
	}, 2); err != nil {
		t.Fatal(err)
	}
	if err := fake.AddConnector("jms-in", map[string]string{
		"connector.class": "ActiveMQSource", "kafka.topic": "jms-events",
	}, 1); err != nil {
		t.Fatal(err)
	}
	c, err := connect.NewClient(fake.URL(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return fake, c
}

func TestReportAgainstFakeWorker(t *testing.T) {
	ctx := context.Background()
	fake, c := newFake(t)

	rep, err := c.Report(ctx, connect.StatusParams{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Connectors) != 2 || rep.Connectors[0].Name != "jms-in" || rep.Connectors[1].Health != connect.HealthOK {
		t.Fatalf("report: %+v", rep)
	}
	bq := rep.Connectors[1]
	if bq.Type != "sink" || len(bq.Flows) != 1 || bq.Flows[0].Table != "acme.loyalty.member_balances" || bq.Flows[0].Direction != connect.TopicToTable {
		t.Fatalf("bq: %+v", bq)
	}

	trace := "com.google.cloud.bigquery.BigQueryException: Not found: Dataset acme:loyalty\n\tat com.wepay.kafka.connect.bigquery.write.row.BigQueryWriter.writeRows(BigQueryWriter.java:112)\n"
	if err := fake.SetTaskState("member-balances-bq", 1, connect.StateFailed, trace); err != nil {
		t.Fatal(err)
	}
	rep, err = c.Report(ctx, connect.StatusParams{Connectors: []string{"member-balances-bq"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bq = rep.Connectors[0]
	if bq.Health != connect.HealthDegraded || bq.FailedTasks != 1 || bq.Tasks[1].Trace != trace || bq.Tasks[1].WorkerID != fake.WorkerID() {
		t.Fatalf("degraded: %+v", bq)
	}
	if !strings.Contains(rep.Summary(), "member-balances-bq: degraded (connector RUNNING, 1 of 2 tasks failed); task 1: com.google.cloud.bigquery.BigQueryException: Not found: Dataset acme:loyalty") {
		t.Fatalf("summary: %s", rep.Summary())
	}
	fake.SetTaskState("member-balances-bq", 0, connect.StateFailed, trace)
	if rep, _ = c.Report(ctx, connect.StatusParams{Connectors: []string{"member-balances-bq"}}, nil); rep.Connectors[0].Health != connect.HealthFailed {
		t.Fatalf("all tasks failed: %+v", rep.Connectors[0])
	}
	fake.SetConnectorState("jms-in", connect.StatePaused, "")
	if rep, _ = c.Report(ctx, connect.StatusParams{Connectors: []string{"jms-in"}}, nil); rep.Connectors[0].Health != connect.HealthPaused {
		t.Fatalf("paused: %+v", rep.Connectors[0])
	}

	ts, err := c.TaskStatus(ctx, "member-balances-bq", 1)
	if err != nil || ts.State != connect.StateFailed || ts.Trace != trace {
		t.Fatalf("task status: %+v %v", ts, err)
	}
	_, err = c.TaskStatus(ctx, "member-balances-bq", 7)
	if err == nil || !strings.Contains(err.Error(), "No status found for task member-balances-bq-7") || !strings.Contains(err.Error(), "has tasks [0, 1]") {
		t.Fatalf("unknown task: %v", err)
	}
	_, err = c.Report(ctx, connect.StatusParams{Connectors: []string{"member-balance-bq"}}, nil)
	if err == nil || !strings.Contains(err.Error(), `no connector "member-balance-bq"`) || !strings.Contains(err.Error(), "closest: member-balances-bq") {
		t.Fatalf("unknown connector: %v", err)
	}
	_, err = c.Status(ctx, "jms_in")
	if err == nil || !strings.Contains(err.Error(), "Connector jms_in not found") || !strings.Contains(err.Error(), "closest connectors: jms-in") {
		t.Fatalf("unknown status: %v", err)
	}
	in, err := c.Info(ctx, "jms-in")
	if err != nil || in.Config["kafka.topic"] != "jms-events" || in.Type != "source" {
		t.Fatalf("info: %+v %v", in, err)
	}
}

func TestValidateAgainstFakeWorker(t *testing.T) {
	ctx := context.Background()
	fake, c := newFake(t)
	plugin := "com.wepay.kafka.connect.bigquery.BigQuerySinkConnector"

	v, err := c.Validate(ctx, plugin, map[string]string{"name": "x", "tasks.max": "two"})
	if err != nil {
		t.Fatal(err)
	}
	if v.Valid || v.ErrorCount != 3 {
		t.Fatalf("validation: %+v", v)
	}
	msgs := map[string]string{}
	for _, e := range v.Errors {
		msgs[e.Field] = strings.Join(e.Errors, "|")
	}
	if msgs["tasks.max"] != "Invalid value two for configuration tasks.max: Not a number of type INT" ||
		msgs["topics"] != "Must configure one of topics or topics.regex" || msgs["topics.regex"] != msgs["topics"] {
		t.Fatalf("messages: %v", msgs)
	}

	fake.SetValidationErrors(plugin, map[string][]string{"defaultDataset": {"Dataset acme:loyalty does not exist"}})
	v, err = c.Validate(ctx, plugin, map[string]string{"name": "x", "topics": "member-balances", "defaultDataset": "loyalty"})
	if err != nil {
		t.Fatal(err)
	}
	if v.ErrorCount != 1 || v.Errors[0].Field != "defaultDataset" || *v.Errors[0].Value != "loyalty" {
		t.Fatalf("extra errors: %+v", v)
	}
	fake.SetValidationErrors(plugin, nil)
	v, err = c.Validate(ctx, "BigQuerySink", map[string]string{"name": "x", "topics": "member-balances"})
	if err != nil || !v.Valid || v.Summary() != "config is valid for "+plugin {
		t.Fatalf("valid config through an alias: %+v %v", v, err)
	}

	_, err = c.Validate(ctx, "com.wepay.kafka.connect.bigquery.BigQuerySink", map[string]string{"name": "x"})
	if err == nil || !strings.Contains(err.Error(), "is not installed") || !strings.Contains(err.Error(), "closest: "+plugin) {
		t.Fatalf("unknown plugin: %v", err)
	}
	_, err = c.Validate(ctx, plugin, map[string]string{"connector.class": "io.confluent.connect.activemq.ActiveMQSourceConnector"})
	if err == nil || !strings.Contains(err.Error(), "400: Included connector type") {
		t.Fatalf("mismatched class: %v", err)
	}
	if _, err = c.Validate(ctx, " ", nil); err == nil {
		t.Fatal("empty plugin accepted")
	}
}

func TestUnreachableWorker(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := connect.NewClient("http://"+addr, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListConnectors(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot reach worker at http://"+addr) || !strings.Contains(err.Error(), "timeout 500ms") {
		t.Fatalf("closed port: %v", err)
	}

	// A worker that accepts but never answers.
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hang)
	c, _ = connect.NewClient(slow.URL, 300*time.Millisecond)
	start := time.Now()
	_, err = c.Plugins(context.Background())
	if err == nil || !strings.Contains(err.Error(), "did not answer GET /connector-plugins within 300ms") || time.Since(start) > 3*time.Second {
		t.Fatalf("silent worker: %v", err)
	}

	for _, bad := range []string{"", "localhost:8083", "ftp://x", "http://"} {
		if _, err := connect.NewClient(bad, 0); err == nil || !strings.Contains(err.Error(), "want http://host:8083") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// A worker answering 1 GiB, as a success or as an error, costs at most the
// cap: the call fails as too large instead of exhausting memory.
func TestHugeAnswerIsBounded(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusInternalServerError} {
		srv := resttest.HugeServer(t, status)
		c, err := connect.NewClient(srv.URL, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		resttest.RequireBounded(t, 4*connect.MaxResponseBytes, func() error {
			_, err := c.ListConnectors(context.Background())
			return err
		})
	}
}
