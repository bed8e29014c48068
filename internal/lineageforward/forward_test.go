package lineageforward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

const agent = "dw-connectors"

var t0 = time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)

// rollupEvent is a Flink job's run event: api-usage in, usage-hourly out.
func rollupEvent(t testing.TB) map[string]any {
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

func (c *collector) posts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.bodies)
}

func (c *collector) answer(status int) {
	c.mu.Lock()
	c.status = status
	c.mu.Unlock()
}

// world is a forward's surroundings: an OpenLineage endpoint, a store
// (opened again by open, as a second process would), the approvals
// service people decide through, and a Forwarder on one store handle.
type world struct {
	t    testing.TB
	cfg  *config.Config
	clk  *clock.Fake
	col  *collector
	url  string
	db   *store.DB
	svc  *approvals.Service
	open func() *store.DB
	f    *Forwarder
}

// engines runs fn against a fresh SQLite store and a fresh PostgreSQL
// schema; open opens another handle to the same store.
func engines(t *testing.T, fn func(t *testing.T, open func(testing.TB) *store.DB)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "dw.db")
		fn(t, func(tb testing.TB) *store.DB {
			return opened(tb, func() (*store.DB, error) { return store.OpenSQLite(context.Background(), path) })
		})
	})
	t.Run("postgres", func(t *testing.T) {
		url := storetest.PostgresSchemaURL(t)
		fn(t, func(tb testing.TB) *store.DB {
			return opened(tb, func() (*store.DB, error) { return store.OpenPostgres(context.Background(), url) })
		})
	})
}

func opened(tb testing.TB, open func() (*store.DB, error)) *store.DB {
	tb.Helper()
	db, err := open()
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// sqlite opens one SQLite store in the test's directory.
func sqlite(t *testing.T) func(testing.TB) *store.DB {
	path := filepath.Join(t.TempDir(), "dw.db")
	return func(tb testing.TB) *store.DB {
		return opened(tb, func() (*store.DB, error) { return store.OpenSQLite(context.Background(), path) })
	}
}

// newWorld configures the endpoint with the given openlineage: lines
// (the url is always the collector's; "-" configures no endpoint).
func newWorld(t *testing.T, open func(testing.TB) *store.DB, olYAML string) *world {
	t.Helper()
	col := &collector{}
	srv := httptest.NewServer(col)
	t.Cleanup(srv.Close)
	section := "openlineage:\n  url: " + srv.URL + "/\n  timeout: 2s\n" + olYAML
	if olYAML == "-" {
		section = ""
	}
	cfg, err := config.Parse("dw.yaml", []byte(fmt.Sprintf(`home: %s
people:
  - {id: olivia, name: Olivia Owner, os_users: [%q]}
domains:
  - name: streaming
    assets: ["kafka://*", "flink://*", "openlineage://**"]
    autonomy: L2
    owners: [olivia]
    approval_expiry: 2h
`, t.TempDir(), config.CurrentOSUser())+section))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	w := &world{t: t, cfg: cfg, clk: clock.NewFake(t0), col: col, url: srv.URL, open: func() *store.DB { return open(t) }}
	w.db = w.open()
	w.svc = approvals.New(w.db, cfg, w.clk, nil)
	w.f = w.forwarder(w.db)
	return w
}

// forwarder is a Forwarder over one store handle, as one agent process
// holds.
func (w *world) forwarder(db *store.DB) *Forwarder {
	g := lineage.New(db, w.clk)
	return &Forwarder{
		Actor:           agent,
		Endpoint:        w.cfg.OpenLineage,
		KafkaNamespaces: map[string]string{"broker-1:9092": "prod"},
		Graph:           func(context.Context) (*lineage.Graph, error) { return g, nil },
		Approvals:       func(context.Context) (*approvals.Service, error) { return approvals.New(db, w.cfg, w.clk, nil), nil },
	}
}

// approve proposes forwarding ev to the endpoint and has olivia approve it.
func (w *world) approve(ev map[string]any) *approvals.Proposal {
	w.t.Helper()
	action, err := approvals.LineageEventAction(w.url+"/", ev)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx := context.Background()
	p, err := w.svc.Propose(ctx, approvals.NewProposal{Kind: approvals.KindLineageEvent, What: "post the rollup's RUNNING event to Marquez",
		Why: "Marquez lacks the streaming job", Targets: []string{action.Asset}, Undo: "delete the run in Marquez", Action: action, Proposer: "dw-incidents"})
	if err != nil {
		w.t.Fatal(err)
	}
	by, err := approvals.OSUserDecider(w.cfg, approvals.ChannelTerminal, config.CurrentOSUser())
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.svc.Decide(ctx, p.ID, by, approvals.VerdictApprove, ""); err != nil {
		w.t.Fatal(err)
	}
	return p
}

func (w *world) emit(ev map[string]any, proposalID string) (*Result, error) {
	return w.f.Emit(context.Background(), Request{Event: ev, ProposalID: proposalID})
}

// steps lists the step entries of a receipt.
func (w *world) steps(receiptID string) []approvals.Entry {
	w.t.Helper()
	es, err := approvals.Entries(context.Background(), w.db, receiptID)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []approvals.Entry
	for _, e := range es {
		if e.Kind == approvals.EntryStep {
			out = append(out, e)
		}
	}
	return out
}

func (w *world) state(id string) approvals.State {
	w.t.Helper()
	p, err := w.svc.Get(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return p.State
}

// nothingStored proves the rollup job is not in the context graph.
func (w *world) nothingStored() {
	w.t.Helper()
	if _, err := lineage.New(w.db, w.clk).GetLineage(context.Background(), lineage.LineageParams{Asset: "flink://usage-hourly-rollup"}); !errors.Is(err, lineage.ErrUnknownAsset) {
		w.t.Errorf("the event was stored: %v", err)
	}
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

// TestStoredOnlyWithoutApproval: without a proposal the event is stored,
// not posted, and the answer names the hash a proposal must bind.
func TestStoredOnlyWithoutApproval(t *testing.T) {
	w := newWorld(t, sqlite(t), "")
	out, err := w.emit(rollupEvent(t), "")
	if err != nil {
		t.Fatal(err)
	}
	want, err := approvals.CanonicalSHA256(rollupEvent(t))
	if err != nil {
		t.Fatal(err)
	}
	if out.Stored.Jobs != 1 || out.Stored.Datasets != 2 || out.Stored.EdgesCreated != 2 || out.EventSHA256 != want {
		t.Errorf("stored: %+v", out)
	}
	if out.Forwarded != nil || out.Proposal != "" || !strings.Contains(out.NotForwarded, want) || w.col.posts() != 0 {
		t.Errorf("without approval: %+v, %d posts", out, w.col.posts())
	}
	// Topics carry the configured cluster's name.
	lin, err := lineage.New(w.db, w.clk).GetLineage(context.Background(), lineage.LineageParams{Asset: "flink://usage-hourly-rollup"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lin.Upstream) != 1 || lin.Upstream[0].Asset.ID != "kafka://prod/api-usage" || len(lin.Downstream) != 1 || lin.Downstream[0].Asset.ID != "kafka://prod/usage-hourly" {
		t.Errorf("lineage: up %+v down %+v", lin.Upstream, lin.Downstream)
	}

	// Without an endpoint there is nothing to say about forwarding.
	bare := newWorld(t, sqlite(t), "-")
	out, err = bare.emit(rollupEvent(t), "")
	if err != nil || out.Forwarded != nil || out.NotForwarded != "" || out.Stored.Jobs != 1 {
		t.Errorf("no endpoint: %+v, %v", out, err)
	}
}

// TestForwardedOnceUnderApproval: the approved event is posted once with
// the token, recorded as one step, the proposal executed; a retry answers
// the first result without posting.
func TestForwardedOnceUnderApproval(t *testing.T) {
	t.Setenv("DW_TEST_OL_TOKEN", "s3cret")
	w := newWorld(t, sqlite(t), "  token_env: DW_TEST_OL_TOKEN\n")
	p := w.approve(rollupEvent(t))
	out, err := w.emit(rollupEvent(t), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f := out.Forwarded; f == nil || !f.OK || f.Status != http.StatusCreated || f.URL != w.url+"/api/v1/lineage" || out.Proposal != p.ID || out.Stored.Jobs != 1 {
		t.Errorf("forwarded: %+v", out)
	}
	if len(w.col.bodies) != 1 || w.col.auth[0] != "Bearer s3cret" || w.col.paths[0] != "POST /api/v1/lineage" {
		t.Fatalf("endpoint got %v %v", w.col.paths, w.col.auth)
	}
	var sent map[string]any
	if err := json.Unmarshal(w.col.bodies[0], &sent); err != nil || sent["eventType"] != "RUNNING" {
		t.Errorf("sent body: %s", w.col.bodies[0])
	}
	steps := w.steps(p.ReceiptID)
	if len(steps) != 1 || steps[0].Actor != agent {
		t.Fatalf("steps: %+v", steps)
	}
	var step struct {
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal(steps[0].Payload, &step); err != nil || step.Details["event_sha256"] != out.EventSHA256 || step.Details["url"] != out.Forwarded.URL {
		t.Errorf("step payload: %s (%v)", steps[0].Payload, err)
	}
	if s := w.state(p.ID); s != approvals.StateExecuted {
		t.Errorf("proposal is %s, want executed", s)
	}

	again, err := w.emit(rollupEvent(t), p.ID)
	if err != nil || again.Forwarded == nil || *again.Forwarded != *out.Forwarded || again.EventSHA256 != out.EventSHA256 || again.Proposal != p.ID || w.col.posts() != 1 {
		t.Errorf("retry: %+v, %v, %d posts", again, err, w.col.posts())
	}
	if n := len(w.steps(p.ReceiptID)); n != 1 {
		t.Errorf("after the retry %d steps, want 1", n)
	}
}

// TestRefusedPostKeepsTheApproval: an endpoint that refuses is reported,
// nothing is recorded on the receipt, and the approval stays usable, so
// the retry posts.
func TestRefusedPostKeepsTheApproval(t *testing.T) {
	w := newWorld(t, sqlite(t), "")
	p := w.approve(rollupEvent(t))
	w.col.answer(http.StatusServiceUnavailable)
	out, err := w.emit(rollupEvent(t), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f := out.Forwarded; f.OK || f.Status != http.StatusServiceUnavailable || !strings.Contains(f.Error, "read-only") || out.Stored.Jobs != 1 {
		t.Errorf("refused forward: %+v", out)
	}
	if s := w.state(p.ID); s != approvals.StateApproved || len(w.steps(p.ReceiptID)) != 0 {
		t.Errorf("after a refused post: proposal %s, steps %+v", s, w.steps(p.ReceiptID))
	}
	w.col.answer(0)
	if out, err = w.emit(rollupEvent(t), p.ID); err != nil || !out.Forwarded.OK || w.col.posts() != 2 {
		t.Errorf("retry after the endpoint recovered: %+v, %v, %d posts", out, err, w.col.posts())
	}
	if s := w.state(p.ID); s != approvals.StateExecuted || len(w.steps(p.ReceiptID)) != 1 {
		t.Errorf("after the retry: proposal %s, %d steps", s, len(w.steps(p.ReceiptID)))
	}
}

// TestRefusals: what an approval does not bind is refused, named, and
// neither stored nor posted; the org-wide stop halts posting; a proposal
// with no endpoint configured is bad input.
func TestRefusals(t *testing.T) {
	w := newWorld(t, sqlite(t), "")
	p := w.approve(rollupEvent(t))
	other := rollupEvent(t)
	other["run"] = map[string]any{"runId": "0192963f-f6f8-71c0-8380-500bc70883ff"}
	renamed := rollupEvent(t)
	renamed["job"].(map[string]any)["name"] = "billing-rollup"
	cases := []struct {
		name string
		ev   map[string]any
		want string
	}{
		{"another event", other, "key 'event_sha256' changed"},
		{"another job", renamed, "approved lineage_job flink-prod/usage-hourly-rollup, requested flink-prod/billing-rollup"},
	}
	for _, c := range cases {
		_, err := w.emit(c.ev, p.ID)
		if !approvals.IsRefusal(err) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was stored or forwarded") {
			t.Errorf("%s: %v, want a refusal naming %q", c.name, err, c.want)
		}
	}
	w.nothingStored()

	if _, err := w.svc.Stop(context.Background(), "ops-oncall", "incident freeze"); err != nil {
		t.Fatal(err)
	}
	_, err := w.emit(rollupEvent(t), p.ID)
	if !approvals.IsRefusal(err) || !strings.Contains(err.Error(), `org-wide stop in force`) || !strings.Contains(err.Error(), "incident freeze") {
		t.Errorf("under stop: %v", err)
	}
	w.nothingStored()
	if w.col.posts() != 0 || len(w.steps(p.ReceiptID)) != 0 || w.state(p.ID) != approvals.StateApproved {
		t.Errorf("a refused forward wrote: %d posts, %d steps, proposal %s", w.col.posts(), len(w.steps(p.ReceiptID)), w.state(p.ID))
	}

	bare := newWorld(t, sqlite(t), "-")
	_, err = bare.emit(rollupEvent(t), p.ID)
	wantErr(t, err, "no openlineage.url is configured", "nothing was stored or forwarded")
	bare.nothingStored()
}

// TestInvalidEventChangesNothing: every missing required field is named,
// and an invalid event is refused before the store is opened.
func TestInvalidEventChangesNothing(t *testing.T) {
	w := newWorld(t, sqlite(t), "")
	p := w.approve(rollupEvent(t))
	reached := false
	f := &Forwarder{Actor: agent, Endpoint: w.cfg.OpenLineage,
		Graph:     func(context.Context) (*lineage.Graph, error) { reached = true; return nil, errors.New("no store") },
		Approvals: func(context.Context) (*approvals.Service, error) { reached = true; return nil, errors.New("no store") }}
	ev := rollupEvent(t)
	delete(ev, "eventTime")
	ev["run"] = map[string]any{"runId": "run-1"}
	ev["outputs"] = []any{map[string]any{"namespace": "kafka://broker-1:9092"}}
	for _, pid := range []string{"", p.ID} {
		_, err := f.Emit(context.Background(), Request{Event: ev, ProposalID: pid})
		wantErr(t, err, "eventTime: is required", "run.runId", "must be a UUID", "outputs[0].name: is required", "nothing was stored or forwarded")
		var ve *ingest.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 3 {
			t.Errorf("problems: %v", err)
		}
	}
	if _, err := f.Emit(context.Background(), Request{}); err == nil || !strings.Contains(err.Error(), "event is empty") {
		t.Errorf("empty event: %v", err)
	}
	if reached || w.col.posts() != 0 {
		t.Errorf("an invalid event reached the store (%v) or the endpoint (%d posts)", reached, w.col.posts())
	}
}

// TestMissingTokenStoresNothing: a token variable that is not set stops
// a forward before anything is stored, and the approval stays usable.
func TestMissingTokenStoresNothing(t *testing.T) {
	w := newWorld(t, sqlite(t), "  token_env: DW_TEST_OL_TOKEN_UNSET\n")
	p := w.approve(rollupEvent(t))
	_, err := w.emit(rollupEvent(t), p.ID)
	wantErr(t, err, "DW_TEST_OL_TOKEN_UNSET", "openlineage.token_env")
	w.nothingStored()
	if w.col.posts() != 0 || w.state(p.ID) != approvals.StateApproved {
		t.Errorf("%d posts, proposal %s", w.col.posts(), w.state(p.ID))
	}
	t.Setenv("DW_TEST_OL_TOKEN_UNSET", "now-set")
	if out, err := w.emit(rollupEvent(t), p.ID); err != nil || !out.Forwarded.OK {
		t.Errorf("after setting the token: %+v, %v", out, err)
	}
}

// TestTwoProcessesForwardOnce: two processes (separate store handles)
// race to forward one approved event; the endpoint gets one post, the
// receipt one step, every answer that is not "busy" is that forward, and
// each process's retry posts nothing.
func TestTwoProcessesForwardOnce(t *testing.T) {
	engines(t, func(t *testing.T, open func(testing.TB) *store.DB) {
		w := newWorld(t, open, "")
		procs := []*Forwarder{w.f, w.forwarder(w.open())}
		p := w.approve(rollupEvent(t))
		const callers = 10
		var wg sync.WaitGroup
		outs := make([]*Result, callers)
		errs := make([]error, callers)
		for i := range callers {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				outs[i], errs[i] = procs[i%2].Emit(context.Background(), Request{Event: rollupEvent(t), ProposalID: p.ID})
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
		if n := w.col.posts(); n != 1 {
			t.Errorf("%d posts reached the endpoint, want 1", n)
		}
		if n := len(w.steps(p.ReceiptID)); n != 1 {
			t.Errorf("%d receipt steps, want 1", n)
		}
		for _, f := range procs {
			again, err := f.Emit(context.Background(), Request{Event: rollupEvent(t), ProposalID: p.ID})
			if err != nil || again.Forwarded == nil || !again.Forwarded.OK || again.Proposal != p.ID {
				t.Errorf("retry: %+v, %v", again, err)
			}
		}
		if n := w.col.posts(); n != 1 {
			t.Errorf("after the retries %d posts, want 1", n)
		}
	})
}

// TestLeaseOutlastsThePost: a claim never lapses while its post may still
// be waiting for the endpoint.
func TestLeaseOutlastsThePost(t *testing.T) {
	for _, timeout := range []time.Duration{0, time.Second, 2 * time.Minute} {
		ol := &config.Service{URL: "http://marquez:5000", Timeout: timeout}
		if l := lease(ol); l < time.Minute || l <= 2*forwardTimeout(ol) {
			t.Errorf("timeout %s: lease %s", timeout, l)
		}
	}
}
