// Package incidents is the dw-incidents agent: team metrics against their baselines, incidents, ranked causes, fix proposals and verified fixes.
package incidents

import (
	"github.com/dataworkers/dw/internal/agentboot"
	"github.com/dataworkers/dw/internal/deps"
)

// Name is the binary's and the server's name.
const Name = "dw-incidents"

const instructions = `dw-incidents turns symptoms into a diagnosed incident with a fix a named person can approve, and then proves the fix.

define_metric records a metric a team says defines a right table: pushed values, or one SELECT on a warehouse returning a value per hour bucket (list_metrics shows them). monitor_metrics records pushed values or computes the SQL over a window, scores each point against the metric's seasonal baseline, and reports every anomaly (and any pair of metrics that moved apart) as a symptom that opens an incident or joins an open one on a related asset; its output says which. Failed quality checks (dw-quality) open and join incidents the same way.
record_change writes deploys, releases, schema versions, restores (with state_skipped), config, connector, partitioning and pipeline changes to the change log; dw-schema and dw-connectors write there too. list_changes reads it.
list_incidents and get_incident show incidents through their life: open → diagnosed → proposed → approved → fixing → verified → closed (escalated when a fix fails verification). diagnose_incident ranks the changes before the onset as causes, deterministically, each with evidence a person can check (lineage path, timing, the jobs that read a changed field, how the kind of change fits the symptom, earlier incidents) and a confidence, plus the blast radius from the catalog, critical and scheduled assets first. get_incident_history shows how this feed broke before and whether the cause recurs.
propose_remediation sends structured proposals (hold, diff, delete_with_undo, replay, schema_version, rerun, lineage_event) with targets, scope and a concrete undo to the approver approvals names from the domain owners, copying the other owners involved; all of them are checked first and written together with the incident's move to proposed, or none is. Each approval binds the one action it allows: a schema_version's schema text by its canonical SHA-256 (so dw-connectors' register_stream_schema registers exactly that schema), a rerun or replay's run, a lineage_event's event; and replaces {asset, with} seals which table remediate reads instead of a symptomatic one. This agent never approves or rejects and never changes a stream, job or table: people decide (dw approve <id>, or Slack) and owners carry the steps out.
After the owners' steps, remediate verifies and changes nothing: it re-runs every assertion that fired (for real: the quality check on the table, or on the table an approved proposal replaces it with, by its replaces field or details.verify_table; the metric's SQL) and every check in scope: all pass means verified, written to the receipt; any failure escalates to a person with the evidence, never verified. get_receipt prints the hash-chained record of cause, approvals, steps, checks and undo (dw receipt verify checks it). close_incident closes a verified incident or dismisses a false alarm with a note.
request_confirmation puts a proposal to its named approver in this client's own confirmation form, when the OS user running the agent is mapped to that approver in dw.yaml; only the person's answer decides, and a decline, an error or a client that cannot ask records nothing.`

// Spec is the dw-incidents server: what it says and which tools it has;
// agentboot does the rest.
func Spec() agentboot.Spec {
	return agentboot.Spec{
		Name:            Name,
		Title:           "Data Workers: incidents",
		Instructions:    instructions,
		ReadsWarehouses: true,
		Register:        Register,
	}
}

// handlers carries the dependencies; deps holds the context graph, so its
// in-memory index is reused between calls.
type handlers struct {
	d *deps.Deps
}
