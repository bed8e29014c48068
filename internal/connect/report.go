package connect

import (
	"context"
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/suggest"
)

// Connector and task states as Connect reports them.
const (
	StateRunning    = "RUNNING"
	StatePaused     = "PAUSED"
	StateStopped    = "STOPPED"
	StateFailed     = "FAILED"
	StateUnassigned = "UNASSIGNED"
	StateRestarting = "RESTARTING"
)

// Health levels of a connector, folded from its own and its tasks' states.
const (
	HealthOK       = "ok"       // connector and every task running
	HealthDegraded = "degraded" // some tasks failed, others running
	HealthFailed   = "failed"   // the connector or all its tasks failed
	HealthPaused   = "paused"   // paused or stopped by a person
	HealthPending  = "pending"  // unassigned, restarting, or running with no tasks
)

// StatusParams selects connectors for Report.
type StatusParams struct {
	Connectors []string `json:"connectors,omitempty" jsonschema:"connector names; empty means every connector on the cluster"`
}

// ConnectorReport is one connector's state, its tasks (with the failing
// tasks' traces) and what it moves.
type ConnectorReport struct {
	Name        string      `json:"name"`
	Type        string      `json:"type" jsonschema:"sink or source"`
	Class       string      `json:"class"`
	Health      string      `json:"health" jsonschema:"ok, degraded, failed, paused or pending"`
	State       string      `json:"state" jsonschema:"the connector's own state"`
	WorkerID    string      `json:"worker_id,omitempty"`
	Trace       string      `json:"trace,omitempty" jsonschema:"the connector's failure trace"`
	Tasks       []TaskState `json:"tasks"`
	FailedTasks int         `json:"failed_tasks"`
	Flows       []Flow      `json:"flows,omitempty" jsonschema:"topics and tables the connector moves, read from its config"`
}

// StatusReport answers get_connector_status.
type StatusReport struct {
	Worker     string            `json:"worker"`
	Connectors []ConnectorReport `json:"connectors"`
}

// Report reads every connector with its status in one call and folds each
// into a health level. Named connectors that do not exist are an error
// naming the closest ones. knownTopics expands sinks' topics.regex.
func (c *Client) Report(ctx context.Context, p StatusParams, knownTopics []string) (*StatusReport, error) {
	all, err := c.ListConnectors(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]Connector{}
	names := make([]string, 0, len(all))
	for _, cn := range all {
		byName[cn.Info.Name] = cn
		names = append(names, cn.Info.Name)
	}
	pick := all
	if len(p.Connectors) > 0 {
		pick = nil
		for _, n := range p.Connectors {
			cn, ok := byName[n]
			if !ok {
				return nil, fmt.Errorf("connect: no connector %q on %s; closest: %s", n, c.base, strings.Join(suggest.Closest(n, names, 3), ", "))
			}
			pick = append(pick, cn)
		}
	}
	rep := &StatusReport{Worker: c.base.String()}
	for _, cn := range pick {
		rep.Connectors = append(rep.Connectors, Fold(cn, knownTopics))
	}
	return rep, nil
}

// Fold turns one connector's info and status into its report.
func Fold(cn Connector, knownTopics []string) ConnectorReport {
	r := ConnectorReport{
		Name: cn.Info.Name, Type: Kind(cn.Info), Class: cn.Info.Config["connector.class"],
		State: cn.Status.Connector.State, WorkerID: cn.Status.Connector.WorkerID, Trace: cn.Status.Connector.Trace,
		Tasks: cn.Status.Tasks, Flows: Flows(cn.Info, knownTopics),
	}
	if r.Tasks == nil {
		r.Tasks = []TaskState{}
	}
	running := 0
	for _, t := range r.Tasks {
		switch t.State {
		case StateFailed:
			r.FailedTasks++
		case StateRunning:
			running++
		}
	}
	switch {
	case r.State == StateFailed || (r.FailedTasks > 0 && running == 0):
		r.Health = HealthFailed
	case r.FailedTasks > 0:
		r.Health = HealthDegraded
	case r.State == StatePaused || r.State == StateStopped:
		r.Health = HealthPaused
	case r.State != StateRunning || len(r.Tasks) == 0 || running < len(r.Tasks):
		r.Health = HealthPending
	default:
		r.Health = HealthOK
	}
	return r
}

// Summary is a few lines a person can read in the client.
func (r *StatusReport) Summary() string {
	var b strings.Builder
	counts := map[string]int{}
	for _, c := range r.Connectors {
		counts[c.Health]++
	}
	fmt.Fprintf(&b, "%d connectors on %s:", len(r.Connectors), r.Worker)
	for _, h := range []string{HealthFailed, HealthDegraded, HealthPending, HealthPaused, HealthOK} {
		if counts[h] > 0 {
			fmt.Fprintf(&b, " %d %s", counts[h], h)
		}
	}
	for _, c := range r.Connectors {
		if c.Health == HealthOK {
			continue
		}
		fmt.Fprintf(&b, "\n- %s: %s (connector %s, %d of %d tasks failed)", c.Name, c.Health, c.State, c.FailedTasks, len(c.Tasks))
		for _, t := range c.Tasks {
			if t.State == StateFailed && t.Trace != "" {
				fmt.Fprintf(&b, "; task %d: %s", t.ID, firstLine(t.Trace))
				break
			}
		}
		if c.Trace != "" {
			fmt.Fprintf(&b, "; %s", firstLine(c.Trace))
		}
	}
	return b.String()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
