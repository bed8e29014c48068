// Package schema is the dw-schema agent: what a schema change does downstream, not only whether the registry accepts it.
package schema

import (
	"github.com/dataworkers/dw/internal/agentboot"
	"github.com/dataworkers/dw/internal/deps"
)

// Name is the binary's and the server's name.
const Name = "dw-schema"

const instructions = `dw-schema answers two questions before anyone registers a schema change: does the registry's compatibility rule accept it, and who downstream reads what it removes or changes. Compatible is not safe: a version can pass BACKWARD and still leave a billing model summing an empty column.

check_compatibility gives the registry's verdict (when one is configured), a local verdict under every level, a field-level diff, and every statement, job, model and report that reads a removed or changed field, with owners, and a separate safe/unsafe verdict. assess_impact sizes a change downstream: counts by kind, owners to ask, outbound jobs and their next runs. detect_schema_change snapshots a warehouse table's columns and records what changed since the last snapshot in the change log; list_schema_changes and get_schema_snapshot read that history.
This agent never registers a schema; dw-connectors does, and only under an approved proposal.`

// Spec is the dw-schema server: what it says and which tools it has;
// agentboot does the rest.
func Spec() agentboot.Spec {
	return agentboot.Spec{
		Name:            Name,
		Title:           "Data Workers: schema impact",
		Instructions:    instructions,
		ReadsWarehouses: true,
		Register:        Register,
	}
}

type handlers struct{ d *deps.Deps }
