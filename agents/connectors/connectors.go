package connectors

import (
	"context"
	"fmt"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"slices"
	"strings"

	"github.com/dataworkers/dw/internal/connect"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/page"
)

// ConnectorStatusIn selects a connector.
type ConnectorStatusIn struct {
	Name string `json:"name,omitempty" jsonschema:"connector name; default every connector on the Connect cluster"`
	page.Params
}

// SkippedFlow is a topic-table hop that could not be recorded in the
// context graph.
type SkippedFlow struct {
	Connector string `json:"connector" jsonschema:"connector name"`
	Topic     string `json:"topic,omitempty" jsonschema:"topic, or the topics.regex pattern"`
	Reason    string `json:"reason" jsonschema:"why the hop was not recorded"`
}

// ConnectorLineage says what was written to the context graph.
type ConnectorLineage struct {
	Recorded      []string      `json:"recorded" jsonschema:"connectors whose topic/table edges are now in the context graph (the first 50 by name)"`
	RecordedTotal int           `json:"recorded_total" jsonschema:"connectors whose edges were recorded, in all"`
	AssetsCreated int           `json:"assets_created" jsonschema:"assets new to the graph"`
	EdgesCreated  int           `json:"edges_created" jsonschema:"edges new to the graph"`
	Skipped       []SkippedFlow `json:"skipped,omitempty" jsonschema:"hops not recorded, with the reason (the first 50)"`
	SkippedTotal  int           `json:"skipped_total" jsonschema:"hops not recorded, in all"`
}

// maxLineageListed bounds each list of what get_connector_status recorded:
// the recording covers every connector on the cluster, not one page, so a
// cluster of thousands would otherwise list thousands of names in every
// answer.
const maxLineageListed = 50

// maxReason bounds one skipped hop's reason (an error's text).
const maxReason = 500

// capLineage keeps the first maxLineageListed of each list, with totals.
func (l *ConnectorLineage) capLineage() {
	l.RecordedTotal, l.SkippedTotal = len(l.Recorded), len(l.Skipped)
	slices.Sort(l.Recorded)
	if len(l.Recorded) > maxLineageListed {
		l.Recorded = l.Recorded[:maxLineageListed:maxLineageListed]
	}
	if len(l.Skipped) > maxLineageListed {
		l.Skipped = l.Skipped[:maxLineageListed:maxLineageListed]
	}
	for i := range l.Skipped {
		if r := l.Skipped[i].Reason; len(r) > maxReason {
			l.Skipped[i].Reason = strings.ToValidUTF8(r[:maxReason], "") + "…"
		}
	}
}

// ConnectorStatusOut is the connectors' states and what was recorded.
type ConnectorStatusOut struct {
	Worker     string                    `json:"worker" jsonschema:"the Connect worker that answered"`
	Cluster    string                    `json:"cluster" jsonschema:"Kafka cluster name used in the recorded topic ids"`
	Connectors []connect.ConnectorReport `json:"connectors" jsonschema:"this page of connectors, by name: health, its own state, every task's state with the failing task's trace (first 4000 characters), and the topics and tables it moves"`
	// HealthCounts covers every connector, on every page.
	HealthCounts map[string]int   `json:"health_counts" jsonschema:"connectors per health, over all connectors"`
	Lineage      ConnectorLineage `json:"lineage" jsonschema:"the connectors' topic <-> table hops recorded in the context graph (for every connector, not only this page)"`
	page.Info
}

// maxTrace bounds one failure trace in the answer: the cause is at the top
// of a Java stack trace, and the Connect REST API keeps the whole of it.
const maxTrace = 4000

var connectorStatusTool = mcpserver.Tool{
	Name:  "get_connector_status",
	Title: "Kafka Connect status",
	Description: "Reads Kafka Connect connectors in one call: each connector's state and every task's state, with the failing task's stack trace, folded into a health (ok, degraded, failed, paused, pending), and the topics and tables each connector moves (read from its config). " +
		"Records those topic -> connector -> table hops in the context graph so blast radius and diagnosis see them. Never changes a connector. Connectors are paged by name (limit, default 50, at most 500; next_cursor; total) with health_counts over all.",
	ReadOnly:   false,
	Idempotent: true,
	OpenWorld:  true,
}

func (h *handlers) connectorStatus(ctx context.Context, in ConnectorStatusIn) (*ConnectorStatusOut, string, error) {
	pg, err := in.Resolve("get_connector_status", in.Name)
	if err != nil {
		return nil, "", err
	}
	c, err := h.connectClient()
	if err != nil {
		return nil, "", err
	}
	var p connect.StatusParams
	if n := strings.TrimSpace(in.Name); n != "" {
		p.Connectors = []string{n}
	}
	rep, err := c.Report(ctx, p, nil)
	if err != nil {
		return nil, "", err
	}
	out := &ConnectorStatusOut{Worker: rep.Worker, Cluster: h.clusterName(), Connectors: rep.Connectors,
		Lineage: ConnectorLineage{Recorded: []string{}}}
	if out.Connectors == nil {
		out.Connectors = []connect.ConnectorReport{}
	}
	if err := h.recordConnectors(ctx, out); err != nil {
		return nil, "", err
	}
	out.Lineage.capLineage()
	out.HealthCounts = map[string]int{}
	for _, cr := range out.Connectors {
		out.HealthCounts[cr.Health]++
	}
	all := slices.Clone(out.Connectors)
	slices.SortStableFunc(all, func(a, b connect.ConnectorReport) int { return strings.Compare(a.Name, b.Name) })
	out.Connectors, out.Info = page.Slice(pg, all)
	for i := range out.Connectors {
		cr := &out.Connectors[i]
		cr.Trace = cutTrace(cr.Trace)
		cr.Tasks = slices.Clone(cr.Tasks)
		for j := range cr.Tasks {
			cr.Tasks[j].Trace = cutTrace(cr.Tasks[j].Trace)
		}
	}
	var b strings.Builder
	b.WriteString((&connect.StatusReport{Worker: rep.Worker, Connectors: out.Connectors}).Summary())
	if out.NextCursor != "" {
		fmt.Fprintf(&b, "\n%d of %d connectors listed; pass next_cursor as cursor for more.", len(out.Connectors), out.Total)
	}
	fmt.Fprintf(&b, "\nContext graph: %d connectors' hops recorded", out.Lineage.RecordedTotal)
	if n := out.Lineage.SkippedTotal; n > 0 {
		fmt.Fprintf(&b, ", %d hops skipped (see lineage.skipped)", n)
	}
	return out, b.String(), nil
}

func cutTrace(s string) string {
	if len(s) <= maxTrace {
		return s
	}
	return strings.ToValidUTF8(s[:maxTrace], "") + fmt.Sprintf("\n… %d more characters (GET /connectors/<name>/status on the Connect worker has the whole trace)", len(s)-maxTrace)
}

// recordConnectors writes each connector's hops to the context graph. Each
// connector is imported on its own, so one whose table platform cannot be
// told from its class does not keep the others out.
func (h *handlers) recordConnectors(ctx context.Context, out *ConnectorStatusOut) error {
	g, err := h.lineageGraph(ctx)
	if err != nil {
		return err
	}
	for _, cr := range out.Connectors {
		var specs []ingest.ConnectorSpec
		for _, f := range cr.Flows {
			switch {
			case f.TopicPattern:
				out.Lineage.Skipped = append(out.Lineage.Skipped, SkippedFlow{Connector: cr.Name, Topic: f.Topic,
					Reason: "topics.regex matched no topic this tool knows of; the hop is recorded once the connector's topics are listed in topics"})
				continue
			case f.Table == "":
				out.Lineage.Skipped = append(out.Lineage.Skipped, SkippedFlow{Connector: cr.Name, Topic: f.Topic,
					Reason: "the connector's config names no table this tool can read (class " + cr.Class + ")"})
				continue
			}
			specs = append(specs, ingest.ConnectorSpec{Name: cr.Name, Class: cr.Class, Direction: cr.Type, Topic: f.Topic, Table: f.Table})
		}
		if len(specs) == 0 {
			if len(cr.Flows) == 0 {
				out.Lineage.Skipped = append(out.Lineage.Skipped, SkippedFlow{Connector: cr.Name,
					Reason: "no topic or table could be read from the connector's config"})
			}
			continue
		}
		stats, err := ingest.Connectors(ctx, g, specs, ingest.ConnectorOptions{Cluster: h.clusterName()})
		if err != nil {
			out.Lineage.Skipped = append(out.Lineage.Skipped, SkippedFlow{Connector: cr.Name, Reason: err.Error()})
			continue
		}
		out.Lineage.Recorded = append(out.Lineage.Recorded, cr.Name)
		out.Lineage.AssetsCreated += stats.AssetsCreated
		out.Lineage.EdgesCreated += stats.EdgesCreated
	}
	return nil
}

var validateConnectorTool = mcpserver.Tool{
	Name:  "validate_connector_config",
	Title: "Validate a connector config",
	Description: "Asks the Kafka Connect cluster to validate a proposed connector config against the installed plugin (PUT /connector-plugins/{plugin}/config/validate) and returns the cluster's own errors per field, with the field's documentation and recommended values. " +
		"It creates and changes nothing: a person applies the config once it validates.",
	ReadOnly:   true,
	Idempotent: true,
	OpenWorld:  true,
}

func (h *handlers) validateConnector(ctx context.Context, in connect.ValidateParams) (*connect.Validation, string, error) {
	if strings.TrimSpace(in.Plugin) == "" {
		return nil, "", fmt.Errorf("plugin is empty: give the connector class (e.g. com.wepay.kafka.connect.bigquery.BigQuerySinkConnector) or its alias")
	}
	c, err := h.connectClient()
	if err != nil {
		return nil, "", err
	}
	v, err := c.Validate(ctx, strings.TrimSpace(in.Plugin), in.Config)
	if err != nil {
		return nil, "", err
	}
	return v, v.Summary() + "\nNothing was created or changed; a person applies the config.", nil
}
