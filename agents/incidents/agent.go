// Package incidents is the dw-incidents agent: team metrics against their baselines, incidents, ranked causes, fix proposals and verified fixes.
package incidents

import (
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/packload"
)

// Name is the binary's and the server's name.
const Name = "dw-incidents"

const instructions = `dw-incidents turns symptoms into a diagnosed incident with a fix a named person can approve, and then proves the fix.

monitor_metrics records the metrics a team says define a right table (a value pushed with its time, or a SQL definition computed per hour) and scores each point against its seasonal baseline; an anomaly opens an incident or joins an open one on a related asset. record_change writes deploys, schema versions, restores, config, connector, partitioning and pipeline changes to the change log (dw-schema and dw-connectors write there too).
diagnose_incident ranks the changes before the onset as causes, with evidence a person can check and a confidence, and includes the blast radius. get_incident_history shows how this feed broke before.
propose_remediation sends structured proposals (hold, diff, delete with undo, replay, schema version, rerun) to the named approver; this agent never approves and never runs stream, job or table changes itself. After the owners' steps, remediate re-runs every assertion that fired and every check in scope: all pass means verified, any failure goes to a person. get_receipt prints the hash-chained record of cause, approvals, steps, checks and undo.`

// Agent is the dw-incidents server.
func Agent() mcpserver.Agent {
	return mcpserver.Agent{
		Name:         Name,
		Title:        "Data Workers: incidents",
		Instructions: instructions,
		Register: func(s *mcpserver.Server) error {
			d, err := deps.Load(Name)
			if err != nil {
				return err
			}
			d.SeedStore = packload.SeedDefault
			Register(s, d)
			return nil
		},
	}
}

type handlers struct{ d *deps.Deps }
