package connectors

import (
	"context"
	"fmt"
	"github.com/dataworkers/dw/internal/changelog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// t0 is a Tuesday afternoon, the stories' day.
var t0 = time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)

// env is one agent's handlers over a fresh store, with a fake clock and a
// configuration whose approver is the OS user running the test, so the
// terminal channel can decide as them.
type env struct {
	t   testing.TB
	cfg *config.Config
	clk *clock.Fake
	d   *deps.Deps
	h   *handlers
}

// newEnv builds the handlers with the given extra dw.yaml sections
// (kafka:, schema_registry:, …).
func newEnv(t testing.TB, sections string) *env {
	t.Helper()
	home := t.TempDir()
	t.Setenv("DW_HOME", home)
	yaml := fmt.Sprintf(`home: %s
people:
  - {id: olivia, name: Olivia Owner, os_users: [%q]}
  - {id: carol, name: Carol Other, os_users: [carol-is-not-a-login]}
domains:
  - name: streaming
    assets: ["schema://*", "kafka://*", "flink://*", "connect://*"]
    autonomy: L2
    owners: [olivia]
    copy: [carol]
    approval_expiry: 2h
`, home, config.CurrentOSUser()) + sections
	cfg, err := config.Parse("dw.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	clk := clock.NewFake(t0)
	d := deps.New(Name, cfg, clk, nil)
	t.Cleanup(func() { d.Close() })
	return &env{t: t, cfg: cfg, clk: clk, d: d, h: &handlers{d: d}}
}

func (e *env) db() *store.DB {
	e.t.Helper()
	db, err := e.d.Store(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return db
}

func (e *env) approvals() *approvals.Service {
	return approvals.New(e.db(), e.cfg, e.clk, nil)
}

func (e *env) graph() *lineage.Graph {
	e.t.Helper()
	g, err := e.h.lineageGraph(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return g
}

// changes lists the change log entries touching an asset.
func (e *env) changes(asset string) []changelog.Change {
	e.t.Helper()
	svc := &changelog.Log{DB: e.db(), Clock: e.clk}
	list, err := svc.ListChanges(context.Background(), changelog.ChangeFilter{Asset: asset})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Changes
}

// note records lineage facts a team would record once.
func (e *env) note(n lineage.Note) {
	e.t.Helper()
	if _, err := e.graph().RecordLineage(context.Background(), n); err != nil {
		e.t.Fatalf("record lineage: %v", err)
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

// newHangingServer accepts requests and answers none until release is
// closed (or the client gives up), like a wedged worker.
func newHangingServer(t *testing.T, release chan struct{}) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// engines runs fn against a fresh SQLite store and a fresh PostgreSQL
// schema, as storetest.Each does for repositories, passing the store:
// section of dw.yaml that selects it ("" for the SQLite default).
func engines(t *testing.T, fn func(t *testing.T, storeYAML string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "") })
	t.Run("postgres", func(t *testing.T) {
		fn(t, fmt.Sprintf("store:\n  driver: postgres\n  url: %q\n", storetest.PostgresSchemaURL(t)))
	})
}
