package incidents

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/demo"
	"github.com/dataworkers/dw/internal/demo/tables"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/packload"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/warehouses"
)

// storyNow is the 15:05 check of the pack day, a Tuesday.
var storyNow = time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)

// story is one scenario pack loaded the way a team would run it: the
// warehouse in a DuckDB file, the graph, change log and metrics in a
// SQLite store under t.TempDir(), dw.yaml with the pack's people and
// domains, and a fake clock at the story's instants.
type story struct {
	t      *testing.T
	ctx    context.Context
	cfg    *config.Config
	clk    *clock.Fake
	d      *deps.Deps
	h      *handlers
	tl     demo.Instants
	pack   *demo.Pack
	whPath string
}

// storyRegistry is the Schema Registry the stories' config names; nothing
// is registered there in these tests.
const storyRegistry = "http://schema-registry.internal:8081"

func newStory(t *testing.T, pack string) *story {
	t.Helper()
	ctx := context.Background()
	home := t.TempDir()
	t.Setenv("DW_HOME", home)
	whPath := filepath.Join(home, "demo.duckdb")
	// A schema_version approval binds the registry it is carried out at.
	cfg, err := config.Parse("dw.yaml", []byte(fmt.Sprintf("home: %s\nwarehouses:\n  - {name: demo, kind: duckdb, path: %q}\nschema_registry: {url: %q}\n", home, whPath, storyRegistry)))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	p, tl, err := packload.Read(pack, storyNow)
	if err != nil {
		t.Fatalf("read pack %s: %v", pack, err)
	}
	cfg.People, cfg.Domains = p.People, p.Domains
	clk := clock.NewFake(tl.QualityCheck)
	d := deps.New(Name, cfg, clk, nil)
	d.OpenWarehouse = warehouses.Open
	t.Cleanup(func() { d.Close() })
	if err := tables.LoadWarehouse(ctx, whPath, pack, storyNow); err != nil {
		t.Fatalf("load warehouse: %v", err)
	}
	s := &story{t: t, ctx: ctx, cfg: cfg, clk: clk, d: d, h: &handlers{d: d}, tl: tl, pack: p, whPath: whPath}
	if _, err := packload.LoadStore(ctx, s.db(), clk, p, "demo"); err != nil {
		t.Fatalf("load store: %v", err)
	}
	return s
}

func (s *story) db() *store.DB {
	s.t.Helper()
	db, err := s.d.Store(s.ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	return db
}

func (s *story) env() *env {
	s.t.Helper()
	e, err := s.h.env(s.ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	return e
}

// osUserFor maps the login running the test to a person, so the terminal
// channel can decide as them, as `dw approve` run by that person would.
func (s *story) osUserFor(person string) {
	s.t.Helper()
	for i := range s.cfg.People {
		if s.cfg.People[i].ID == person {
			s.cfg.People[i].OSUsers = append(s.cfg.People[i].OSUsers, config.CurrentOSUser())
			return
		}
	}
	s.t.Fatalf("no person %s in the pack", person)
}

// decide records the named approver's decision at the terminal: the
// person the OS login maps to, checked by approvals like `dw approve`.
func (s *story) decide(id, login string, verdict approvals.Verdict) *approvals.Proposal {
	s.t.Helper()
	svc := approvals.New(s.db(), s.cfg, s.clk, nil)
	by, err := approvals.OSUserDecider(s.cfg, approvals.ChannelTerminal, login)
	if err != nil {
		s.t.Fatal(err)
	}
	p, err := svc.Decide(s.ctx, id, by, verdict, "checked the evidence")
	if err != nil {
		s.t.Fatalf("decide %s as %s: %v", id, login, err)
	}
	return p
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

func contained(t *testing.T, what, text string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Errorf("%s lacks %q:\n%s", what, p, text)
		}
	}
}
