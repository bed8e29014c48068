package incidents

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/demo/tables"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// client serves the agent in-process and connects a client to it.
func client(t *testing.T, s *story) *mcp.ClientSession {
	t.Helper()
	srv, err := mcpserver.New(mcpserver.Agent{Name: Name, Instructions: "x", Register: func(m *mcpserver.Server) error { Register(m, s.d); return nil }}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP.Connect(s.ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(s.ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call invokes a tool as a client does and decodes its structured output;
// the SDK has already checked the arguments and the output against the
// tool's schemas.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any, out any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	text := ""
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	if res.IsError {
		t.Fatalf("%s failed: %s", name, text)
	}
	if out != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s output: %v", name, err)
		}
	}
	return text
}

func callErr(t *testing.T, cs *mcp.ClientSession, name string, args any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return err.Error()
	}
	if !res.IsError {
		t.Fatalf("%s succeeded; want a tool error", name)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// TestToolsThroughMCP drives story A through every tool as a client does,
// so each call's arguments pass its input schema and each structured
// output its output schema.
func TestToolsThroughMCP(t *testing.T) {
	s := newStory(t, "billing")
	cs := client(t, s)
	tools, err := cs.ListTools(s.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	want := []string{"close_incident", "define_metric", "diagnose_incident", "get_incident", "get_incident_history", "get_receipt",
		"list_changes", "list_incidents", "list_metrics", "list_routine_runs", "monitor_metrics", "propose_remediation", "record_change", "remediate", "request_confirmation"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	// A pushed metric with a week of history, then a normal point.
	call(t, cs, "define_metric", map[string]any{"name": "billed_accounts", "description": "accounts with usage in the hour",
		"asset": "duckdb://usage.usage_hourly", "unit": "accounts"}, nil)
	var points []map[string]any
	for h := 7 * 24; h > 0; h-- {
		points = append(points, map[string]any{"at": s.tl.Day.Add(-time.Duration(h) * time.Hour).Format(time.RFC3339), "value": 350 + h%3})
	}
	call(t, cs, "monitor_metrics", map[string]any{"metric": "billed_accounts", "points": points, "backfill": true}, nil)
	var mon struct {
		Recorded  int   `json:"recorded"`
		Incidents []any `json:"incidents"`
	}
	call(t, cs, "monitor_metrics", map[string]any{"metric": "billed_accounts", "points": []any{map[string]any{"at": s.tl.Day.Add(13 * time.Hour).Format(time.RFC3339), "value": 351}}}, &mon)
	if mon.Recorded != 1 || len(mon.Incidents) != 0 {
		t.Errorf("monitor = %+v", mon)
	}
	// A metric computed by SQL on the warehouse, per hour over a window. It
	// is tied to an asset outside the incident's scope: on the landed table
	// it would (rightly) fail the verification below, since the fix
	// replaces that table rather than repairing it.
	call(t, cs, "define_metric", map[string]any{"name": "egress_per_hour", "description": "bytes billed per hour", "asset": "duckdb://crm.accounts",
		"warehouse": "demo", "sql": "SELECT window_start AS bucket, SUM(egress_bytes) AS value FROM usage.usage_hourly GROUP BY 1",
		"value_column": "value", "time_column": "bucket", "direction": "down"}, nil)
	var computed struct {
		Recorded int `json:"recorded"`
		Points   []struct {
			Verdict string `json:"verdict"`
		} `json:"points"`
		PointSummary struct {
			Count int `json:"count"`
		} `json:"point_summary"`
	}
	call(t, cs, "monitor_metrics", map[string]any{"metric": "egress_per_hour", "backfill": true,
		"window": map[string]any{"start": s.tl.Day.Add(-7 * 24 * time.Hour).Format(time.RFC3339), "end": s.tl.Day.Format(time.RFC3339)}}, &computed)
	if computed.Recorded != 7*24 || computed.PointSummary.Count != 7*24 || len(computed.Points) != 0 {
		t.Errorf("backfilled %d hours (summary %d, points echoed %d), want a week summarised, no points echoed",
			computed.Recorded, computed.PointSummary.Count, len(computed.Points))
	}
	computed.Points = nil
	call(t, cs, "monitor_metrics", map[string]any{"metric": "egress_per_hour", "include_points": true,
		"window": map[string]any{"start": s.tl.Day.Add(10 * time.Hour).Format(time.RFC3339), "end": s.tl.Day.Add(12 * time.Hour).Format(time.RFC3339)}}, &computed)
	if computed.Recorded != 2 || len(computed.Points) != 2 || computed.Points[0].Verdict == "" || computed.PointSummary.Count != 2 {
		t.Errorf("computed %+v", computed)
	}
	var metrics ListMetricsOut
	call(t, cs, "list_metrics", map[string]any{}, &metrics)
	if len(metrics.Metrics) != 2 {
		t.Errorf("metrics %+v", metrics.Metrics)
	}
	call(t, cs, "record_change", map[string]any{"at": s.tl.Day.Add(9 * time.Hour).Format(time.RFC3339), "kind": "config", "system": "airflow",
		"assets": []string{"airflow://dag/sync_metered_usage_to_stripe"}, "summary": "pool size 4 -> 8"}, nil)
	var changes struct {
		Changes []struct {
			Summary string `json:"summary"`
		} `json:"changes"`
	}
	call(t, cs, "list_changes", map[string]any{"since": s.tl.Day.Format(time.RFC3339)}, &changes)
	if len(changes.Changes) != 4 || changes.Changes[3].Summary != "pool size 4 -> 8" {
		t.Errorf("today's changes %+v", changes.Changes)
	}

	id := openBilling(s)
	var list ListIncidentsOut
	call(t, cs, "list_incidents", map[string]any{}, &list)
	var diag DiagnoseOut
	text := call(t, cs, "diagnose_incident", map[string]any{"incident": id}, &diag)
	if !strings.Contains(text, "version 12") || diag.BlastRadius.Critical == 0 {
		t.Errorf("diagnosis: %s", text)
	}
	call(t, cs, "get_incident_history", map[string]any{"asset": "duckdb://usage.usage_hourly"}, nil)
	var prop ProposeOut
	call(t, cs, "propose_remediation", map[string]any{"incident": id, "proposals": billingProposals(t, s)}, &prop)
	var inc IncidentOut
	call(t, cs, "get_incident", map[string]any{"incident": id}, &inc)
	if inc.Incident.Status != "proposed" || len(inc.Proposals) != 4 || !strings.Contains(inc.Next, "waiting for decisions") {
		t.Errorf("incident %s, next %q", inc.Incident.Status, inc.Next)
	}
	for _, p := range prop.Proposals {
		s.decide(p.ID, p.Approver, approvals.VerdictApprove)
	}
	s.clk.Set(s.tl.Fix)
	if err := tables.ApplyBillingFix(s.ctx, s.whPath, s.tl.Fix); err != nil {
		t.Fatal(err)
	}
	s.clk.Set(s.tl.Verify)
	var rem RemediateOut
	call(t, cs, "remediate", map[string]any{"incident": id}, &rem)
	if !rem.Verified {
		t.Fatalf("not verified: %s", rem.Reason)
	}
	var rec ReceiptOut
	call(t, cs, "get_receipt", map[string]any{"id": id}, &rec)
	if !rec.Intact || len(rec.Entries) < 10 {
		t.Errorf("receipt intact %v, %d entries", rec.Intact, len(rec.Entries))
	}
	call(t, cs, "close_incident", map[string]any{"incident": id}, nil)

	// Bad input reaches the model as a tool error saying what is valid.
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"monitor_metrics", map[string]any{"metric": "billed_acounts", "points": points[:1]}, "closest: billed_accounts"},
		{"define_metric", map[string]any{"name": "x", "description": "d", "asset": "duckdb://a.b", "warehouse": "demo", "sql": "DELETE FROM usage.usage_hourly"}, "SELECT or WITH"},
		{"define_metric", map[string]any{"name": "x", "description": "d", "asset": "duckdb://a.b", "warehouse": "demo", "sql": "SELECT 1 AS value; DROP TABLE t"}, "one statement"},
		{"record_change", map[string]any{"at": s.tl.Verify.Add(time.Hour).Format(time.RFC3339), "kind": "deploy", "system": "x", "assets": []string{"a://b"}, "summary": "s"}, "in the future"},
		{"monitor_metrics", map[string]any{"metric": "egress_per_hour", "window": map[string]any{"start": s.tl.Day.Add(12 * time.Hour).Format(time.RFC3339), "end": s.tl.Day.Add(10 * time.Hour).Format(time.RFC3339)}}, "before or when it starts"},
		{"monitor_metrics", map[string]any{"metric": "egress_per_hour", "window": map[string]any{"start": s.tl.Day.Format(time.RFC3339), "end": s.tl.Day.Add(48 * time.Hour).Format(time.RFC3339)}}, "in the future"},
		{"monitor_metrics", map[string]any{"metric": "billed_accounts", "points": []any{map[string]any{"at": s.tl.Day.Add(48 * time.Hour).Format(time.RFC3339), "value": 1}}}, "in the future"},
		{"get_incident", map[string]any{"incident": "INC-77"}, "closest: " + id},
		{"get_receipt", map[string]any{"id": "INC-77"}, "closest: " + id},
		{"get_incident", map[string]any{"incident": id, "approved_by": "sam"}, "approved_by"},
	} {
		if got := callErr(t, cs, c.tool, c.args); !strings.Contains(got, c.want) {
			t.Errorf("%s(%v) error %q does not contain %q", c.tool, c.args, got, c.want)
		}
	}
}
