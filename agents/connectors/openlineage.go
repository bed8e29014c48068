package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"net/http"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/rest"
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
	if len(in.Event) == 0 {
		return nil, "", errors.New("event is empty: give an OpenLineage RunEvent object (eventType, eventTime, run, job, inputs, outputs, producer, schemaURL)")
	}
	raw, err := json.Marshal(in.Event)
	if err != nil {
		return nil, "", fmt.Errorf("event cannot be encoded as JSON: %w", err)
	}
	if err := ingest.ValidateRunEvent(raw); err != nil {
		return nil, "", fmt.Errorf("%w; nothing was stored or forwarded", err)
	}
	eventSHA, err := approvals.CanonicalSHA256(in.Event)
	if err != nil {
		return nil, "", fmt.Errorf("event %w", err)
	}
	ol := h.d.Config.OpenLineage
	configured := ol != nil && strings.TrimSpace(ol.URL) != ""
	pid := strings.TrimSpace(in.ProposalID)
	if pid != "" && !configured {
		return nil, "", errors.New("proposal_id given, but no openlineage.url is configured in dw.yaml, so there is nowhere to forward the event; nothing was stored or forwarded")
	}
	var svc *approvals.Service
	var exec *approvals.Execution
	if pid != "" {
		// The claim comes first, so a refused forward stores nothing either.
		if svc, err = h.approvalService(ctx); err != nil {
			return nil, "", err
		}
		spec, err := approvals.LineageEventAction(ol.URL, in.Event)
		if err != nil {
			return nil, "", err
		}
		exec, err = svc.BeginExecution(ctx, approvals.Action{Kind: approvals.KindLineageEvent, ProposalID: pid, Spec: spec}, Name, lineageLease(ol))
		if err != nil {
			if approvals.IsRefusal(err) {
				return nil, "", fmt.Errorf("%w; nothing was stored or forwarded", err)
			}
			return nil, "", err
		}
		if exec.Done {
			var out EmitLineageOut
			if err := json.Unmarshal(exec.Result, &out); err != nil {
				return nil, "", fmt.Errorf("proposal %s was carried out, but its recorded result is unreadable: %w", exec.ProposalID, err)
			}
			return &out, fmt.Sprintf("proposal %s was already carried out: the event was forwarded to %s; nothing was sent twice", exec.ProposalID, ol.URL), nil
		}
	}
	out, summary, err := h.storeAndForward(ctx, ol, raw, exec)
	bg := context.WithoutCancel(ctx)
	if exec != nil {
		out = orEmpty(out)
		out.EventSHA256, out.Proposal = eventSHA, exec.ProposalID
		if err != nil || out.Forwarded == nil || !out.Forwarded.OK {
			// Nothing reached the endpoint for sure: the approval stays
			// usable for the retry.
			if rerr := svc.ReleaseExecution(bg, exec); rerr != nil {
				err = errors.Join(err, rerr)
			}
		} else {
			err = h.recordForward(bg, svc, exec, out)
		}
	}
	if err != nil {
		return nil, "", err
	}
	out.EventSHA256 = eventSHA
	if configured && exec == nil {
		out.NotForwarded = fmt.Sprintf("posting to %s is a write outside Data Workers' store and needs an approved lineage_event proposal binding this event (event_sha256 %s); the event is stored in the context graph only", ol.URL, eventSHA)
		summary += "\nNOT forwarded: " + out.NotForwarded
	}
	return out, summary, nil
}

func orEmpty(o *EmitLineageOut) *EmitLineageOut {
	if o == nil {
		return &EmitLineageOut{}
	}
	return o
}

// lineageLease is how long a forward's claim on an approval holds before
// another call may take it over (its holder died): the post at the
// configured timeout, doubled, and never under a minute. A lease shorter
// than the post would let a second process post the same approved event
// while the first is still waiting for the endpoint.
func lineageLease(ol *config.Service) time.Duration {
	return max(time.Minute, 2*forwardTimeout(ol)+10*time.Second)
}

// recordForward leaves the forward on the proposal's receipt (the step,
// then executed) and finishes the claim. A claim found lost means another
// process took the approval over: said as an error, never as success.
func (h *handlers) recordForward(ctx context.Context, svc *approvals.Service, exec *approvals.Execution, out *EmitLineageOut) error {
	f := out.Forwarded
	if _, err := svc.RecordStep(ctx, exec.ProposalID, approvals.Step{Actor: Name,
		Description: fmt.Sprintf("posted the OpenLineage event (sha256 %s) to %s: HTTP %d", out.EventSHA256, f.URL, f.Status),
		Details:     map[string]any{"event_sha256": out.EventSHA256, "url": f.URL, "status": f.Status}}); err != nil {
		return fmt.Errorf("the event was forwarded, but its step could not be recorded on %s: %w", exec.ProposalID, err)
	}
	if _, err := svc.MarkExecuted(ctx, exec.ProposalID, Name, "lineage event "+out.EventSHA256+" posted to "+f.URL); err != nil {
		return fmt.Errorf("the event was forwarded, but %s could not be marked executed: %w", exec.ProposalID, err)
	}
	ok, err := svc.FinishExecution(ctx, exec, out)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("the event was forwarded, but the claim on %s was lost to another call while posting; check the receipt before emitting again", exec.ProposalID)
	}
	return nil
}

// storeAndForward stores the event in the context graph and, under an
// execution claim, posts it to the endpoint.
func (h *handlers) storeAndForward(ctx context.Context, ol *config.Service, raw []byte, exec *approvals.Execution) (*EmitLineageOut, string, error) {
	var token string
	var err error
	if exec != nil && ol.TokenEnv != "" {
		// A missing token is found before anything is stored, so a
		// misconfiguration never leaves the graph and the endpoint apart.
		if token, err = config.Secret(ol.TokenEnv, "openlineage.token_env"); err != nil {
			return nil, "", err
		}
	}
	g, err := h.lineageGraph(ctx)
	if err != nil {
		return nil, "", err
	}
	res, err := ingest.RunEvents(ctx, g, raw, ingest.OpenLineageOptions{KafkaClusters: h.kafkaNamespaces(), Validate: true})
	if err != nil {
		return nil, "", err
	}
	out := &EmitLineageOut{Stored: *res}
	var b strings.Builder
	fmt.Fprintf(&b, "stored in the context graph: %d jobs, %d datasets (%d assets new, %d edges new)", res.Jobs, res.Datasets, res.AssetsCreated, res.EdgesCreated)
	if res.WithoutDatasets > 0 {
		b.WriteString("; the event names no inputs or outputs, so it links nothing")
	}
	if exec != nil {
		out.Forwarded = forward(ctx, ol, token, raw)
		if out.Forwarded.OK {
			fmt.Fprintf(&b, "\nforwarded to %s (%d) under %s", out.Forwarded.URL, out.Forwarded.Status, exec.Permit.Basis)
		} else {
			fmt.Fprintf(&b, "\nNOT forwarded to %s: %s (the event is stored here; emit it again to retry)", out.Forwarded.URL, out.Forwarded.Error)
		}
	}
	return out, b.String(), nil
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

// defaultForwardTimeout bounds the post when openlineage.timeout is unset.
const defaultForwardTimeout = 10 * time.Second

// forwardTimeout is how long one post may take.
func forwardTimeout(ol *config.Service) time.Duration {
	if ol.Timeout <= 0 {
		return defaultForwardTimeout
	}
	return ol.Timeout
}

// maxForwardAnswer caps what is read of the endpoint's answer: only its
// status and the start of an error body are used.
const maxForwardAnswer = 1 << 20

// forward posts the event to the configured endpoint. Failures are
// reported, not returned: the event is already in the context graph.
func forward(ctx context.Context, ol *config.Service, token string, raw []byte) *Forwarding {
	const path = "/api/v1/lineage"
	f := &Forwarding{URL: strings.TrimRight(strings.TrimSpace(ol.URL), "/") + path}
	base, err := rest.ParseBase(ol.URL)
	if err != nil {
		f.Error = fmt.Sprintf("openlineage.url %q in dw.yaml is not an http(s) URL such as http://marquez:5000", ol.URL)
		return f
	}
	c := rest.New(base, rest.Options{Name: "openlineage", Timeout: forwardTimeout(ol), MaxResponseBytes: maxForwardAnswer, Auth: rest.BearerAuth(token)})
	f.URL = c.Endpoint(path, nil)
	resp, err := c.Do(ctx, http.MethodPost, path, nil, raw)
	var te *rest.TransportError
	switch {
	case errors.As(err, &te) && te.TimedOut:
		f.Error = fmt.Sprintf("no answer from %s within %s", f.URL, forwardTimeout(ol))
		return f
	case errors.As(err, &te):
		f.Error = fmt.Sprintf("cannot reach %s (timeout %s): %v", f.URL, forwardTimeout(ol), te.Err)
		return f
	case err != nil:
		f.Error = err.Error()
		return f
	}
	f.Status = resp.Status
	f.OK = resp.OK()
	if !f.OK {
		f.Error = fmt.Sprintf("%s answered %d: %s", f.URL, resp.Status, rest.Trim(resp.Body, 4096))
	}
	return f
}
