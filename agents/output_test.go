package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/agents"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/packload"
	"github.com/dataworkers/dw/internal/warehouses"
)

// maxAnswer is the most a tool answer (text plus structured output) may
// hold by default: about 20k tokens. Claude Code warns above 25k and cuts.
const maxAnswer = 80_000

// minimalArgs are the smallest valid arguments of every tool, naming the
// embedded default's demo data. A new tool must be added here, so its
// default answer is measured too.
var minimalArgs = map[string]map[string]any{
	// dw-quality
	"list_tables":              {},
	"run_quality_check":        {"table": "usage.usage_hourly", "no_incident": true},
	"set_quality_expectations": {"table": "usage.usage_hourly"},
	"get_quality_history":      {"table": "usage.usage_hourly", "metric": "row_count"},
	// dw-incidents
	"define_metric":        {"name": "size_probe", "description": "probe", "asset": "duckdb://usage.usage_hourly"},
	"list_metrics":         {},
	"monitor_metrics":      {"metric": "size_probe", "points": []any{map[string]any{"at": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "value": 1}}},
	"record_change":        {"at": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "kind": "deploy", "system": "dbt", "assets": []string{"duckdb://usage.usage_hourly"}, "summary": "probe"},
	"list_changes":         {},
	"list_routine_runs":    {},
	"list_incidents":       {},
	"get_incident":         {"incident": "INC-1"},
	"diagnose_incident":    {"incident": "INC-1"},
	"get_incident_history": {"asset": "duckdb://usage.usage_hourly"},
	"propose_remediation":  {"incident": "INC-1", "proposals": []any{}},
	"remediate":            {"incident": "INC-1"},
	"get_receipt":          {"id": "INC-1"},
	"close_incident":       {"incident": "INC-404"},
	"request_confirmation": {"proposal": "P-404"},
	// dw-context-catalog
	"blast_radius_analysis":        {"asset": "schema://api-usage-value"},
	"trace_cross_platform_lineage": {"asset": "flink://usage-hourly-rollup"},
	"get_lineage":                  {"asset": "duckdb://usage.usage_hourly"},
	"search_assets":                {"query": "usage"},
	"get_owners":                   {"assets": []string{"duckdb://usage.usage_hourly"}},
	"record_lineage":               {},
	"import_dbt_manifest":          {},
	"import_openlineage_events":    {},
	// dw-schema
	"check_compatibility":  {"subject": "api-usage-value", "schema": `{"type":"record","name":"x","fields":[]}`},
	"assess_impact":        {"asset": "schema://api-usage-value"},
	"detect_schema_change": {"table": "usage.usage_hourly"},
	"list_schema_changes":  {},
	"get_schema_snapshot":  {"table": "usage.usage_hourly"},
	// dw-connectors
	"get_consumer_lag":               {},
	"get_topic_health":               {},
	"get_connector_status":           {},
	"validate_connector_config":      {"plugin": "x", "config": map[string]any{}},
	"list_subjects":                  {},
	"get_latest_schema":              {"subject": "api-usage-value"},
	"register_stream_schema":         {"subject": "api-usage-value", "schema": "{}", "proposal_id": "P-404"},
	"emit_lineage_event":             {"event": map[string]any{}},
	"read_flink_restores":            {"job": "usage-hourly-rollup"},
	"get_run_status":                 {"run_key": "none"},
	"trigger_airflow_dag":            {"dag_id": "none"},
	"trigger_dagster_job":            {"repository_location_name": "none", "job_name": "none"},
	"trigger_dbt_cloud_job":          {"job_id": 1},
	"start_step_functions_execution": {"state_machine_arn": "arn:aws:states:us-east-1:1:stateMachine:none"},
}

// mustAnswer lists the list-shaped tools that must succeed on the demo
// data, so the size check measures a real answer, not an error.
var mustAnswer = map[string]bool{
	"list_tables": true, "list_metrics": true, "list_changes": true, "list_incidents": true,
	"get_incident_history": true, "blast_radius_analysis": true, "trace_cross_platform_lineage": true,
	"get_lineage": true, "search_assets": true, "get_owners": true, "list_schema_changes": true,
	"define_metric": true, "monitor_metrics": true, "list_routine_runs": true, "get_quality_history": true,
}

// demoSession serves one agent in-process over the embedded default (demo
// packs seeded into the store, the demo DuckDB as its warehouse), as a
// newcomer's first session would, with home shared by every agent.
func demoSession(t *testing.T, e agents.Entry, home string) *mcp.ClientSession {
	t.Helper()
	t.Setenv("DW_HOME", home)
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	d := deps.New(e.Name, cfg, clock.System{}, nil)
	d.SeedStore = packload.SeedDefault
	d.OpenWarehouse = warehouses.Open
	t.Cleanup(func() { d.Close() })
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
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// answerSize is what a client hands the model: the text plus the
// structured output.
func answerSize(t *testing.T, res *mcp.CallToolResult) (int, string) {
	t.Helper()
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	return text.Len() + len(raw), text.String()
}

// TestDefaultAnswersAreBounded calls every tool of every agent with its
// minimal arguments on the demo data and checks each answer stays under
// maxAnswer characters.
func TestDefaultAnswersAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the demo packs")
	}
	home := t.TempDir()
	ctx := context.Background()
	called := map[string]bool{}
	for _, e := range agents.All() {
		cs := demoSession(t, e, home)
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		// A tool that needs another's work first (the history a quality
		// check records) is called again after the rest.
		var again []string
		call := func(name string, last bool) {
			args, ok := minimalArgs[name]
			if !ok {
				t.Errorf("%s: no minimal arguments in minimalArgs; add them so its default answer is measured", name)
				return
			}
			called[name] = true
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: args})
			cancel()
			if err != nil {
				t.Errorf("%s: protocol error %v", name, err)
				return
			}
			n, text := answerSize(t, res)
			if n > maxAnswer {
				t.Errorf("%s: default answer is %d characters, over %d", name, n, maxAnswer)
			}
			if mustAnswer[name] && res.IsError {
				if !last {
					again = append(again, name)
					return
				}
				t.Errorf("%s: failed on the demo data: %.300s", name, text)
			}
			t.Logf("%-32s %6d characters (error %v)", name, n, res.IsError)
		}
		for _, tool := range tools.Tools {
			call(tool.Name, false)
		}
		for _, name := range again {
			call(name, true)
		}
	}
	for name := range minimalArgs {
		if !called[name] {
			t.Errorf("minimalArgs names %s, which no agent serves", name)
		}
	}
}

// TestLongInputListsAreRefused: a list argument over its maximum is
// refused with an error naming the argument and the bound, before any
// work; one at the maximum is answered within the size bound.
func TestLongInputListsAreRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the demo packs")
	}
	home := t.TempDir()
	for _, e := range agents.All() {
		if e.Name != "dw-context-catalog" {
			continue
		}
		cs := demoSession(t, e, home)
		many := make([]string, 10_000)
		for i := range many {
			many[i] = fmt.Sprintf("duckdb://usage.table_%05d", i)
		}
		text := errText(t, cs, "get_owners", map[string]any{"assets": many})
		if !strings.Contains(text, "assets") || !strings.Contains(text, "at most 100") {
			t.Errorf("10,000 assets: error does not name the argument and its bound: %.300s", text)
		}
		same := make([]string, 100)
		for i := range same {
			same[i] = "duckdb://usage.usage_hourly"
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_owners", Arguments: map[string]any{"assets": same}})
		if err != nil || res.IsError {
			t.Fatalf("100 assets: %v %+v", err, res)
		}
		if n, _ := answerSize(t, res); n > maxAnswer {
			t.Errorf("100 assets: answer is %d characters", n)
		}
	}
}
