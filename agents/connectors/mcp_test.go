package connectors

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/connect/connecttest"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// TestToolsThroughMCP calls every tool as a client does, so each one's
// arguments pass the input schema and its structured output passes the
// output schema the SDK checks.
func TestToolsThroughMCP(t *testing.T) {
	ctx := context.Background()
	kc := newCluster(t, 1)
	kc.createTopic(t, "api-usage", 2, 1, map[string]string{"min.insync.replicas": "1"})
	kc.produce(t, "api-usage", 10, 0, 1)
	kc.commit(t, "usage-hourly-rollup", "api-usage", map[int32]int64{0: 4, 1: 10})
	reg := billingRegistry(t)
	w := connecttest.NewServer()
	defer w.Close()
	w.AddPlugin(bqSink, "sink", "2.5.0")
	if err := w.AddConnector("bq-usage", map[string]string{"connector.class": bqSink, "topics": "api-usage", "project": "acme", "defaultDataset": "usage"}, 1); err != nil {
		t.Fatal(err)
	}
	jm, _, _ := loyaltyJobManager(t)
	e := newEnv(t, kc.yaml()+registryYAML(reg.URL())+"kafka_connect:\n  url: "+w.URL()+"\nflink:\n  url: "+jm.URL()+"\n")
	e.clk.Set(t0.Add(time.Hour))

	s, err := mcpserver.New(mcpserver.Agent{Name: Name, Instructions: "x", Register: func(s *mcpserver.Server) error { Register(s, e.d); return nil }}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.MCP.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"get_consumer_lag", "get_topic_health", "get_connector_status", "validate_connector_config",
		"list_subjects", "get_latest_schema", "register_stream_schema", "emit_lineage_event", "read_flink_restores"} {
		if !slices.Contains(names, want) {
			t.Errorf("tool %s is not served (tools: %v)", want, names)
		}
	}

	call := func(name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var out map[string]any
		if res.StructuredContent != nil {
			raw, _ := json.Marshal(res.StructuredContent)
			_ = json.Unmarshal(raw, &out)
		}
		return res, out
	}
	text := func(res *mcp.CallToolResult) string {
		if len(res.Content) == 0 {
			return ""
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	ok := func(name string, args map[string]any) map[string]any {
		t.Helper()
		res, out := call(name, args)
		if res.IsError || out == nil {
			t.Fatalf("%s: error %v: %s", name, res.IsError, text(res))
		}
		return out
	}

	if out := ok("get_consumer_lag", map[string]any{"group": "usage-hourly-rollup"}); out["cluster"] != "prod" {
		t.Errorf("lag: %v", out)
	}
	ok("get_topic_health", map[string]any{})
	ok("get_connector_status", map[string]any{})
	ok("validate_connector_config", map[string]any{"plugin": bqSink, "config": map[string]any{"topics": "api-usage"}})
	ok("list_subjects", map[string]any{})
	if out := ok("get_latest_schema", map[string]any{"subject": subject}); out["version"] != float64(12) {
		t.Errorf("latest: %v", out)
	}
	ok("emit_lineage_event", map[string]any{"event": rollupEvent(t)})
	ok("read_flink_restores", map[string]any{"job": "points-balance"})

	// The registration gate, refused and then granted.
	svc := e.approvals()
	g := &gate{env: e, reg: reg, svc: svc}
	p := g.propose(sha(t, v13))
	res, _ := call("register_stream_schema", map[string]any{"subject": subject, "schema": v13, "proposal_id": p.ID})
	if !res.IsError || !strings.Contains(text(res), "dw approve "+p.ID) {
		t.Errorf("pending proposal: %v %s", res.IsError, text(res))
	}
	g.decide(p, approvals.VerdictApprove, "")
	out := ok("register_stream_schema", map[string]any{"subject": subject, "schema": v13, "schema_type": "AVRO", "proposal_id": p.ID})
	if out["registered"] != true || out["version"] != float64(13) {
		t.Errorf("registered: %v", out)
	}
	res, _ = call("register_stream_schema", map[string]any{"subject": subject, "schema": v13, "schema_type": "avro", "proposal_id": p.ID})
	if !res.IsError {
		t.Error("a schema_type outside the enum was accepted")
	}
}
