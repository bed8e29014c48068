package agents_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/orchestrate"
)

// ids are what earlier answers of a script gave later calls: the incident
// a check opened, proposal ids, run keys.
type ids map[string]string

// get is the id under key, or fallback when no answer gave one (the
// arguments read without running the script, for minimalArgs).
func (v ids) get(key, fallback string) string {
	if s, ok := v[key]; ok {
		return s
	}
	return fallback
}

// step is one call of the script: a tool with its smallest arguments that
// answer on the demo data, and what its answer gives later steps.
type step struct {
	tool string
	args func(v ids) map[string]any
	keep func(w *world, v ids, out map[string]any)
}

// The runs the rerun proposals bind, by trigger tool.
var worldRuns = []struct {
	tool, system, target string
	args                 map[string]any
}{
	{"trigger_airflow_dag", "airflow", worldDAG, map[string]any{"dag_id": worldDAG}},
	{"trigger_dagster_job", "dagster", worldDagster, map[string]any{"repository_location_name": "billing_location", "job_name": "refresh_usage"}},
	{"trigger_dbt_cloud_job", "dbt_cloud", strconv.FormatInt(worldDBTJob, 10), map[string]any{"job_id": worldDBTJob}},
	{"start_step_functions_execution", "step_functions", worldSFN, map[string]any{"state_machine_arn": worldSFN}},
}

func fixed(args map[string]any) func(ids) map[string]any {
	return func(ids) map[string]any { return args }
}

// rollupEvent is an OpenLineage run event of the demo's rollup job.
func rollupEvent() map[string]any {
	return map[string]any{
		"eventType": "RUNNING", "eventTime": "2026-03-10T14:10:00.000Z",
		"run":       map[string]any{"runId": "0192963f-f6f8-71c0-8380-500bc70883ee"},
		"job":       map[string]any{"namespace": "flink-prod", "name": "usage-hourly-rollup"},
		"inputs":    []any{map[string]any{"namespace": "kafka://broker-1:9092", "name": "api-usage"}},
		"outputs":   []any{map[string]any{"namespace": "kafka://broker-1:9092", "name": "usage-hourly"}},
		"producer":  "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/flink",
		"schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent",
	}
}

// script calls every tool of every agent once, in an order where each
// finds what it needs: a quality check opens the incident the incident
// tools work on, its proposals are approved by the person at the client
// (request_confirmation), and the connectors carry them out.
func script() []step {
	// An hour before the demo's "now" (15:05 of its incident day).
	hour := func() string {
		return config.DemoIncidentDay(time.Now()).Add(config.DemoIncidentTime - time.Hour).Format(time.RFC3339)
	}
	incident := func(v ids) string { return v.get("incident", "INC-1") }
	dbtManifest, _ := filepath.Abs("../internal/lineage/ingest/testdata/dbt/whyline-denver__manifest.json")
	steps := []step{
		// dw-quality
		{tool: "list_tables", args: fixed(map[string]any{})},
		{tool: "run_quality_check", args: fixed(map[string]any{"table": "usage.usage_hourly", "period": "today", "bucket": "hour"}),
			keep: func(w *world, v ids, out map[string]any) { v["incident"] = str(w.t, out, "incidents.0.id") }},
		{tool: "set_quality_expectations", args: fixed(map[string]any{"table": "usage.usage_hourly"})},
		{tool: "get_quality_history", args: fixed(map[string]any{"table": "usage.usage_hourly", "metric": "row_count"})},
		// dw-incidents
		{tool: "define_metric", args: fixed(map[string]any{"name": "size_probe", "description": "probe", "asset": "duckdb://usage.usage_hourly"})},
		{tool: "list_metrics", args: fixed(map[string]any{})},
		{tool: "monitor_metrics", args: func(ids) map[string]any {
			return map[string]any{"metric": "size_probe", "points": []any{map[string]any{"at": hour(), "value": 1}}}
		}},
		// A second incident, the loyalty pack's team metric (its history
		// recorded first), is the one closed at the end.
		{tool: "monitor_metrics", args: func(ids) map[string]any {
			day := config.DemoIncidentDay(time.Now())
			return map[string]any{"metric": "avg_balance_active_last_hour", "backfill": true,
				"window": map[string]any{"start": day.AddDate(0, 0, -21).Format(time.RFC3339), "end": day.Format(time.RFC3339)}}
		}},
		{tool: "monitor_metrics", args: func(ids) map[string]any {
			day := config.DemoIncidentDay(time.Now())
			return map[string]any{"metric": "avg_balance_active_last_hour",
				"window": map[string]any{"start": day.Format(time.RFC3339), "end": day.Add(15 * time.Hour).Format(time.RFC3339)}}
		}, keep: func(w *world, v ids, out map[string]any) { v["second"] = str(w.t, out, "incidents.0.id") }},
		{tool: "record_change", args: func(ids) map[string]any {
			return map[string]any{"at": hour(), "kind": "deploy", "system": "dbt", "assets": []string{"duckdb://usage.usage_hourly"}, "summary": "probe"}
		}},
		{tool: "list_changes", args: fixed(map[string]any{})},
		{tool: "list_routine_runs", args: fixed(map[string]any{})},
		{tool: "list_incidents", args: fixed(map[string]any{})},
		{tool: "get_incident", args: func(v ids) map[string]any { return map[string]any{"incident": incident(v)} }},
		{tool: "diagnose_incident", args: func(v ids) map[string]any { return map[string]any{"incident": incident(v)} }},
		{tool: "get_incident_history", args: fixed(map[string]any{"asset": "duckdb://usage.usage_hourly"})},
		{tool: "propose_remediation", args: func(v ids) map[string]any {
			proposals := []any{
				map[string]any{"kind": "hold", "what": "Pause " + worldDAG + " until egress is verified", "why": "egress bytes are null",
					"targets": []string{"airflow://dag/" + worldDAG}, "undo": "unpause the DAG"},
				map[string]any{"kind": "schema_version", "what": "Register version 2 of " + worldSubject, "why": "adds region",
					"targets": []string{"schema://" + worldSubject}, "undo": "soft-delete the version", "schema": worldV2},
			}
			for _, r := range worldRuns {
				proposals = append(proposals, map[string]any{"kind": "rerun", "what": "Rerun " + r.target, "why": "rebuild today",
					"targets": []string{orchestrate.AssetID(orchestrate.System(r.system), r.target)}, "undo": "clear today's partition",
					"run": map[string]any{"system": r.system, "target": r.target}})
			}
			return map[string]any{"incident": incident(v), "proposals": proposals}
		}, keep: func(w *world, v ids, out map[string]any) {
			v["hold"] = str(w.t, out, "proposals.0.id")
			v["schema_version"] = str(w.t, out, "proposals.1.id")
			for i, r := range worldRuns {
				v[r.tool] = str(w.t, out, fmt.Sprintf("proposals.%d.id", i+2))
			}
		}},
	}
	// The person at the client approves each proposal in its form.
	for _, key := range append([]string{"hold", "schema_version"}, runTools()...) {
		steps = append(steps, step{tool: "request_confirmation", args: func(v ids) map[string]any {
			return map[string]any{"proposal": v.get(key, "P-404")}
		}})
	}
	steps = append(steps,
		step{tool: "get_receipt", args: func(v ids) map[string]any { return map[string]any{"id": incident(v)} }},
		// dw-context-catalog
		step{tool: "blast_radius_analysis", args: fixed(map[string]any{"asset": "schema://api-usage-value"})},
		step{tool: "trace_cross_platform_lineage", args: fixed(map[string]any{"asset": "flink://usage-hourly-rollup"})},
		step{tool: "get_lineage", args: fixed(map[string]any{"asset": "duckdb://usage.usage_hourly"})},
		step{tool: "search_assets", args: fixed(map[string]any{"query": "usage"})},
		step{tool: "get_owners", args: fixed(map[string]any{"assets": []string{"duckdb://usage.usage_hourly"}})},
		step{tool: "record_lineage", args: fixed(map[string]any{"path": []string{"kafka://prod/api-usage", "flink://usage-hourly-rollup"}})},
		step{tool: "import_dbt_manifest", args: fixed(map[string]any{"path": dbtManifest})},
		step{tool: "import_openlineage_events", args: func(ids) map[string]any {
			return map[string]any{"events": mustJSON(rollupEvent())}
		}},
		// dw-schema
		step{tool: "check_compatibility", args: fixed(map[string]any{"subject": worldSubject, "schema": worldV2})},
		step{tool: "assess_impact", args: fixed(map[string]any{"asset": "schema://api-usage-value"})},
		step{tool: "detect_schema_change", args: fixed(map[string]any{"table": "usage.usage_hourly"})},
		step{tool: "list_schema_changes", args: fixed(map[string]any{})},
		step{tool: "get_schema_snapshot", args: fixed(map[string]any{"table": "usage.usage_hourly"})},
		// dw-connectors
		step{tool: "get_consumer_lag", args: fixed(map[string]any{})},
		step{tool: "get_topic_health", args: fixed(map[string]any{})},
		step{tool: "get_connector_status", args: fixed(map[string]any{})},
		step{tool: "validate_connector_config", args: fixed(map[string]any{"plugin": worldSink, "config": map[string]any{"topics": worldTopic}})},
		step{tool: "list_subjects", args: fixed(map[string]any{})},
		step{tool: "get_latest_schema", args: fixed(map[string]any{"subject": worldSubject})},
		step{tool: "register_stream_schema", args: func(v ids) map[string]any {
			return map[string]any{"subject": worldSubject, "schema": worldV2, "proposal_id": v.get("schema_version", "P-404")}
		}},
		step{tool: "emit_lineage_event", args: func(ids) map[string]any { return map[string]any{"event": rollupEvent()} }},
		step{tool: "read_flink_restores", args: fixed(map[string]any{"job": worldFlinkJob})},
	)
	for _, r := range worldRuns {
		steps = append(steps, step{tool: r.tool, args: func(v ids) map[string]any {
			args := map[string]any{"proposal_id": v.get(r.tool, "P-404")}
			for k, x := range r.args {
				args[k] = x
			}
			return args
		}, keep: func(w *world, v ids, out map[string]any) { v["run_key"] = str(w.t, out, "run_key") }})
	}
	steps = append(steps,
		step{tool: "get_run_status", args: func(v ids) map[string]any { return map[string]any{"run_key": v.get("run_key", "none")} }},
		// Back at dw-incidents: the fix is verified, and the incident closed.
		step{tool: "remediate", args: func(v ids) map[string]any { return map[string]any{"incident": incident(v)} }},
		step{tool: "close_incident", args: func(v ids) map[string]any {
			return map[string]any{"incident": v.get("second", "INC-2"), "note": "a false alarm: checked in the test"}
		}},
	)
	return steps
}

func runTools() []string {
	var out []string
	for _, r := range worldRuns {
		out = append(out, r.tool)
	}
	return out
}

// minimalArgs are the first arguments the script gives each tool, with
// placeholder ids where an earlier answer would give them.
var minimalArgs = func() map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, s := range script() {
		if _, ok := out[s.tool]; !ok {
			out[s.tool] = s.args(ids{})
		}
	}
	return out
}()

// run plays the script in w, requiring every answer to succeed.
func (w *world) run(steps []step) ids {
	w.t.Helper()
	return w.runWith(ids{}, steps)
}

// runWith plays steps with the ids an earlier run gave.
func (w *world) runWith(v ids, steps []step) ids {
	w.t.Helper()
	for _, s := range steps {
		out := w.call(s.tool, s.args(v))
		if s.keep != nil && out != nil {
			s.keep(w, v, out)
		}
	}
	return v
}

// TestDefaultAnswersAreBounded calls every tool of every agent with its
// smallest arguments on the demo data, every external system faked, and
// requires each to answer (structured output, no tool error) within
// maxAnswer characters. A tool no step calls fails the test.
func TestDefaultAnswersAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the demo packs")
	}
	w := newWorld(t)
	w.run(script())
	for tool := range w.sessions {
		if _, ok := w.sizes[tool]; !ok {
			t.Errorf("%s: no step of the script calls it; add one so its default answer is measured", tool)
		}
	}
	w.report()
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
