package connectors

import (
	"context"
	"fmt"
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
	sp, err := c.StatusPage(ctx, p, h.lineageGraph, h.clusterName(), pg)
	if err != nil {
		return nil, "", err
	}
	out := &ConnectorStatusOut{Worker: sp.Worker, Cluster: h.clusterName(), Connectors: sp.Connectors, HealthCounts: sp.HealthCounts,
		Lineage: ConnectorLineage{Recorded: sp.Lineage.Recorded, RecordedTotal: sp.Lineage.RecordedTotal,
			AssetsCreated: sp.Lineage.AssetsCreated, EdgesCreated: sp.Lineage.EdgesCreated, SkippedTotal: sp.Lineage.SkippedTotal},
		Info: sp.Info}
	for _, s := range sp.Lineage.Skipped {
		out.Lineage.Skipped = append(out.Lineage.Skipped, SkippedFlow(s))
	}
	return out, sp.Summary(), nil
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
