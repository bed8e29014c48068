package incidents

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/agents/connectors"
	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// olEndpoint is an OpenLineage endpoint that keeps every body posted.
type olEndpoint struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (o *olEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	o.mu.Lock()
	o.bodies = append(o.bodies, body)
	o.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
}

func (o *olEndpoint) posts() [][]byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.bodies)
}

// rollupRunEvent is the Flink rollup's run event, as a job would emit it.
func rollupRunEvent(t *testing.T, eventType, runID string) map[string]any {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal([]byte(`{
		"eventType": "`+eventType+`", "eventTime": "2026-03-10T14:10:00.000Z",
		"run": {"runId": "`+runID+`"},
		"job": {"namespace": "flink-prod", "name": "usage-hourly-rollup"},
		"inputs": [{"namespace": "kafka://broker-1:9092", "name": "api-usage"}],
		"outputs": [{"namespace": "kafka://broker-1:9092", "name": "usage-hourly"}],
		"producer": "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/flink",
		"schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent"
	}`), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

const (
	runA = "0192963f-f6f8-71c0-8380-500bc70883ee"
	runB = "0192963f-f6f8-71c0-8380-500bc70883ff"
)

// connectorsClient serves dw-connectors in process on the story's store
// and config, and returns a client calling its tools as a model would.
func connectorsClient(t *testing.T, s *story) func(name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	d := deps.New(connectors.Name, s.cfg, s.clk, nil)
	t.Cleanup(func() { d.Close() })
	srv, err := mcpserver.New(mcpserver.Agent{Name: connectors.Name, Instructions: "x",
		Register: func(ms *mcpserver.Server) error { connectors.Register(ms, d); return nil }}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP.Connect(s.ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(s.ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return func(name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var out map[string]any
		if res.StructuredContent != nil {
			raw, _ := json.Marshal(res.StructuredContent)
			_ = json.Unmarshal(raw, &out)
		}
		return res, out
	}
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestLineageEventProposalEndToEnd: propose_remediation creates the
// lineage_event proposal emit_lineage_event requires, bound to exactly one
// event and shown to the approver field by field; once the named approver
// approves, dw-connectors posts exactly that event once; another event
// under the same approval, a repeat, and a post under dw stop send nothing.
func TestLineageEventProposalEndToEnd(t *testing.T) {
	s := newStory(t, "billing")
	s.osUserFor("sam")
	ol := &olEndpoint{}
	srv := httptest.NewServer(ol)
	defer srv.Close()
	s.cfg.OpenLineage = &config.Service{URL: srv.URL + "/"}
	for i := range s.cfg.Domains {
		if s.cfg.Domains[i].Name == "streaming" {
			s.cfg.Domains[i].Assets = append(s.cfg.Domains[i].Assets, "openlineage://**")
		}
	}
	id := openBilling(s)
	if _, _, err := s.h.diagnose(s.ctx, DiagnoseIn{Incident: id}); err != nil {
		t.Fatal(err)
	}
	ev := rollupRunEvent(t, "RUNNING", runA)
	spec := ProposalSpec{Kind: "lineage_event", What: "Post usage-hourly-rollup's RUNNING event to Marquez",
		Why: "Marquez lacks the streaming hop, so the billing lineage there stops at api-usage", Undo: "delete run " + runA + " from Marquez", LineageEvent: ev}

	// Hostile and malformed proposals: each refused, named, nothing sent.
	invalidEv := rollupRunEvent(t, "RUNNING", "run-1")
	delete(invalidEv, "eventTime")
	hostile := []struct {
		name string
		spec func() ProposalSpec
		want string
	}{
		{"no event", func() ProposalSpec { p := spec; p.LineageEvent = nil; return p }, "a lineage_event proposal needs lineage_event"},
		{"an event on a hold", func() ProposalSpec {
			p := spec
			p.Kind, p.Targets = "hold", []string{"airflow://dag/sync_metered_usage_to_stripe"}
			return p
		}, "lineage_event applies only to kind lineage_event"},
		{"an invalid event", func() ProposalSpec { p := spec; p.LineageEvent = invalidEv; return p }, "eventTime: is required"},
		{"targets naming another job", func() ProposalSpec {
			p := spec
			p.Targets = []string{"openlineage://flink-prod/billing-rollup"}
			return p
		}, "targets the event's job openlineage://flink-prod/usage-hourly-rollup"},
	}
	for _, c := range hostile {
		if _, _, err := s.h.propose(s.ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{c.spec()}}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	s.cfg.OpenLineage = nil
	if _, _, err := s.h.propose(s.ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{spec}}); err == nil || !strings.Contains(err.Error(), "no openlineage.url in dw.yaml") {
		t.Errorf("no endpoint configured: %v", err)
	}
	s.cfg.OpenLineage = &config.Service{URL: srv.URL + "/"}
	if ps, err := s.env().apv.List(s.ctx, approvals.Filter{}); err != nil || len(ps) != 0 {
		t.Fatalf("refused input sent %d proposals (%v)", len(ps), err)
	}

	out, _, err := s.h.propose(s.ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{spec}})
	if err != nil {
		t.Fatal(err)
	}
	p := out.Proposals[0]
	sum, err := approvals.CanonicalSHA256(ev)
	if err != nil {
		t.Fatal(err)
	}
	a := p.Action
	if p.Kind != approvals.KindLineageEvent || p.Approver != "sam" || !slices.Equal(p.Targets, []string{"openlineage://flink-prod/usage-hourly-rollup"}) || a == nil {
		t.Fatalf("proposal: %+v", p)
	}
	// datasets_sha256 is the digest of every dataset the event names.
	datasets, err := approvals.CanonicalSHA256(map[string]any{"inputs": [][2]string{{"kafka://broker-1:9092", "api-usage"}}, "outputs": [][2]string{{"kafka://broker-1:9092", "usage-hourly"}}})
	if err != nil {
		t.Fatal(err)
	}
	wantParams := map[string]any{
		"event_sha256": sum, "datasets_sha256": datasets, "event_type": "RUNNING", "event_time": "2026-03-10T14:10:00.000Z", "run_id": runA,
		"posts_to": srv.URL + "/api/v1/lineage", "inputs": []any{"kafka://broker-1:9092/api-usage"}, "inputs_count": json.Number("1"),
		"outputs": []any{"kafka://broker-1:9092/usage-hourly"}, "outputs_count": json.Number("1"),
	}
	if a.System != approvals.SystemOpenLineage || a.Target != "flink-prod/usage-hourly-rollup" || a.Location.Instance != srv.URL || a.Domain != "streaming" {
		t.Errorf("action: %+v", a)
	}
	if got := normalize(t, a.Params); !reflect.DeepEqual(got, normalize(t, wantParams)) {
		t.Errorf("action params %v, want %v", got, wantParams)
	}
	// The approver is shown every bound field: what is posted and where.
	stored, err := s.env().apv.Get(s.ctx, p.ID)
	if err != nil || stored.Action.Hash() != a.Hash() {
		t.Fatalf("stored action %+v, %v", stored.Action, err)
	}
	shown := map[string]string{}
	for _, line := range strings.Split(approvals.ElicitationRequest(*stored).Message, "\n") {
		if name, value, ok := strings.Cut(strings.TrimSpace(line), ": "); ok {
			shown[name] = value
		}
	}
	for _, f := range a.Fields() {
		if shown[f.Name] != f.Value {
			t.Errorf("confirmation form shows %s = %q, want %q", f.Name, shown[f.Name], f.Value)
		}
	}

	call := connectorsClient(t, s)
	emit := func(event map[string]any, proposal string) (*mcp.CallToolResult, map[string]any) {
		return call("emit_lineage_event", map[string]any{"event": event, "proposal_id": proposal})
	}
	// Before the decision nothing is posted.
	if res, _ := emit(ev, p.ID); !res.IsError || len(ol.posts()) != 0 {
		t.Fatalf("undecided: %s, %d posts", resultText(res), len(ol.posts()))
	}
	s.decide(p.ID, config.CurrentOSUser(), approvals.VerdictApprove)

	// Another event under the same approval: refused, nothing posted.
	if res, _ := emit(rollupRunEvent(t, "RUNNING", runB), p.ID); !res.IsError || !strings.Contains(resultText(res), "event_sha256") || len(ol.posts()) != 0 {
		t.Fatalf("another event: %s, %d posts", resultText(res), len(ol.posts()))
	}
	// The approved event: posted once, byte for byte the event approved.
	res, got := emit(ev, p.ID)
	if res.IsError || got["proposal"] != p.ID || got["event_sha256"] != sum {
		t.Fatalf("approved event: %s %v", resultText(res), got)
	}
	posts := ol.posts()
	if len(posts) != 1 {
		t.Fatalf("%d posts, want 1", len(posts))
	}
	var sent map[string]any
	if err := json.Unmarshal(posts[0], &sent); err != nil || !reflect.DeepEqual(sent, ev) {
		t.Errorf("posted %s, want the approved event", posts[0])
	}
	if sentSum, _ := approvals.CanonicalSHA256(sent); sentSum != sum {
		t.Errorf("posted event hashes %s, approved %s", sentSum, sum)
	}
	// The forward is on the receipt: a step naming the event, then
	// executed, and the proposal can never be dispatched again.
	if cur, err := s.env().apv.Get(s.ctx, p.ID); err != nil || cur.State != approvals.StateExecuted {
		t.Errorf("after the post the proposal is %v (%v), want executed", cur.State, err)
	}
	doc, err := approvals.Receipt(s.ctx, s.env().db, stored.ReceiptID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	stepNamesEvent := false
	for _, e := range doc.Entries {
		kinds = append(kinds, e.Kind)
		var pl struct {
			Details map[string]any `json:"details"`
		}
		if e.Kind == "step" && json.Unmarshal(e.Payload, &pl) == nil && pl.Details["event_sha256"] == sum {
			stepNamesEvent = true
		}
	}
	if !stepNamesEvent || !slices.Contains(kinds, "executed") || !doc.Chain.OK {
		t.Errorf("receipt after the forward: %v (step names the event: %v, chain ok: %v)", kinds, stepNamesEvent, doc.Chain.OK)
	}
	// The same approval again: the first answer, no second post.
	if res, _ := emit(ev, p.ID); res.IsError || len(ol.posts()) != 1 {
		t.Errorf("repeat: %s, %d posts", resultText(res), len(ol.posts()))
	}
	if res, _ := emit(rollupRunEvent(t, "COMPLETE", runA), p.ID); !res.IsError || len(ol.posts()) != 1 {
		t.Errorf("another event after the post: %s, %d posts", resultText(res), len(ol.posts()))
	}

	// Under dw stop an approved event is not posted.
	done := rollupRunEvent(t, "COMPLETE", runA)
	spec2 := spec
	spec2.What, spec2.LineageEvent = "Post usage-hourly-rollup's COMPLETE event to Marquez", done
	out2, _, err := s.h.propose(s.ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{spec2}})
	if err != nil {
		t.Fatal(err)
	}
	s.decide(out2.Proposals[0].ID, config.CurrentOSUser(), approvals.VerdictApprove)
	if _, err := s.env().apv.Stop(s.ctx, config.CurrentOSUser(), "lineage server migration"); err != nil {
		t.Fatal(err)
	}
	if res, _ := emit(done, out2.Proposals[0].ID); !res.IsError || !strings.Contains(resultText(res), "lineage server migration") || len(ol.posts()) != 1 {
		t.Errorf("under stop: %s, %d posts", resultText(res), len(ol.posts()))
	}
}

// normalize round-trips v through JSON, so numbers compare as numbers.
func normalize(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
