package connectors

import (
	"context"
	"strings"

	"github.com/dataworkers/dw/internal/lineage/ingest"
	"github.com/dataworkers/dw/internal/lineageforward"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// EmitLineageIn is one OpenLineage run event.
type EmitLineageIn struct {
	Event      map[string]any `json:"event" jsonschema:"an OpenLineage RunEvent: eventType, eventTime (ISO-8601 with offset), run.runId (UUID), job.namespace and job.name, inputs and outputs (namespace and name each, e.g. kafka://broker:9092 + topic), producer and schemaURL (URIs)"`
	ProposalID string         `json:"proposal_id,omitempty" jsonschema:"approved lineage_event proposal whose action binds exactly this event (its canonical SHA-256), its job and the configured openlineage.url; only then is the event forwarded. Without it the event is stored in the context graph only"`
}

// Forwarding says what happened to the event at the configured
// OpenLineage endpoint.
type Forwarding struct {
	URL    string `json:"url" jsonschema:"where the event was posted"`
	Status int    `json:"status,omitempty" jsonschema:"HTTP status the endpoint answered"`
	OK     bool   `json:"ok" jsonschema:"true when the endpoint accepted the event (2xx)"`
	Error  string `json:"error,omitempty" jsonschema:"why forwarding failed; the event is stored in the context graph regardless"`
}

// EmitLineageOut says what was stored and forwarded.
type EmitLineageOut struct {
	Stored    ingest.OpenLineageImportResult `json:"stored" jsonschema:"what the event added to the context graph"`
	Forwarded *Forwarding                    `json:"forwarded,omitempty" jsonschema:"the post to openlineage.url; absent when none is configured or no approval was given"`
	// NotForwarded says why an event was kept in the store only.
	NotForwarded string `json:"not_forwarded,omitempty" jsonschema:"why the event was not posted to openlineage.url (no approved proposal binds it)"`
	EventSHA256  string `json:"event_sha256" jsonschema:"canonical SHA-256 of the event: what a lineage_event proposal binds to allow forwarding it"`
	Proposal     string `json:"proposal,omitempty" jsonschema:"the approved proposal the event was forwarded under"`
}

var emitLineageTool = mcpserver.Tool{
	Name:  "emit_lineage_event",
	Title: "Emit an OpenLineage event",
	Description: "Validates an OpenLineage RunEvent against the fields the spec requires (each problem named by its field) and stores its job, inputs and outputs (with schema and column-lineage facets) in the context graph, so streams and batch share one lineage. " +
		"Posting it to openlineage.url ({url}/api/v1/lineage, bearer token named by openlineage.token_env) is a write outside Data Workers' store, so it happens only under an approved lineage_event proposal whose action binds this event's SHA-256, its job and that URL, never under the org-wide stop, and once per approval (a retry returns the first answer). " +
		"Without proposal_id the event is stored only. An invalid event or a refused forward changes nothing. What the event says of a dataset replaces what the graph recorded. " +
		"Use it for one event that should also reach the OpenLineage endpoint; to load many events you already have into the graph only, use import_openlineage_events (dw-context-catalog).",
	ReadOnly:    false,
	Destructive: true,
	Idempotent:  true,
	OpenWorld:   true,
}

func (h *handlers) emitLineage(ctx context.Context, in EmitLineageIn) (*EmitLineageOut, string, error) {
	f := &lineageforward.Forwarder{Actor: Name, Endpoint: h.d.Config.OpenLineage, KafkaNamespaces: h.kafkaNamespaces(),
		Graph: h.lineageGraph, Approvals: h.approvalService}
	res, err := f.Emit(ctx, lineageforward.Request{Event: in.Event, ProposalID: in.ProposalID})
	if err != nil {
		return nil, "", err
	}
	out := &EmitLineageOut{Stored: res.Stored, NotForwarded: res.NotForwarded, EventSHA256: res.EventSHA256, Proposal: res.Proposal}
	if fw := res.Forwarded; fw != nil {
		out.Forwarded = &Forwarding{URL: fw.URL, Status: fw.Status, OK: fw.OK, Error: fw.Error}
	}
	return out, res.Summary, nil
}

// kafkaNamespaces maps the configured brokers, as they appear in
// kafka://host:port namespaces, to the cluster's name, so topics in events
// get the same ids as topics read from Kafka.
func (h *handlers) kafkaNamespaces() map[string]string {
	k := h.d.Config.Kafka
	if k == nil {
		return nil
	}
	m := map[string]string{}
	for _, b := range k.Brokers {
		m[strings.TrimSpace(b)] = h.clusterName()
	}
	return m
}
