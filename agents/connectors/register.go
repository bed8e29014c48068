package connectors

import (
	"context"
	"github.com/dataworkers/dw/internal/changelog"
	"strings"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/connect"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/deps/clients"
	"github.com/dataworkers/dw/internal/flink"
	"github.com/dataworkers/dw/internal/kafka"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/registry"
)

// Register adds the tools with the given dependencies.
func Register(s *mcpserver.Server, d *deps.Deps) {
	h := &handlers{d: d}
	mcpserver.Add(s, consumerLagTool, h.consumerLag)
	mcpserver.Add(s, topicHealthTool, h.topicHealth)
	mcpserver.Add(s, connectorStatusTool, h.connectorStatus)
	mcpserver.Add(s, validateConnectorTool, h.validateConnector)
	mcpserver.Add(s, listSubjectsTool, h.listSubjects)
	mcpserver.Add(s, latestSchemaTool, h.latestSchema)
	mcpserver.Add(s, registerSchemaTool, h.registerSchema)
	mcpserver.Add(s, emitLineageTool, h.emitLineage)
	mcpserver.Add(s, flinkRestoresTool, h.flinkRestores)
	registerRuns(s, h)
}

// defaultCluster names the Kafka cluster in asset ids (kafka://<cluster>/<topic>)
// and in stored lag samples when dw.yaml gives no kafka.name.
const defaultCluster = "default"

// clusterName is the Kafka cluster's name as asset ids spell it.
func (h *handlers) clusterName() string {
	if k := h.d.Config.Kafka; k != nil && strings.TrimSpace(k.Name) != "" {
		return strings.TrimSpace(k.Name)
	}
	return defaultCluster
}

// The clients to external systems are built and held by deps
// (internal/deps/clients): on the first call that needs one, kept for the
// agent's life, and not kept when building failed, so a system that comes
// up later is picked up by the next call.

// kafkaClient connects to the configured cluster; ctx bounds the broker
// reachability check made when the client is first built.
func (h *handlers) kafkaClient(ctx context.Context) (*kafka.Client, error) {
	return clients.Kafka(ctx, h.d)
}

// registryClient is the Schema Registry client.
func (h *handlers) registryClient() (*registry.Client, error) { return clients.Registry(h.d) }

// connectClient is the Kafka Connect client.
func (h *handlers) connectClient() (*connect.Client, error) { return clients.Connect(h.d) }

// flinkClient is the Flink JobManager client.
func (h *handlers) flinkClient() (*flink.Client, error) { return clients.Flink(h.d) }

// lineageGraph is the context graph in the shared store, held by deps so
// its in-memory index is reused between calls; it reloads by itself when
// another process changes the graph.
func (h *handlers) lineageGraph(ctx context.Context) (*lineage.Graph, error) {
	return h.d.Graph(ctx)
}

// changeLog is the change log in the shared store.
func (h *handlers) changeLog(ctx context.Context) (*changelog.Log, error) {
	db, err := h.d.Store(ctx)
	if err != nil {
		return nil, err
	}
	return &changelog.Log{DB: db, Clock: h.d.Clock}, nil
}

// approvalService applies the approval rules against the shared store.
// No owner lookup is given: this agent never proposes, it only checks
// proposals people have already decided.
func (h *handlers) approvalService(ctx context.Context) (*approvals.Service, error) {
	db, err := h.d.Store(ctx)
	if err != nil {
		return nil, err
	}
	return approvals.New(db, h.d.Config, h.d.Clock, nil), nil
}
