package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/dataworkers/dw/internal/lineage"
)

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

func TestEmitLineageEvent(t *testing.T) {
	ctx := context.Background()
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	t.Setenv("DW_TEST_OL_TOKEN", "s3cret")
	e := newEnv(t, "kafka:\n  name: prod\n  brokers: [\"broker-1:9092\"]\nopenlineage:\n  url: "+srv.URL+"/\n  token_env: DW_TEST_OL_TOKEN\n  timeout: 2s\n")

	out, summary, err := e.h.emitLineage(ctx, EmitLineageIn{Event: rollupEvent(t)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Stored.Jobs != 1 || out.Stored.Datasets != 2 || out.Stored.EdgesCreated != 2 {
		t.Errorf("stored: %+v", out.Stored)
	}
	if f := out.Forwarded; f == nil || !f.OK || f.Status != http.StatusCreated || f.URL != srv.URL+"/api/v1/lineage" {
		t.Errorf("forwarded: %+v", f)
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
	// Topics carry the configured cluster's name, like topics read from Kafka.
	lin, err := e.graph().GetLineage(ctx, lineage.LineageParams{Asset: "flink://usage-hourly-rollup"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lin.Upstream) != 1 || lin.Upstream[0].Asset.ID != "kafka://prod/api-usage" || len(lin.Downstream) != 1 || lin.Downstream[0].Asset.ID != "kafka://prod/usage-hourly" {
		t.Errorf("lineage: up %+v down %+v", lin.Upstream, lin.Downstream)
	}

	// An endpoint that refuses: the event is stored, the failure said.
	col.mu.Lock()
	col.status = http.StatusServiceUnavailable
	col.mu.Unlock()
	out, summary, err = e.h.emitLineage(ctx, EmitLineageIn{Event: rollupEvent(t)})
	if err != nil {
		t.Fatal(err)
	}
	if f := out.Forwarded; f.OK || f.Status != http.StatusServiceUnavailable || !strings.Contains(f.Error, "read-only") || !out.Stored.Unchanged {
		t.Errorf("refused forward: %+v stored %+v", f, out.Stored)
	}
	if !strings.Contains(summary, "NOT forwarded") {
		t.Errorf("summary: %s", summary)
	}
}

// TestEmitLineageEventInvalid: every missing required field is named and
// nothing is stored or forwarded.
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
	wantErr(t, err, "eventTime: is required", "run.runId", "is not a UUID", "outputs[0].name: is required", "nothing was stored or forwarded")
	var ve *lineage.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 3 {
		t.Errorf("problems: %v", err)
	}
	if len(col.bodies) != 0 {
		t.Errorf("an invalid event was forwarded")
	}
	if _, err := e.graph().GetLineage(ctx, lineage.LineageParams{Asset: "flink://usage-hourly-rollup"}); !errors.Is(err, lineage.ErrUnknownAsset) {
		t.Errorf("an invalid event was stored: %v", err)
	}

	// A token variable that is not set stops the call before anything is stored.
	e = newEnv(t, "openlineage:\n  url: "+srv.URL+"\n  token_env: DW_TEST_OL_TOKEN_UNSET\n")
	_, _, err = e.h.emitLineage(ctx, EmitLineageIn{Event: rollupEvent(t)})
	wantErr(t, err, "DW_TEST_OL_TOKEN_UNSET", "openlineage.token_env")
	if _, err := e.graph().GetLineage(ctx, lineage.LineageParams{Asset: "flink://usage-hourly-rollup"}); !errors.Is(err, lineage.ErrUnknownAsset) {
		t.Errorf("stored despite the missing token: %v", err)
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
