package agents_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/registry/registrytest"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// The wide world's sizes: each is well past a page or a listed head, so a
// list that is not bounded shows.
const (
	wideReaders    = 4000 // jobs reading one field of the demo's topic
	wideOwners     = 200  // owners among them, 20 jobs each
	wideColumns    = 3000 // columns of one asset, one table, one schema
	wideMappings   = 2000 // column mappings on one edge
	wideChanges    = 60   // changes touching the symptomatic table, each as wide as allowed
	wideWarnings   = 3000 // dbt dependencies and OpenLineage fields skipped
	wideTables     = 60   // tables of 300 columns
	wideVersions   = 300  // versions of one subject
	wideSubjects   = 2000 // subjects in the registry
	wideRestores   = 300  // restores of one Flink job
	wideErrors     = 2000 // fields a connector config is refused on
	widePartitions = 1000 // partitions of one consumed topic
	widePoints     = 2000 // points pushed to one metric

	// Changes are as wide as record_change allows.
	wideChangeAssets = changelog.MaxChangeAssets
	wideChangeFields = changelog.MaxChangeFields
)

func fieldsJSON(prefix string, n int) string {
	fs := make([]string, n)
	for i := range fs {
		fs[i] = fmt.Sprintf(`{"name":"%s%04d","type":["null","long"],"default":null}`, prefix, i)
	}
	return `{"type":"record","name":"Wide","fields":[` + strings.Join(fs, ",") + `]}`
}

// widen fills w with thousands of what each tool lists: readers and
// owners downstream of the demo's topic, a column-wide asset and edge,
// changes as wide as record_change allows, imports full of warnings, wide
// tables, a long subject history, restores, refused config fields,
// partitions, points.
func (w *world) widen() {
	t := w.t
	t.Helper()
	// The first call seeds the store and creates the demo warehouse.
	w.call("list_tables", map[string]any{})

	// The context graph.
	var edges, assets []any
	for i := range wideReaders {
		id := fmt.Sprintf("flink://wide-reader-%04d", i)
		edges = append(edges, map[string]any{"from": "kafka://prod/api-usage", "to": id, "reads_fields": []string{"response_kib"}})
		a := map[string]any{"id": id, "owner": fmt.Sprintf("team-%03d", i%wideOwners), "domain": "streaming",
			"sql":      "SELECT account_id, SUM(response_bytes) AS egress FROM api_usage GROUP BY account_id",
			"schedule": map[string]any{"cron": "5 * * * *"}}
		if i%10 == 0 {
			a["tags"] = []string{"outbound", "money"}
		}
		assets = append(assets, a)
	}
	cols := []any{map[string]any{"name": "account_id", "type": "string"}, map[string]any{"name": "response_kib", "type": "long"}}
	var mappings []any
	for i := range wideColumns - 2 {
		cols = append(cols, map[string]any{"name": fmt.Sprintf("c%04d", i), "type": "BIGINT", "description": "one of many"})
	}
	for i := range wideMappings {
		mappings = append(mappings, map[string]any{"from": fmt.Sprintf("c%04d", i), "to": fmt.Sprintf("c%04d", i)})
	}
	// The topic's columns come first: each reader's fields are checked
	// against them.
	assets = append([]any{map[string]any{"id": "kafka://prod/api-usage", "columns": cols}}, assets...)
	assets = append(assets,
		map[string]any{"id": "flink://wide-mapper", "columns": cols},
		map[string]any{"id": "flink://wide-sql", "reads_fields": []string{"c0001"}, "sql": "SELECT " + strings.Repeat("c0001 + ", 7000) + "1 FROM api_usage"})
	edges = append(edges, map[string]any{"from": "kafka://prod/api-usage", "to": "flink://wide-mapper", "columns": mappings},
		map[string]any{"from": "kafka://prod/api-usage", "to": "flink://wide-sql"})
	w.call("record_lineage", map[string]any{"edges": edges, "assets": assets})

	// Changes to the symptomatic table in the day before the incident.
	day := config.DemoIncidentDay(time.Now())
	for i := range wideChanges {
		var as []string
		var fs []any
		as = append(as, "duckdb://usage.usage_hourly")
		for j := 1; j < wideChangeAssets; j++ {
			as = append(as, fmt.Sprintf("dbt://model.billing.wide_model_%04d", j))
		}
		for j := range wideChangeFields {
			fs = append(fs, map[string]any{"name": fmt.Sprintf("column_%04d", j), "how": "type_changed", "detail": "long -> string"})
		}
		details := map[string]any{}
		for j := range 100 {
			details[fmt.Sprintf("key_%03d", j)] = strings.Repeat("v", 200)
		}
		out := w.call("record_change", map[string]any{"at": day.Add(-20*time.Hour + time.Duration(i)*time.Minute).Format(time.RFC3339),
			"kind": "deploy", "system": "dbt", "assets": as, "fields": fs, "details": details,
			"summary": fmt.Sprintf("dbt deploy %d: %s", i, strings.Repeat("rebuilt the billing models ", 20))})
		if i == 0 && (num(t, out, "change.assets_total") != wideChangeAssets || length(t, out, "change.assets") >= wideChangeAssets) {
			t.Errorf("record_change lists %d of %v assets", length(t, out, "change.assets"), num(t, out, "change.assets_total"))
		}
	}

	// Warehouse tables: many, wide, and one very wide.
	path := filepath.Join(w.home, "demo.duckdb")
	db, err := duckdb.OpenWrite(context.Background(), path, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{"CREATE SCHEMA wide"}
	colsDDL := func(n int) string {
		c := make([]string, n)
		for i := range c {
			c[i] = fmt.Sprintf("c%04d BIGINT", i)
		}
		return strings.Join(c, ", ")
	}
	for i := range wideTables {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE wide.t%03d (%s)", i, colsDDL(300)))
	}
	stmts = append(stmts, fmt.Sprintf("CREATE TABLE wide.very_wide (%s)", colsDDL(wideColumns)))
	for _, q := range stmts {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%.80s: %v", q, err)
		}
	}
	db.Close()

	// The registry: a long history of a wide subject, and many subjects.
	seeds := make([]registrytest.Seeded, 0, wideVersions)
	for v := 1; v <= wideVersions; v++ {
		text := fieldsJSON("f", 1)
		switch v {
		case wideVersions - 1:
			text = fieldsJSON("f", wideColumns)
		case wideVersions:
			text = fieldsJSON("g", wideColumns)
		}
		seeds = append(seeds, registrytest.Seeded{Schema: text, Version: v})
	}
	if _, err := w.registry.SeedVersions("wide-value", compat.None, seeds...); err != nil {
		t.Fatal(err)
	}
	for i := range wideSubjects {
		w.registry.Seed(fmt.Sprintf("wide-%04d-value", i), "", worldV1)
	}

	w.flinkRestores(t, "wide-job", wideRestores)
	errs := map[string][]string{}
	for i := range wideErrors {
		errs[fmt.Sprintf("wide.setting.%04d", i)] = []string{"Missing required configuration with no default value.", "Invalid value."}
	}
	w.connect.SetValidationErrors(worldSink, errs)
	w.kafka.topic(t, "wide-topic", widePartitions, 2, "wide-group")

	w.call("define_metric", map[string]any{"name": "wide_probe", "description": "many points", "asset": "duckdb://usage.usage_hourly"})
	var points []any
	for i := range widePoints {
		points = append(points, map[string]any{"at": day.Add(-time.Duration(i+1) * time.Hour).Format(time.RFC3339), "value": i % 7})
	}
	w.call("monitor_metrics", map[string]any{"metric": "wide_probe", "points": points})
}

// num reads a number at a path of a structured answer ("owners.0.assets_total"); a
// string counts as its length, a list as its length.
func num(t *testing.T, out map[string]any, path string) float64 {
	t.Helper()
	switch v := at(t, out, path).(type) {
	case float64:
		return v
	case string:
		return float64(len(v))
	case []any:
		return float64(len(v))
	}
	t.Errorf("%s is not a number in the answer", path)
	return 0
}

// length is the length of the list (or string) at path.
func length(t *testing.T, out map[string]any, path string) int {
	t.Helper()
	return int(num(t, out, path))
}

// at is the value at a dotted path of an answer, nil when absent.
func at(t *testing.T, out map[string]any, path string) any {
	t.Helper()
	var cur any = out
	for _, part := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[part]
		case []any:
			var i int
			if _, err := fmt.Sscan(part, &i); err != nil || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// wideManifest is a dbt manifest whose every model depends on a node the
// import does not take: one warning each.
func wideManifest() string {
	nodes := map[string]any{}
	for i := range wideWarnings {
		id := fmt.Sprintf("model.wide.m%04d", i)
		nodes[id] = map[string]any{"unique_id": id, "resource_type": "model", "name": fmt.Sprintf("m%04d", i), "database": "demo",
			"schema": "wide", "alias": fmt.Sprintf("m%04d", i), "depends_on": map[string]any{"nodes": []string{fmt.Sprintf("macro.wide.not_a_node_%04d", i)}}}
	}
	return mustJSON(map[string]any{
		"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json", "adapter_type": "duckdb", "project_name": "wide"},
		"nodes":    nodes, "sources": map[string]any{}, "exposures": map[string]any{},
	})
}

// wideEvents is one OpenLineage event whose column lineage names
// thousands of input fields it cannot read.
func wideEvents() string {
	ev := rollupEvent()
	fields := map[string]any{}
	for i := range wideWarnings {
		fields[fmt.Sprintf("f%04d", i)] = map[string]any{"inputFields": []any{map[string]any{"namespace": "", "name": "", "field": ""}}}
	}
	ev["outputs"] = []any{map[string]any{"namespace": "kafka://broker-1:9092", "name": "usage-hourly",
		"facets": map[string]any{"columnLineage": map[string]any{"_producer": "https://example.com", "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ColumnLineageDatasetFacet.json", "fields": fields}}}}
	return mustJSON(ev)
}

// wideSteps are the calls that read the wide data back.
func wideSteps() []step {
	readers := make([]string, 100)
	for i := range readers {
		readers[i] = fmt.Sprintf("flink://wide-reader-%04d", i)
	}
	noFields := `{"type":"record","name":"ApiUsage","fields":[]}`
	// totals requires each listed total and, where a list is cut, fewer
	// listed than the total: every cut list says how much there is.
	totals := func(want map[string]float64, cut ...string) func(*world, ids, map[string]any) {
		return func(w *world, _ ids, out map[string]any) {
			w.t.Helper()
			for path, n := range want {
				// The demo's own assets and changes count too.
				if got := num(w.t, out, path); got < n {
					w.t.Errorf("%s = %v, want at least %v", path, got, n)
				}
			}
			for _, c := range cut {
				list, total, _ := strings.Cut(c, "<")
				if l, n := length(w.t, out, list), num(w.t, out, total); l == 0 || float64(l) >= n {
					w.t.Errorf("%s lists %d of %s %v; want the first few", list, l, total, n)
				}
			}
		}
	}
	return []step{
		{tool: "get_lineage", args: fixed(map[string]any{"asset": "kafka://prod/api-usage"}),
			keep: totals(map[string]float64{"columns_total": wideColumns, "downstream_total": wideReaders + 1}, "asset.columns<columns_total", "downstream<downstream_total")},
		{tool: "get_lineage", args: fixed(map[string]any{"asset": "flink://wide-mapper"}),
			keep: totals(map[string]float64{"upstream.0.edge.columns_total": wideMappings}, "upstream.0.edge.columns<upstream.0.edge.columns_total")},
		{tool: "get_lineage", args: fixed(map[string]any{"asset": "flink://wide-sql"}), keep: totals(nil, "asset.sql<sql_chars")},
		{tool: "blast_radius_analysis", args: fixed(map[string]any{"asset": "kafka://prod/api-usage"})},
		{tool: "trace_cross_platform_lineage", args: fixed(map[string]any{"asset": "kafka://prod/api-usage"})},
		{tool: "search_assets", args: fixed(map[string]any{"query": "wide-reader"})},
		{tool: "get_owners", args: fixed(map[string]any{"assets": readers})},
		{tool: "assess_impact", args: fixed(map[string]any{"asset": "kafka://prod/api-usage", "fields": []string{"response_kib"}})},
		{tool: "assess_impact", args: fixed(map[string]any{"asset": "kafka://prod/api-usage"}),
			keep: totals(map[string]float64{"owners_total": wideOwners, "outbound_total": wideReaders / 10}, "owners<owners_total", "outbound<outbound_total", "owners.0.assets<owners.0.assets_total")},
		{tool: "assess_impact", args: fixed(map[string]any{"subject": worldSubject})},
		{tool: "check_compatibility", args: fixed(map[string]any{"subject": worldSubject, "schema": noFields, "level": "NONE"}),
			keep: totals(map[string]float64{"readers_total": wideReaders}, "readers<readers_total")},
		{tool: "check_compatibility", args: fixed(map[string]any{"subject": "wide-value", "schema": fieldsJSON("h", 10)}),
			keep: totals(map[string]float64{"versions_total": wideVersions}, "changes<changes_total", "versions<versions_total")},
		{tool: "get_latest_schema", args: fixed(map[string]any{"subject": "wide-value"}),
			keep: totals(map[string]float64{"versions_total": wideVersions, "changes_total": 2 * wideColumns}, "changes_from_previous<changes_total", "versions<versions_total")},
		{tool: "list_subjects", args: fixed(map[string]any{})},
		{tool: "read_flink_restores", args: fixed(map[string]any{"job": "wide-job"}),
			keep: totals(map[string]float64{"restores_total": wideRestores}, "restores<restores_total")},
		{tool: "validate_connector_config", args: fixed(map[string]any{"plugin": worldSink, "config": map[string]any{"topics": worldTopic}}),
			keep: totals(nil, "errors<errors_total")},
		{tool: "get_consumer_lag", args: fixed(map[string]any{"group": "wide-group"})},
		{tool: "get_topic_health", args: fixed(map[string]any{"topic": "wide-topic"})},
		{tool: "list_tables", args: fixed(map[string]any{})},
		{tool: "list_tables", args: fixed(map[string]any{"schema": "wide"}),
			keep: totals(map[string]float64{"tables.0.columns_total": 300}, "tables.0.columns<tables.0.columns_total")},
		{tool: "detect_schema_change", args: fixed(map[string]any{"table": "wide.very_wide"})},
		{tool: "get_schema_snapshot", args: fixed(map[string]any{"table": "wide.very_wide"})},
		{tool: "list_schema_changes", args: fixed(map[string]any{})},
		{tool: "import_dbt_manifest", args: fixed(map[string]any{"manifest": wideManifest()}),
			keep: totals(map[string]float64{"warnings_total": wideWarnings}, "warnings<warnings_total")},
		{tool: "import_openlineage_events", args: fixed(map[string]any{"events": wideEvents()}),
			keep: totals(map[string]float64{"warnings_total": wideWarnings}, "warnings<warnings_total")},
		{tool: "list_changes", args: fixed(map[string]any{})},
		{tool: "list_changes", args: fixed(map[string]any{"asset": "dbt://model.billing.wide_model_0001", "limit": 500}), keep: func(w *world, _ ids, out map[string]any) {
			// A page of long changes ends early; next_cursor continues.
			if n := length(w.t, out, "changes"); n >= wideChanges || out["next_cursor"] == nil {
				w.t.Errorf("a page of %d wide changes lists %d, next_cursor %v", wideChanges, n, out["next_cursor"])
			}
			totals(map[string]float64{"total": wideChanges, "changes.0.assets_total": wideChangeAssets, "changes.0.fields_total": wideChangeFields},
				"changes.0.assets<changes.0.assets_total", "changes.0.fields<changes.0.fields_total")(w, nil, out)
		}},
		{tool: "list_changes", args: fixed(map[string]any{"asset": "duckdb://usage.usage_hourly"})},
		{tool: "get_incident_history", args: fixed(map[string]any{"asset": "kafka://prod/api-usage"})},
		{tool: "list_metrics", args: fixed(map[string]any{})},
		{tool: "get_quality_history", args: fixed(map[string]any{"table": "usage.usage_hourly", "metric": "row_count"})},
		// As many proposals as one call may make, each as wide as allowed,
		// then the receipt that records them.
		{tool: "propose_remediation", args: func(v ids) map[string]any {
			scope := make([]string, 1000)
			for i := range scope {
				scope[i] = fmt.Sprintf("flink://wide-reader-%04d", i)
			}
			var proposals []any
			for i := range incidents.MaxRemediations {
				proposals = append(proposals, map[string]any{"kind": "hold", "what": fmt.Sprintf("Pause wide reader %d", i), "why": strings.Repeat("its egress is null; ", 50),
					"targets": readers, "scope": scope, "undo": "resume it"})
			}
			return map[string]any{"incident": v.get("incident", "INC-1"), "proposals": proposals}
		}},
		{tool: "get_receipt", args: func(v ids) map[string]any { return map[string]any{"id": v.get("incident", "INC-1")} }},
		{tool: "get_incident", args: func(v ids) map[string]any { return map[string]any{"incident": v.get("incident", "INC-1")} }},
	}
}

// TestWideAnswersAreBounded fills the world with thousands of what every
// tool lists, then plays the whole script and reads the wide data back:
// every answer succeeds within maxAnswer characters.
func TestWideAnswersAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the demo packs and thousands of assets")
	}
	w := newWorld(t)
	w.widen()
	v := w.run(script())
	w.runWith(v, wideSteps())
	w.report()
}
