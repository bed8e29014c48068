package connectors

import (
	"context"
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/connect"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/flink"
	"github.com/dataworkers/dw/internal/incidents"
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

// kafkaClient connects to the configured cluster. Building the client
// checks that a broker answers within the dial timeout (kafka.timeout in
// dw.yaml), so an unreachable cluster fails fast with the brokers and the
// timeout named.
func (h *handlers) kafkaClient(ctx context.Context) (*kafka.Client, error) {
	kc := h.d.Config.Kafka
	if kc == nil || len(kc.Brokers) == 0 {
		return nil, fmt.Errorf("no kafka configured: set kafka.brokers in dw.yaml (and kafka.name, the cluster name used in asset ids such as kafka://prod/<topic>)")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.kafka != nil {
		return h.kafka, nil
	}
	cfg := kafka.Config{Brokers: kc.Brokers, TLS: kc.TLS, DialTimeout: kc.Timeout}
	if kc.SASL != nil {
		user, err := config.Secret(kc.SASL.UsernameEnv, "kafka.sasl.username_env")
		if err != nil {
			return nil, err
		}
		pass, err := config.Secret(kc.SASL.PasswordEnv, "kafka.sasl.password_env")
		if err != nil {
			return nil, err
		}
		cfg.SASL = &kafka.SASL{Mechanism: kc.SASL.Mechanism, Username: user, Password: pass}
	}
	c, err := kafka.NewClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	h.kafka = c
	return c, nil
}

// registryClient builds the Schema Registry client; credentials come from
// the environment variables dw.yaml names.
func (h *handlers) registryClient() (*registry.Client, error) {
	sc := h.d.Config.SchemaRegistry
	if sc == nil || strings.TrimSpace(sc.URL) == "" {
		return nil, fmt.Errorf("no schema registry configured: set schema_registry.url in dw.yaml (e.g. http://localhost:8081)")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.registry != nil {
		return h.registry, nil
	}
	cfg := registry.Config{URL: sc.URL, Timeout: sc.Timeout}
	if sc.UsernameEnv != "" {
		u, err := config.Secret(sc.UsernameEnv, "schema_registry.username_env")
		if err != nil {
			return nil, err
		}
		cfg.Username = u
	}
	if sc.PasswordEnv != "" {
		p, err := config.Secret(sc.PasswordEnv, "schema_registry.password_env")
		if err != nil {
			return nil, err
		}
		cfg.Password = p
	}
	c, err := registry.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("schema_registry in dw.yaml: %w", err)
	}
	h.registry = c
	return c, nil
}

// connectClient builds the Kafka Connect client.
func (h *handlers) connectClient() (*connect.Client, error) {
	cc := h.d.Config.KafkaConnect
	if cc == nil || strings.TrimSpace(cc.URL) == "" {
		return nil, fmt.Errorf("no kafka connect configured: set kafka_connect.url in dw.yaml (any worker, e.g. http://connect:8083)")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.connect != nil {
		return h.connect, nil
	}
	c, err := connect.NewClient(cc.URL, cc.Timeout)
	if err != nil {
		return nil, fmt.Errorf("kafka_connect.url in dw.yaml: %w", err)
	}
	h.connect = c
	return c, nil
}

// flinkClient builds the Flink JobManager client.
func (h *handlers) flinkClient() (*flink.Client, error) {
	fc := h.d.Config.Flink
	if fc == nil || strings.TrimSpace(fc.URL) == "" {
		return nil, fmt.Errorf("no flink configured: set flink.url in dw.yaml (the JobManager REST address, e.g. http://jobmanager:8081)")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.flink != nil {
		return h.flink, nil
	}
	c, err := flink.NewClient(fc.URL, fc.Timeout)
	if err != nil {
		return nil, fmt.Errorf("flink.url in dw.yaml: %w", err)
	}
	h.flink = c
	return c, nil
}

// lineageGraph is the context graph in the shared store. One Graph is kept
// so its in-memory index is reused between calls; it reloads by itself when
// another process changes the graph.
func (h *handlers) lineageGraph(ctx context.Context) (*lineage.Graph, error) {
	db, err := h.d.Store(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.graph == nil || h.graph.DB() != db {
		h.graph = lineage.New(db, h.d.Clock)
	}
	return h.graph, nil
}

// changeLog is the incidents change log in the shared store.
func (h *handlers) changeLog(ctx context.Context) (*incidents.Service, error) {
	db, err := h.d.Store(ctx)
	if err != nil {
		return nil, err
	}
	return &incidents.Service{DB: db, Clock: h.d.Clock}, nil
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
