// Package quality is the dw-quality agent: checks on landed tables
// (volume, nulls, uniqueness, freshness, load lag) judged against each
// table's own recorded history.
package quality

import (
	"github.com/dataworkers/dw/internal/agentboot"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// Name is the binary's and the server's name.
const Name = "dw-quality"

const instructions = `dw-quality checks tables that pipelines have landed in the warehouse, and judges each metric against that table's own history.

Start with list_tables to see what the warehouse holds. run_quality_check computes every requested metric of a table in one scan (row count, null rate per column, key uniqueness, freshness, load lag, and the value profile: a numeric column's mean, median, p95 and zero share, a category column's distinct count and top-value share; optionally per hour or day bucket over a window) and says, per check, pass, fail (an explicit expectation broken) or anomalous (outside the range its history predicts), and names the kind of problem: volume, nulls, uniqueness, freshness, or values. A business number the profile cannot see needs a team metric (dw-incidents monitor_metrics).
A failed or anomalous check opens an incident, or joins an open one on a related asset, for dw-incidents to diagnose. The first check of a table has no history to judge against: run it once over the past weeks (since/until, bucket hour, no_incident) to record that history, then check today.
set_quality_expectations records a table's key, time columns and thresholds; the tests of an imported dbt manifest (dw-context-catalog import_dbt_manifest) are expectations too, marked source dbt, and the team's win where both speak of a column. Without any, run_quality_check profiles the table and says what it inferred. get_quality_history shows a metric's recent points and baseline.

These tools never change a table: they read the warehouse and write only to Data Workers' own store (metric history, expectations, incidents).`

// Spec is the dw-quality server: what it says and which tools it has;
// agentboot does the rest.
func Spec() agentboot.Spec {
	return agentboot.Spec{
		Name:            Name,
		Title:           "Data Workers: quality checks",
		Instructions:    instructions,
		ReadsWarehouses: true,
		Register:        Register,
	}
}

// Register adds the tools with the given dependencies.
func Register(s *mcpserver.Server, d *deps.Deps) {
	h := &handlers{d: d}
	mcpserver.Add(s, listTablesTool, h.listTables)
	mcpserver.Add(s, runQualityCheckTool, h.runQualityCheck)
	mcpserver.Add(s, setExpectationsTool, h.setExpectations)
	mcpserver.Add(s, getHistoryTool, h.getHistory)
}

type handlers struct{ d *deps.Deps }
