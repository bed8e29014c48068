package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dataworkers/dw/agents"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/connect/connecttest"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/flink/flinktest"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/orchestrate/orchestratetest"
	"github.com/dataworkers/dw/internal/packload"
	"github.com/dataworkers/dw/internal/registry/registrytest"
	"github.com/dataworkers/dw/internal/warehouses"
)

// A world is the embedded default (the demo packs seeded into the store,
// the demo DuckDB as its warehouse) with every system an agent can reach
// faked on loopback, as the connectors' own tests fake them: Kafka (kfake),
// a Schema Registry, a Kafka Connect worker, a Flink JobManager, an
// OpenLineage endpoint and the four orchestrators. Every agent is served
// over one home, so what one agent records the next one reads.
type world struct {
	t        *testing.T
	home     string
	cfg      *config.Config
	kafka    *kafkaFake
	registry *registrytest.Server
	connect  *connecttest.Server
	flink    *flinktest.Server
	airflow  *orchestratetest.AirflowServer
	dagster  *orchestratetest.DagsterServer
	dbt      *orchestratetest.DBTCloudServer
	sfn      *orchestratetest.StepFunctionsServer

	sessions map[string]*mcp.ClientSession // by tool name
	agentOf  map[string]string             // tool name -> agent name
	deps     map[string]*deps.Deps         // by agent name

	mu    sync.Mutex
	sizes map[string]int // the largest answer seen, by tool
}

// The world's fixed names.
const (
	worldSubject  = "api-usage-value"
	worldTopic    = "api-usage"
	worldGroup    = "usage-hourly-rollup"
	worldSink     = "com.wepay.kafka.connect.bigquery.BigQuerySinkConnector"
	worldFlinkJob = "usage-hourly-rollup"
	worldDAG      = "sync_metered_usage_to_stripe"
	worldDagster  = "billing_location/__repository__/refresh_usage"
	worldDBTJob   = int64(40000)
	worldSFN      = "arn:aws:states:us-east-1:123456789012:stateMachine:usage-backfill"
	worldDBTToken = "dbtc_test_token"
)

// Version 1 of the world's subject, and a backward-compatible version 2.
const (
	worldV1 = `{"type":"record","name":"ApiUsage","fields":[{"name":"account_id","type":"string"},{"name":"response_bytes","type":"long"}]}`
	worldV2 = `{"type":"record","name":"ApiUsage","fields":[{"name":"account_id","type":"string"},{"name":"response_bytes","type":"long"},{"name":"region","type":["null","string"],"default":null}]}`
)

// kafkaFake is a kfake cluster with an admin and a producer client.
type kafkaFake struct {
	addrs []string
	adm   *kadm.Client
	prod  *kgo.Client
}

func newKafka(t *testing.T) *kafkaFake {
	t.Helper()
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
	return &kafkaFake{addrs: kf.ListenAddrs(), adm: kadm.NewClient(prod), prod: prod}
}

// topic creates a topic, writes n records to each partition and commits
// group's offsets at half of them.
func (k *kafkaFake) topic(t *testing.T, name string, partitions int32, n int, group string) {
	t.Helper()
	ctx := context.Background()
	resp, err := k.adm.CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	var recs []*kgo.Record
	offsets := kadm.Offsets{}
	for p := range partitions {
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: name, Partition: p, Value: fmt.Appendf(nil, "%d", i)})
		}
		offsets.Add(kadm.Offset{Topic: name, Partition: p, At: int64(n / 2), LeaderEpoch: -1})
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := k.prod.ProduceSync(pctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", name, err)
	}
	if group != "" {
		if err := k.adm.CommitAllOffsets(ctx, group, offsets); err != nil {
			t.Fatalf("commit %s: %v", group, err)
		}
	}
}

// newWorld starts the fakes, configures the embedded default to reach
// them, and serves every agent over home.
func newWorld(t *testing.T) *world {
	t.Helper()
	home := t.TempDir()
	t.Setenv("DW_HOME", home)
	t.Setenv("WORLD_AIRFLOW_USER", "dw")
	t.Setenv("WORLD_AIRFLOW_PASS", "airflow-pass")
	t.Setenv("WORLD_DBT_TOKEN", worldDBTToken)
	t.Setenv("WORLD_AWS_KEY", orchestratetest.StepFunctionsAccessKey)
	t.Setenv("WORLD_AWS_SECRET", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
	w := &world{t: t, home: home, sessions: map[string]*mcp.ClientSession{}, agentOf: map[string]string{},
		deps: map[string]*deps.Deps{}, sizes: map[string]int{}}

	w.kafka = newKafka(t)
	w.kafka.topic(t, worldTopic, 2, 10, worldGroup)

	w.registry = registrytest.New(t)
	if _, err := w.registry.SeedVersions(worldSubject, compat.Backward, registrytest.Seeded{Schema: worldV1, Version: 1}); err != nil {
		t.Fatal(err)
	}

	w.connect = connecttest.NewServer()
	t.Cleanup(w.connect.Close)
	w.connect.AddPlugin(worldSink, "sink", "2.5.0")
	if err := w.connect.AddConnector("bq-usage", map[string]string{"connector.class": worldSink, "topics": worldTopic, "project": "acme", "defaultDataset": "usage"}, 1); err != nil {
		t.Fatal(err)
	}

	w.flink = flinktest.NewServer()
	t.Cleanup(w.flink.Close)
	w.flinkRestores(t, worldFlinkJob, 1)

	openlineage := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rw.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(openlineage.Close)

	w.airflow = orchestratetest.NewAirflowServer(worldDAG)
	w.airflow.RequireBasicAuth("dw", "airflow-pass")
	w.dagster = orchestratetest.NewDagsterServer(worldDagster)
	w.dbt = orchestratetest.NewDBTCloudServer(worldDBTJob)
	w.dbt.RequireToken(worldDBTToken)
	w.sfn = orchestratetest.NewStepFunctionsServer(worldSFN)
	w.sfn.RequireAccessKey(orchestratetest.StepFunctionsAccessKey)
	t.Cleanup(func() { w.airflow.Close(); w.dagster.Close(); w.dbt.Close(); w.sfn.Close() })

	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Kafka = &config.Kafka{Name: "prod", Brokers: w.kafka.addrs, Timeout: 5 * time.Second}
	cfg.SchemaRegistry = &config.Service{URL: w.registry.URL(), Timeout: 5 * time.Second}
	cfg.KafkaConnect = &config.Service{URL: w.connect.URL(), Timeout: 5 * time.Second}
	cfg.Flink = &config.Service{URL: w.flink.URL(), Timeout: 5 * time.Second}
	cfg.OpenLineage = &config.Service{URL: openlineage.URL, Timeout: 5 * time.Second}
	cfg.Orchestrators = config.Orchestrators{
		Dagster:       &config.Service{URL: w.dagster.URL(), Timeout: 5 * time.Second},
		Airflow:       &config.Service{URL: w.airflow.URL(), UsernameEnv: "WORLD_AIRFLOW_USER", PasswordEnv: "WORLD_AIRFLOW_PASS", Timeout: 5 * time.Second},
		DBTCloud:      &config.Service{URL: w.dbt.URL(), TokenEnv: "WORLD_DBT_TOKEN", AccountID: orchestratetest.DBTCloudAccount, Timeout: 5 * time.Second},
		StepFunctions: &config.Service{URL: w.sfn.URL(), Region: "us-east-1", UsernameEnv: "WORLD_AWS_KEY", PasswordEnv: "WORLD_AWS_SECRET", Timeout: 5 * time.Second},
	}
	// The demo's domains leave Dagster and Step Functions jobs to nobody:
	// the billing owner governs them here, as their team would.
	cfg.Domains = append(cfg.Domains, config.Domain{Name: "orchestration", Assets: []string{"dagster://**", "stepfunctions://**"},
		Autonomy: "L2", Owners: []string{"bea"}, Approvers: []string{"bea"}, ApprovalExpiry: 4 * time.Hour})
	w.cfg = cfg

	// The agents act by the demo's clock, as on a newcomer's machine.
	clk := config.DemoClockFor(cfg, clock.System{})
	for _, e := range agents.All() {
		w.serve(e, clk)
	}
	return w
}

// flinkRestores gives job n restores from savepoints, each a redeploy.
func (w *world) flinkRestores(t *testing.T, job string, n int) {
	t.Helper()
	start := time.Now().Add(-time.Duration(n+2) * time.Hour).UTC().Truncate(time.Second)
	prev, err := w.flink.AddJob(flinktest.Job{Name: job, Start: start, Tasks: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		at := start.Add(time.Duration(i+1) * time.Hour)
		path := fmt.Sprintf("s3://flink/savepoints/%s/savepoint-%06d", job, i)
		sp, err := w.flink.AddCheckpoint(prev, flinktest.Checkpoint{Savepoint: true, Trigger: at, Duration: time.Second, Size: 1 << 20, ExternalPath: path})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.flink.SetState(prev, "FINISHED", at.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		next, err := w.flink.AddJob(flinktest.Job{Name: job, Start: at.Add(2 * time.Minute), Tasks: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.flink.Restore(next, sp, at.Add(2*time.Minute), true, path); err != nil {
			t.Fatal(err)
		}
		prev = next
	}
}

// serve connects a client to one agent. The client can show a
// confirmation form: its person approves whatever request_confirmation
// puts to them, as the approver at this terminal would.
func (w *world) serve(e agents.Entry, clk clock.Clock) {
	t := w.t
	t.Helper()
	d := deps.New(e.Name, w.cfg, clk, nil)
	d.SeedStore = packload.SeedDefault
	d.OpenWarehouse = warehouses.Open
	t.Cleanup(func() { d.Close() })
	w.deps[e.Name] = d
	a := e.Agent()
	a.Register = func(s *mcpserver.Server) error { e.Register(s, d); return nil }
	s, err := mcpserver.New(a, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.MCP.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	opts := &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve", "reason": "checked in the test"}}, nil
	}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		w.sessions[tool.Name] = cs
		w.agentOf[tool.Name] = e.Name
	}
}

// call calls a tool, requires a successful answer with structured output
// within maxAnswer characters, and returns the structured output.
func (w *world) call(tool string, args map[string]any) map[string]any {
	t := w.t
	t.Helper()
	cs, ok := w.sessions[tool]
	if !ok {
		t.Fatalf("no agent serves %s", tool)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		// The backstop (mcpserver) refuses an answer over the bound: the
		// rest of the script can still measure the other tools.
		if strings.Contains(err.Error(), "bound.Answer") {
			var n int
			if i := strings.Index(err.Error(), " answered "); i >= 0 {
				fmt.Sscan(err.Error()[i+len(" answered "):], &n)
			}
			w.mu.Lock()
			w.sizes[tool] = max(w.sizes[tool], n)
			w.mu.Unlock()
			t.Errorf("%s %s: %v", tool, brief(args), err)
			return nil
		}
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	n, text := answerSize(t, res)
	w.mu.Lock()
	w.sizes[tool] = max(w.sizes[tool], n)
	w.mu.Unlock()
	if res.IsError {
		t.Fatalf("%s %s: failed: %.600s", tool, brief(args), text)
	}
	var out map[string]any
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil || out == nil {
		t.Fatalf("%s: no structured output (%v): %.300s", tool, err, raw)
	}
	if n > maxAnswer {
		t.Errorf("%s %s: answer is %d characters, over %d", tool, brief(args), n, maxAnswer)
	}
	t.Logf("%-32s %7d characters", tool, n)
	return out
}

// report logs the largest answer of each agent.
func (w *world) report() {
	w.t.Helper()
	largest := map[string]string{}
	for tool, n := range w.sizes {
		a := w.agentOf[tool]
		if cur, ok := largest[a]; !ok || n > w.sizes[cur] {
			largest[a] = tool
		}
	}
	for _, e := range agents.All() {
		tool := largest[e.Name]
		w.t.Logf("largest answer of %-20s %-32s %7d characters", e.Name, tool, w.sizes[tool])
	}
}

// str reads a string at a path of a structured answer ("proposals.0.id").
func str(t *testing.T, out map[string]any, path string) string {
	t.Helper()
	var cur any = out
	for _, part := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[part]
		case []any:
			var i int
			if _, err := fmt.Sscan(part, &i); err != nil || i >= len(c) {
				t.Fatalf("%s: no item %s in %.300v", path, part, c)
			}
			cur = c[i]
		default:
			t.Fatalf("%s: %s is not reached in %.300v", path, part, out)
		}
	}
	s, ok := cur.(string)
	if !ok || s == "" {
		t.Fatalf("%s: %v is not a string", path, cur)
	}
	return s
}
