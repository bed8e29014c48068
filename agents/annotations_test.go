package agents_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/agents"
	"github.com/dataworkers/dw/internal/store"
)

// hints are a tool's four annotation hints as its code behaves, with why.
type hints struct {
	readOnly, destructive, idempotent, openWorld bool
	why                                          string
}

// annotations holds every tool's hints to what its code does. Overwriting
// what a person recorded, replacing a whole record and starting work in
// another system are destructive; idempotent means a repeat with the same
// arguments has no further effect, as implemented (a claimed approval, an
// upsert by key, a marker written once).
var annotations = map[string]hints{
	// dw-quality
	"list_tables":              {true, false, true, true, "reads the warehouse catalog"},
	"run_quality_check":        {false, false, false, true, "appends results to history and may open an incident; each run adds points"},
	"set_quality_expectations": {false, true, true, true, "replaces the table's earlier expectations as a whole (upsert by table)"},
	"get_quality_history":      {true, false, true, false, "reads the store"},
	// dw-incidents
	"define_metric":        {false, true, true, false, "redefines a metric of the same name"},
	"list_metrics":         {true, false, true, false, "reads the store"},
	"monitor_metrics":      {false, false, false, true, "records points and may open incidents"},
	"record_change":        {false, false, false, false, "appends to the change log (a key dedupes only when given)"},
	"list_changes":         {true, false, true, false, "reads the store"},
	"list_routine_runs":    {true, false, true, false, "reads the store"},
	"list_incidents":       {true, false, true, false, "reads the store"},
	"get_incident":         {true, false, true, false, "reads the store"},
	"diagnose_incident":    {false, false, true, false, "records the diagnosis; the same evidence gives the same ranking"},
	"get_incident_history": {true, false, true, false, "reads the store"},
	"propose_remediation":  {false, false, false, false, "each call sends new proposals to approvers"},
	"remediate":            {false, false, false, true, "verifies against the warehouse and appends to the receipt; never changes data"},
	"get_receipt":          {true, false, true, false, "reads the store"},
	"close_incident":       {false, false, false, false, "changes the incident's state once"},
	"request_confirmation": {false, false, false, false, "asks a person and records their decision"},
	// dw-context-catalog
	"blast_radius_analysis":        {true, false, true, false, "reads the graph"},
	"trace_cross_platform_lineage": {true, false, true, false, "reads the graph"},
	"get_lineage":                  {true, false, true, false, "reads the graph"},
	"search_assets":                {true, false, true, false, "reads the graph"},
	"get_owners":                   {true, false, true, false, "reads the graph"},
	"record_lineage":               {false, true, true, false, "overwrites owner, domain, title, description, schedule, SQL; remove_tags drops tags"},
	"import_dbt_manifest":          {false, true, true, false, "the manifest's owners, descriptions and titles replace recorded ones"},
	"import_openlineage_events":    {false, true, true, false, "what an event says of a dataset replaces what was recorded"},
	// dw-schema
	"check_compatibility":  {true, false, true, true, "reads the registry and the graph"},
	"assess_impact":        {true, false, true, false, "reads the graph"},
	"detect_schema_change": {false, false, true, true, "records a snapshot only when the table's shape changed"},
	"list_schema_changes":  {true, false, true, false, "reads the store"},
	"get_schema_snapshot":  {true, false, true, false, "reads the store"},
	// dw-connectors
	"get_consumer_lag":               {false, false, false, true, "records lag points for history"},
	"get_topic_health":               {true, false, true, true, "reads Kafka"},
	"get_connector_status":           {false, false, true, true, "records the status seen once per change"},
	"validate_connector_config":      {true, false, true, true, "asks Kafka Connect to validate; nothing is created"},
	"list_subjects":                  {true, false, true, true, "reads the registry"},
	"get_latest_schema":              {false, false, true, true, "records the versions seen, once each"},
	"register_stream_schema":         {false, false, true, true, "adds a version under an approval claimed once; earlier versions stay"},
	"emit_lineage_event":             {false, true, true, true, "what the event says of a dataset replaces what was recorded; forwards once per approval"},
	"read_flink_restores":            {false, false, true, true, "records each restore once as a change"},
	"get_run_status":                 {false, false, true, true, "records the outcome in the receipt once"},
	"trigger_airflow_dag":            {false, true, true, true, "starts a job in another system; a retry returns the claimed run"},
	"trigger_dagster_job":            {false, true, true, true, "starts a job in another system; a retry returns the claimed run"},
	"trigger_dbt_cloud_job":          {false, true, true, true, "starts a job in another system; a retry returns the claimed run"},
	"start_step_functions_execution": {false, true, true, true, "starts a job in another system; a retry returns the claimed run"},
}

// TestAnnotationsMatchTheCode holds every served tool's hints to the table.
func TestAnnotationsMatchTheCode(t *testing.T) {
	served := map[string]bool{}
	for _, e := range agents.All() {
		for _, tool := range listTools(t, e) {
			served[tool.Name] = true
			want, ok := annotations[tool.Name]
			if !ok {
				t.Errorf("%s: not in the annotations table; add its hints as its code behaves", tool.Name)
				continue
			}
			a := tool.Annotations
			if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
				t.Errorf("%s: hints not all stated: %+v", tool.Name, a)
				continue
			}
			got := hints{a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint, *a.OpenWorldHint, want.why}
			if got != want {
				t.Errorf("%s: hints readOnly=%v destructive=%v idempotent=%v openWorld=%v; its code: readOnly=%v destructive=%v idempotent=%v openWorld=%v (%s)",
					tool.Name, got.readOnly, got.destructive, got.idempotent, got.openWorld,
					want.readOnly, want.destructive, want.idempotent, want.openWorld, want.why)
			}
			if want.readOnly && want.destructive {
				t.Errorf("%s: read-only and destructive at once", tool.Name)
			}
		}
	}
	for name := range annotations {
		if !served[name] {
			t.Errorf("the annotations table names %s, which no agent serves", name)
		}
	}
}

// TestReadOnlyToolsChangeNothing calls every tool that says readOnlyHint
// on the seeded demo store and checks the store is byte for byte the same
// afterwards, table by table.
func TestReadOnlyToolsChangeNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the demo packs")
	}
	home := t.TempDir()
	ctx := context.Background()
	sessions := map[string]*mcp.ClientSession{}
	for _, e := range agents.All() {
		sessions[e.Name] = demoSession(t, e, home)
	}
	// Open the store and the warehouse once (seeding is not a tool's write).
	for _, warm := range []struct{ agent, tool string }{{"dw-quality", "list_tables"}, {"dw-context-catalog", "search_assets"}} {
		if res, err := sessions[warm.agent].CallTool(ctx, &mcp.CallToolParams{Name: warm.tool, Arguments: minimalArgs[warm.tool]}); err != nil || res.IsError {
			t.Fatalf("warm-up %s: %v %+v", warm.tool, err, res)
		}
	}
	db, err := store.OpenSQLite(ctx, filepath.Join(home, "dw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checked := 0
	for _, e := range agents.All() {
		cs := sessions[e.Name]
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools.Tools {
			if !tool.Annotations.ReadOnlyHint {
				continue
			}
			before := fingerprint(t, db)
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: tool.Name, Arguments: minimalArgs[tool.Name]})
			cancel()
			if err != nil {
				t.Errorf("%s: %v", tool.Name, err)
				continue
			}
			checked++
			after := fingerprint(t, db)
			for table, sum := range after {
				if before[table] != sum {
					t.Errorf("%s says readOnlyHint but changed store table %s (error answer: %v)", tool.Name, table, res.IsError)
				}
			}
		}
	}
	if checked < 15 {
		t.Errorf("only %d read-only tools called", checked)
	}
}

// fingerprint hashes every row of every table of the SQLite store.
func fingerprint(t *testing.T, db *store.DB) map[string]string {
	t.Helper()
	ctx := context.Background()
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	sort.Strings(tables)
	out := map[string]string{}
	for _, table := range tables {
		// The name comes from sqlite_master, never from input; quoted anyway.
		r, err := db.QueryContext(ctx, `SELECT * FROM "`+table+`"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := r.Columns()
		h := sha256.New()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for r.Next() {
			if err := r.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(h, "%v\x1e", vals)
		}
		r.Close()
		out[table] = hex.EncodeToString(h.Sum(nil))
	}
	return out
}
