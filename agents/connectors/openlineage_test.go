package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/lineage"
)

// The forward workflow (binding, the stop, the claim, retries, a refused
// post, a missing token) is tested in internal/lineageforward; these tests
// hold the adapter: decoding, the wiring of the endpoint, the Kafka
// cluster's name, the store and the approvals, and the answer's shape.

// rollupEvent is a Flink job's run event: api-usage in, usage-hourly out.
func rollupEvent(t *testing.T) map[string]any {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal([]byte(`{
		"eventType": "RUNNING", "eventTime": "2026-03-10T14:10:00.000Z",
		"run": {"runId": "0192963f-f6f8-71c0-8380-500bc70883ee"},
		"job": {"namespace": "flink-prod", "name": "usage-hourly-rollup",
			"facets": {"jobType": {"_producer": "https://github.com/OpenLineage/OpenLineage", "_schemaURL": "https://openlineage.io/spec/facets/2-0-3/JobTypeJobFacet.json",
				"processingType": "STREAMING", "integration": "FLINK", "jobType": "JOB"}}},
		"inputs": [{"namespace": "kafka://broker-1:9092", "name": "api-usage"}],
		"outputs": [{"namespace": "kafka://broker-1:9092", "name": "usage-hourly"}],
		"producer": "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/flink",
		"schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent"
	}`), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// collector is an OpenLineage endpoint that keeps what it is sent.
type collector struct {
	mu     sync.Mutex
	status int
	bodies [][]byte
	auth   []string
	paths  []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.bodies = append(c.bodies, body)
	c.auth = append(c.auth, r.Header.Get("Authorization"))
	c.paths = append(c.paths, r.Method+" "+r.URL.Path)
	status := c.status
	c.mu.Unlock()
	if status == 0 {
		status = http.StatusCreated
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`{"error":"lineage store is read-only"}`))
}

// lineageGate is an agent with an OpenLineage endpoint, and the approvals
// service people decide lineage_event proposals through.
type lineageGate struct {
	*env
	col *collector
	url string
	svc *approvals.Service
}

func newLineageGate(t *testing.T) *lineageGate {
	t.Helper()
	return newLineageGateOn(t, "")
}

// newLineageGateOn is newLineageGate over the store storeYAML configures
// ("" is SQLite in the test's home).
func newLineageGateOn(t *testing.T, storeYAML string) *lineageGate {
	t.Helper()
	col := &collector{}
	srv := httptest.NewServer(col)
	t.Cleanup(srv.Close)
	t.Setenv("DW_TEST_OL_TOKEN", "s3cret")
	e := newEnv(t, "kafka:\n  name: prod\n  brokers: [\"broker-1:9092\"]\nopenlineage:\n  url: "+srv.URL+"/\n  token_env: DW_TEST_OL_TOKEN\n  timeout: 2s\n"+storeYAML)
	e.cfg.Domains[0].Assets = append(e.cfg.Domains[0].Assets, "openlineage://**")
	return &lineageGate{env: e, col: col, url: srv.URL, svc: e.approvals()}
}

// approve proposes forwarding ev to the endpoint and has olivia approve it.
func (g *lineageGate) approve(ev map[string]any) *approvals.Proposal {
	g.t.Helper()
	action, err := approvals.LineageEventAction(g.url+"/", ev)
	if err != nil {
		g.t.Fatal(err)
	}
	ctx := context.Background()
	p, err := g.svc.Propose(ctx, approvals.NewProposal{Kind: approvals.KindLineageEvent, What: "post the rollup's RUNNING event to Marquez",
		Why: "Marquez lacks the streaming job", Targets: []string{action.Asset}, Undo: "delete the run in Marquez", Action: action, Proposer: "dw-incidents"})
	if err != nil {
		g.t.Fatal(err)
	}
	by, err := approvals.OSUserDecider(g.cfg, approvals.ChannelTerminal, config.CurrentOSUser())
	if err != nil {
		g.t.Fatal(err)
	}
	if _, err := g.svc.Decide(ctx, p.ID, by, approvals.VerdictApprove, ""); err != nil {
		g.t.Fatal(err)
	}
	return p
}

func (g *lineageGate) posts() int {
	g.col.mu.Lock()
	defer g.col.mu.Unlock()
	return len(g.col.bodies)
}

// TestEmitLineageEvent: an event is stored in the context graph; it is
// posted to the endpoint only under an approved proposal that binds it,
// once.
func TestEmitLineageEvent(t *testing.T) {
	ctx := context.Background()
	g := newLineageGate(t)
	col, e := g.col, g.env

	// Without an approval: stored here, not posted.
	out, summary, err := e.h.emitLineage(ctx, EmitLineageIn{Event: rollupEvent(t)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Stored.Jobs != 1 || out.Stored.Datasets != 2 || out.Stored.EdgesCreated != 2 {
		t.Errorf("stored: %+v", out.Stored)
	}
	if out.Forwarded != nil || !strings.Contains(out.NotForwarded, "needs an approved lineage_event proposal") || !strings.Contains(out.NotForwarded, out.EventSHA256) || g.posts() != 0 {
		t.Errorf("without approval: %+v, %d posts", out, g.posts())
	}
	if !strings.Contains(summary, "NOT forwarded") {
		t.Errorf("summary: %s", summary)
	}

	// Approved: posted once, and a retry answers the same without posting.
	p := g.approve(rollupEvent(t))
	out, summary, err = e.h.emitLineage(ctx, EmitLineageIn{Event: rollupEvent(t), ProposalID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	if f := out.Forwarded; f == nil || !f.OK || f.Status != http.StatusCreated || f.URL != g.url+"/api/v1/lineage" || out.Proposal != p.ID {
		t.Errorf("forwarded: %+v", out)
	}
	if !strings.Contains(summary, "forwarded to") {
		t.Errorf("summary: %s", summary)
	}
	if len(col.bodies) != 1 || col.auth[0] != "Bearer s3cret" || col.paths[0] != "POST /api/v1/lineage" {
		t.Fatalf("endpoint got %v %v", col.paths, col.auth)
	}
	var sent map[string]any
	if err := json.Unmarshal(col.bodies[0], &sent); err != nil || sent["eventType"] != "RUNNING" {
		t.Errorf("sent body: %s", col.bodies[0])
	}
	again, _, err := e.h.emitLineage(ctx, EmitLineageIn{Event: rollupEvent(t), ProposalID: p.ID})
	if err != nil || again.Forwarded == nil || !again.Forwarded.OK || g.posts() != 1 {
		t.Errorf("retry: %+v, %v, %d posts", again, err, g.posts())
	}
	// Topics carry the configured cluster's name, like topics read from Kafka.
	lin, err := e.graph().GetLineage(ctx, lineage.LineageParams{Asset: "flink://usage-hourly-rollup"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lin.Upstream) != 1 || lin.Upstream[0].Asset.ID != "kafka://prod/api-usage" || len(lin.Downstream) != 1 || lin.Downstream[0].Asset.ID != "kafka://prod/usage-hourly" {
		t.Errorf("lineage: up %+v down %+v", lin.Upstream, lin.Downstream)
	}

	// An endpoint that refuses: the failure is in the answer.
	ev := rollupEvent(t)
	ev["eventType"] = "COMPLETE"
	q := g.approve(ev)
	col.mu.Lock()
	col.status = http.StatusServiceUnavailable
	col.mu.Unlock()
	out, summary, err = e.h.emitLineage(ctx, EmitLineageIn{Event: ev, ProposalID: q.ID})
	if err != nil {
		t.Fatal(err)
	}
	if f := out.Forwarded; f.OK || f.Status != http.StatusServiceUnavailable || !strings.Contains(f.Error, "read-only") {
		t.Errorf("refused forward: %+v stored %+v", f, out.Stored)
	}
	if !strings.Contains(summary, "NOT forwarded") {
		t.Errorf("summary: %s", summary)
	}
}

// TestTwoProcessesForwardOnce: two dw-connectors (separate store handles,
// as two MCP clients' processes have) race to forward one approved event;
// the endpoint gets one post, the receipt one step, every answer that is
// not "busy" is that forward, and each process's retry posts nothing.
func TestTwoProcessesForwardOnce(t *testing.T) {
	engines(t, func(t *testing.T, storeYAML string) {
		g := newLineageGateOn(t, storeYAML)
		other := deps.New(Name, g.cfg, g.clk, nil)
		t.Cleanup(func() { other.Close() })
		procs := []*handlers{g.h, {d: other}}
		p := g.approve(rollupEvent(t))
		const callers = 10
		var wg sync.WaitGroup
		outs := make([]*EmitLineageOut, callers)
		errs := make([]error, callers)
		for i := range callers {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				outs[i], _, errs[i] = procs[i%2].emitLineage(context.Background(), EmitLineageIn{Event: rollupEvent(t), ProposalID: p.ID})
			}(i)
		}
		wg.Wait()
		answered := 0
		for i := range callers {
			var busy *approvals.BusyError
			switch {
			case errs[i] == nil:
				answered++
				if f := outs[i].Forwarded; f == nil || !f.OK || outs[i].Proposal != p.ID {
					t.Errorf("caller %d: %+v", i, outs[i])
				}
			case !errors.As(errs[i], &busy):
				t.Errorf("caller %d: %v", i, errs[i])
			}
		}
		if answered == 0 {
			t.Fatal("no caller carried the approval out")
		}
		if n := g.posts(); n != 1 {
			t.Errorf("%d posts reached the endpoint, want 1", n)
		}
		es, err := approvals.Entries(context.Background(), g.db(), p.ReceiptID)
		if err != nil {
			t.Fatal(err)
		}
		steps := 0
		for _, e := range es {
			if e.Kind == approvals.EntryStep {
				steps++
			}
		}
		if steps != 1 {
			t.Errorf("%d receipt steps, want 1", steps)
		}
		for _, h := range procs {
			again, _, err := h.emitLineage(context.Background(), EmitLineageIn{Event: rollupEvent(t), ProposalID: p.ID})
			if err != nil || again.Forwarded == nil || !again.Forwarded.OK || again.Proposal != p.ID {
				t.Errorf("retry: %+v, %v", again, err)
			}
		}
		if n := g.posts(); n != 1 {
			t.Errorf("after the retries %d posts, want 1", n)
		}
	})
}

// TestEmitLineageEventRefusals: a refusal reaches the caller as one, and
// a proposal_id with no endpoint configured is bad input.
func TestEmitLineageEventRefusals(t *testing.T) {
	ctx := context.Background()
	g := newLineageGate(t)
	p := g.approve(rollupEvent(t))
	renamed := rollupEvent(t)
	renamed["job"].(map[string]any)["name"] = "billing-rollup"
	_, _, err := g.h.emitLineage(ctx, EmitLineageIn{Event: renamed, ProposalID: p.ID})
	if !approvals.IsRefusal(err) || !strings.Contains(err.Error(), "requested flink-prod/billing-rollup") {
		t.Errorf("another job: %v, want a refusal naming it", err)
	}
	if g.posts() != 0 {
		t.Errorf("%d posts reached the endpoint", g.posts())
	}
	e := newEnv(t, "")
	if _, _, err := e.h.emitLineage(ctx, EmitLineageIn{Event: rollupEvent(t), ProposalID: p.ID}); err == nil || !strings.Contains(err.Error(), "no openlineage.url is configured") {
		t.Errorf("no endpoint: %v", err)
	}
}

// TestEmitLineageEventInvalid: the problems reach the caller as a
// ValidationError, and nothing is stored or forwarded.
func TestEmitLineageEventInvalid(t *testing.T) {
	ctx := context.Background()
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	e := newEnv(t, "openlineage:\n  url: "+srv.URL+"\n")
	ev := rollupEvent(t)
	delete(ev, "eventTime")
	ev["run"] = map[string]any{"runId": "run-1"}
	ev["outputs"] = []any{map[string]any{"namespace": "kafka://broker-1:9092"}}

	_, _, err := e.h.emitLineage(ctx, EmitLineageIn{Event: ev})
	wantErr(t, err, "eventTime: is required", "run.runId", "must be a UUID", "outputs[0].name: is required", "nothing was stored or forwarded")
	var ve *ingest.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 3 {
		t.Errorf("problems: %v", err)
	}
	if len(col.bodies) != 0 {
		t.Errorf("an invalid event was forwarded")
	}
	if _, err := e.graph().GetLineage(ctx, lineage.LineageParams{Asset: "flink://usage-hourly-rollup"}); !errors.Is(err, lineage.ErrUnknownAsset) {
		t.Errorf("an invalid event was stored: %v", err)
	}
}

// TestEmitLineageEventWithoutEndpoint stores and forwards nowhere.
func TestEmitLineageEventWithoutEndpoint(t *testing.T) {
	e := newEnv(t, "")
	out, summary, err := e.h.emitLineage(context.Background(), EmitLineageIn{Event: rollupEvent(t)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Forwarded != nil || strings.Contains(summary, "forward") || out.Stored.Jobs != 1 {
		t.Errorf("%+v %s", out, summary)
	}
	// Without a Kafka cluster name the broker address names the cluster.
	if _, err := e.graph().GetLineage(context.Background(), lineage.LineageParams{Asset: "kafka://broker-1:9092/api-usage"}); err != nil {
		t.Error(err)
	}
}
