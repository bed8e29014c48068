// Package lineageforward carries out an OpenLineage run event end to end:
// the event is validated, stored in the context graph and, only under an
// approved lineage_event proposal that binds it, posted to the configured
// OpenLineage endpoint. The approval is claimed in the store first (the
// org-wide stop and autonomy checked), so two processes never post one
// approved event twice; the post is recorded as a step on the proposal's
// receipt and the proposal marked executed. emit_lineage_event in
// dw-connectors is its adapter.
package lineageforward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"github.com/dataworkers/dw/internal/rest"
)

// Request is one run event, forwarded only under ProposalID's approval.
type Request struct {
	Event      map[string]any
	ProposalID string
}

// Forwarding says what happened to the event at the configured
// OpenLineage endpoint.
type Forwarding struct {
	URL    string `json:"url"`
	Status int    `json:"status,omitempty"`
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
}

// Result says what was stored and forwarded. Its JSON is stored as the
// execution's result and read back on a retry, so its keys are those of
// the tool's answer.
type Result struct {
	Stored    ingest.OpenLineageImportResult `json:"stored"`
	Forwarded *Forwarding                    `json:"forwarded,omitempty"`
	// NotForwarded says why an event was kept in the store only.
	NotForwarded string `json:"not_forwarded,omitempty"`
	EventSHA256  string `json:"event_sha256"`
	Proposal     string `json:"proposal,omitempty"`
	// Summary is the answer for a person: what was stored, and where the
	// event was posted or why not.
	Summary string `json:"-"`
}

// Forwarder reaches what an event needs, each opened only when the call
// gets that far (an invalid event is refused before the store is opened).
type Forwarder struct {
	// Actor names the agent that claims approvals and records steps.
	Actor string
	// Endpoint is dw.yaml's openlineage section; nil or without a url,
	// events are stored only.
	Endpoint *config.Service
	// KafkaNamespaces maps kafka://host:port namespaces to the configured
	// cluster's name, so topics in events get the ids of topics read from
	// Kafka.
	KafkaNamespaces map[string]string
	Graph           func(context.Context) (*lineage.Graph, error)
	Approvals       func(context.Context) (*approvals.Service, error)
}

// Emit stores the event in the context graph and, under the approved
// proposal req names, posts it to the endpoint once. An invalid event or
// a refused forward changes nothing.
func (f *Forwarder) Emit(ctx context.Context, req Request) (*Result, error) {
	if len(req.Event) == 0 {
		return nil, errors.New("event is empty: give an OpenLineage RunEvent object (eventType, eventTime, run, job, inputs, outputs, producer, schemaURL)")
	}
	raw, err := json.Marshal(req.Event)
	if err != nil {
		return nil, fmt.Errorf("event cannot be encoded as JSON: %w", err)
	}
	if err := ingest.ValidateRunEvent(raw); err != nil {
		return nil, fmt.Errorf("%w; nothing was stored or forwarded", err)
	}
	eventSHA, err := approvals.CanonicalSHA256(req.Event)
	if err != nil {
		return nil, fmt.Errorf("event %w", err)
	}
	pid := strings.TrimSpace(req.ProposalID)
	if pid == "" {
		return f.storeOnly(ctx, raw, eventSHA)
	}
	if !f.configured() {
		return nil, errors.New("proposal_id given, but no openlineage.url is configured in dw.yaml, so there is nowhere to forward the event; nothing was stored or forwarded")
	}
	return f.forwardApproved(ctx, req.Event, raw, eventSHA, pid)
}

func (f *Forwarder) configured() bool {
	return f.Endpoint != nil && strings.TrimSpace(f.Endpoint.URL) != ""
}

// storeOnly stores an event no approval was given for, saying why it was
// not posted when an endpoint is configured.
func (f *Forwarder) storeOnly(ctx context.Context, raw []byte, eventSHA string) (*Result, error) {
	out, err := f.store(ctx, raw)
	if err != nil {
		return nil, err
	}
	out.EventSHA256 = eventSHA
	if f.configured() {
		out.NotForwarded = fmt.Sprintf("posting to %s is a write outside Data Workers' store and needs an approved lineage_event proposal binding this event (event_sha256 %s); the event is stored in the context graph only", f.Endpoint.URL, eventSHA)
		out.Summary += "\nNOT forwarded: " + out.NotForwarded
	}
	return out, nil
}

// forwardApproved claims the approval, then stores and posts the event
// under the claim. The claim comes first, so a refused forward stores
// nothing either.
func (f *Forwarder) forwardApproved(ctx context.Context, event map[string]any, raw []byte, eventSHA, pid string) (*Result, error) {
	ol := f.Endpoint
	svc, err := f.Approvals(ctx)
	if err != nil {
		return nil, err
	}
	spec, err := approvals.LineageEventAction(ol.URL, event)
	if err != nil {
		return nil, err
	}
	exec, err := svc.BeginExecution(ctx, approvals.Action{Kind: approvals.KindLineageEvent, ProposalID: pid, Spec: spec}, f.Actor, lease(ol))
	if err != nil {
		if approvals.IsRefusal(err) {
			return nil, fmt.Errorf("%w; nothing was stored or forwarded", err)
		}
		return nil, err
	}
	if exec.Done {
		return answerRetry(exec, ol.URL)
	}
	out, err := f.storeAndPost(ctx, raw, exec)
	bg := context.WithoutCancel(ctx)
	if err == nil {
		out.EventSHA256, out.Proposal = eventSHA, exec.ProposalID
	}
	if err != nil || !out.Forwarded.OK {
		// Nothing reached the endpoint for sure: the approval stays
		// usable for the retry.
		if rerr := svc.ReleaseExecution(bg, exec); rerr != nil {
			err = errors.Join(err, rerr)
		}
	} else {
		err = f.recordForward(bg, svc, exec, out)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// answerRetry answers a call for an approval an earlier call carried out:
// the first answer, nothing posted twice.
func answerRetry(exec *approvals.Execution, url string) (*Result, error) {
	var out Result
	if err := json.Unmarshal(exec.Result, &out); err != nil {
		return nil, fmt.Errorf("proposal %s was carried out, but its recorded result is unreadable: %w", exec.ProposalID, err)
	}
	out.Summary = fmt.Sprintf("proposal %s was already carried out: the event was forwarded to %s; nothing was sent twice", exec.ProposalID, url)
	return &out, nil
}

// lease is how long a forward's claim on an approval holds before another
// call may take it over (its holder died): the post at the configured
// timeout, doubled, and never under a minute. A lease shorter than the
// post would let a second process post the same approved event while the
// first is still waiting for the endpoint.
func lease(ol *config.Service) time.Duration {
	return max(time.Minute, 2*forwardTimeout(ol)+10*time.Second)
}

// recordForward leaves the forward on the proposal's receipt (the step,
// then executed) and finishes the claim. A claim found lost means another
// process took the approval over: said as an error, never as success.
func (f *Forwarder) recordForward(ctx context.Context, svc *approvals.Service, exec *approvals.Execution, out *Result) error {
	fw := out.Forwarded
	if _, err := svc.RecordStep(ctx, exec.ProposalID, approvals.Step{Actor: f.Actor,
		Description: fmt.Sprintf("posted the OpenLineage event (sha256 %s) to %s: HTTP %d", out.EventSHA256, fw.URL, fw.Status),
		Details:     map[string]any{"event_sha256": out.EventSHA256, "url": fw.URL, "status": fw.Status}}); err != nil {
		return fmt.Errorf("the event was forwarded, but its step could not be recorded on %s: %w", exec.ProposalID, err)
	}
	if _, err := svc.MarkExecuted(ctx, exec.ProposalID, f.Actor, "lineage event "+out.EventSHA256+" posted to "+fw.URL); err != nil {
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

// storeAndPost stores the event in the context graph and, under the
// execution claim, posts it to the endpoint.
func (f *Forwarder) storeAndPost(ctx context.Context, raw []byte, exec *approvals.Execution) (*Result, error) {
	ol := f.Endpoint
	var token string
	if ol.TokenEnv != "" {
		// A missing token is found before anything is stored, so a
		// misconfiguration never leaves the graph and the endpoint apart.
		var err error
		if token, err = config.Secret(ol.TokenEnv, "openlineage.token_env"); err != nil {
			return nil, err
		}
	}
	out, err := f.store(ctx, raw)
	if err != nil {
		return nil, err
	}
	out.Forwarded = post(ctx, ol, token, raw)
	if out.Forwarded.OK {
		out.Summary += fmt.Sprintf("\nforwarded to %s (%d) under %s", out.Forwarded.URL, out.Forwarded.Status, exec.Permit.Basis)
	} else {
		out.Summary += fmt.Sprintf("\nNOT forwarded to %s: %s (the event is stored here; emit it again to retry)", out.Forwarded.URL, out.Forwarded.Error)
	}
	return out, nil
}

// store adds the event's job, inputs and outputs to the context graph.
func (f *Forwarder) store(ctx context.Context, raw []byte) (*Result, error) {
	g, err := f.Graph(ctx)
	if err != nil {
		return nil, err
	}
	res, err := ingest.RunEvents(ctx, g, raw, ingest.OpenLineageOptions{KafkaClusters: f.KafkaNamespaces, Validate: true})
	if err != nil {
		return nil, err
	}
	out := &Result{Stored: *res}
	out.Summary = fmt.Sprintf("stored in the context graph: %d jobs, %d datasets (%d assets new, %d edges new)", res.Jobs, res.Datasets, res.AssetsCreated, res.EdgesCreated)
	if res.WithoutDatasets > 0 {
		out.Summary += "; the event names no inputs or outputs, so it links nothing"
	}
	return out, nil
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

// post sends the event to the configured endpoint. Failures are reported,
// not returned: the event is already in the context graph.
func post(ctx context.Context, ol *config.Service, token string, raw []byte) *Forwarding {
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
