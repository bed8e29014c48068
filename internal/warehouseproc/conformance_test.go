package warehouseproc

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"google.golang.org/api/option"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/bigquery"
	"github.com/dataworkers/dw/internal/warehouse/bigquery/bigquerytest"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// The conformance suite: every behaviour an agent relies on, run against
// each driver in this process and the same driver through the warehouse
// child, which must be indistinguishable. BigQuery runs against its REST
// fake (bigquerytest), DuckDB against a real file.

const bqChildEnv = "DW_TEST_BIGQUERY_CHILD"

// bqConfig is the BigQuery warehouse both sides open.
func bqConfig(endpointBudgets string) bigquery.Config {
	var c bigquery.Config
	_ = json.Unmarshal([]byte(endpointBudgets), &c)
	c.Name, c.Project, c.Dataset, c.Location = "bq", "acme-prod", "loyalty", "US"
	return c
}

// serveBigQueryChild is this test binary as `dw warehouse serve` for a
// BigQuery warehouse: like dw, it cancels the driver's context on SIGINT
// (unless told to die of it, as a child stuck past the grace period is
// killed).
func serveBigQueryChild() int {
	ctx, stop := context.Background(), func() {}
	if os.Getenv("DW_TEST_BIGQUERY_DIES_ON_SIGINT") == "" {
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	}
	defer stop()
	w, err := bigquery.Open(ctx, bqConfig(os.Getenv(bqChildEnv)), option.WithEndpoint(os.Getenv("DW_TEST_BIGQUERY_URL")), option.WithoutAuthentication())
	if err != nil {
		os.Stderr.WriteString(err.Error())
		return 1
	}
	defer w.Close()
	if err := Serve(ctx, os.Stdin, os.Stdout, w); err != nil {
		return 1
	}
	return 0
}

type subject struct {
	name   string
	kind   string // duckdb or bigquery
	w      warehouse.Warehouse
	bq     *bigquerytest.Fake
	starts *int // children started, for the subjects through the child
	// killed: the child dies on the cancel signal, so nothing it did in the
	// cancelled call reaches the agent but what the next child re-books.
	killed bool
}

// bqBudgets are the budgets of the BigQuery subjects: 300 bytes per
// query, 350 per session.
var bqBudgets = bigquery.Config{MaxBytesPerQuery: 300, MaxBytesPerSession: 350, Timeout: 10 * time.Second, CatalogTTL: time.Hour}

// subjects opens the four sessions, each fresh.
func subjects(t *testing.T) []subject {
	t.Helper()
	ctx := context.Background()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// DuckDB: one real file for both.
	path := filepath.Join(t.TempDir(), "wh.duckdb")
	db, err := duckdb.OpenWrite(ctx, path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`CREATE SCHEMA s`, `CREATE TABLE s.t AS SELECT range AS id, 'x' || range AS name FROM range(10)`} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	duckDirect, err := duckdb.Open("t", path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { duckDirect.Close() })

	newFake := func() *bigquerytest.Fake {
		f := bigquerytest.New(t)
		f.Estimate, f.Billed = 100, 100
		f.Results["SELECT 1"] = bigquerytest.Result{Fields: []map[string]any{bigquerytest.Field("n", "INTEGER")}, Rows: [][]any{{"1"}}}
		f.Results["INFORMATION_SCHEMA.COLUMNS"] = bigquerytest.Result{
			Fields: []map[string]any{bigquerytest.Field("column_name", "STRING"), bigquerytest.Field("data_type", "STRING"), bigquerytest.Field("is_nullable", "BOOLEAN"), bigquerytest.Field("ordinal_position", "INTEGER")},
			Rows:   [][]any{{"id", "INT64", "false", "1"}, {"name", "STRING", "true", "2"}}}
		return f
	}
	bqDirectFake := newFake()
	cfg := bqBudgets
	cfg.Name, cfg.Project, cfg.Dataset, cfg.Location = "bq", "acme-prod", "loyalty", "US"
	bqDirect, err := bigquery.Open(ctx, cfg, option.WithEndpoint(bqDirectFake.URL()), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bqDirect.Close() })
	bqChildFake, bqKilledFake := newFake(), newFake()
	budgets, _ := json.Marshal(bqBudgets)

	starts := map[string]*int{"duckdb": new(int), "bigquery": new(int), "bigquery-killed": new(int)}
	old := Command
	Command = func(name string) (*exec.Cmd, error) {
		cmd := exec.Command(self, "-test.run=^$")
		switch name {
		case "duck":
			*starts["duckdb"]++
			cmd.Env = append(os.Environ(), "DW_TEST_WAREHOUSE="+path)
		case "bq":
			*starts["bigquery"]++
			cmd.Env = append(os.Environ(), bqChildEnv+"="+string(budgets), "DW_TEST_BIGQUERY_URL="+bqChildFake.URL())
		case "bqkilled":
			*starts["bigquery-killed"]++
			cmd.Env = append(os.Environ(), bqChildEnv+"="+string(budgets), "DW_TEST_BIGQUERY_URL="+bqKilledFake.URL(), "DW_TEST_BIGQUERY_DIES_ON_SIGINT=1")
		}
		return cmd, nil
	}
	t.Cleanup(func() { Command = old })
	duckChild, err := Open(ctx, nil, &config.Warehouse{Name: "duck", Kind: "duckdb"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bqChild, err := Open(ctx, nil, &config.Warehouse{Name: "bq", Kind: "bigquery"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bqKilled, err := Open(ctx, nil, &config.Warehouse{Name: "bqkilled", Kind: "bigquery"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { duckChild.Close(); bqChild.Close(); bqKilled.Close() })
	return []subject{
		{name: "duckdb/direct", kind: "duckdb", w: duckDirect},
		{name: "duckdb/child", kind: "duckdb", w: duckChild, starts: starts["duckdb"]},
		{name: "bigquery/direct", kind: "bigquery", w: bqDirect, bq: bqDirectFake},
		{name: "bigquery/child", kind: "bigquery", w: bqChild, bq: bqChildFake, starts: starts["bigquery"]},
		{name: "bigquery/child-killed", kind: "bigquery", w: bqKilled, bq: bqKilledFake, starts: starts["bigquery-killed"], killed: true},
	}
}

func each(t *testing.T, fn func(t *testing.T, s subject)) {
	for _, s := range subjects(t) {
		t.Run(s.name, func(t *testing.T) { fn(t, s) })
	}
}

// driverOf is the in-process driver type of a kind, to ask which optional
// interfaces it implements.
var driverOf = map[string]reflect.Type{
	"duckdb":   reflect.TypeFor[*duckdb.Warehouse](),
	"bigquery": reflect.TypeFor[*bigquery.Warehouse](),
}

// TestConformanceOptionalInterfaces: whatever optional interface a driver
// implements, the proxy standing for it implements too.
func TestConformanceOptionalInterfaces(t *testing.T) {
	for _, iface := range []reflect.Type{reflect.TypeFor[checks.Preflighter](), reflect.TypeFor[sessionMeter]()} {
		for kind, drv := range driverOf {
			if drv.Implements(iface) && !reflect.TypeFor[*Proxy]().Implements(iface) {
				t.Errorf("%s implements %s but the warehouse child's proxy does not", kind, iface)
			}
		}
	}
}

// TestConformancePreflight: a split plan whose statements together pass
// the session budget is refused whole before any statement runs, with a
// budget error the caller can inspect; one within budget passes.
func TestConformancePreflight(t *testing.T) {
	each(t, func(t *testing.T, s subject) {
		ctx := context.Background()
		pf, ok := s.w.(checks.Preflighter)
		if !ok {
			if driverOf[s.kind].Implements(reflect.TypeFor[checks.Preflighter]()) {
				t.Fatal("no Preflight, though the driver has one")
			}
			t.Skipf("%s vets no plan before running it", s.kind)
		}
		q := warehouse.Query{SQL: "SELECT 1", Agent: "dw-quality", Tool: "run_quality_check"}
		if err := pf.Preflight(ctx, []warehouse.Query{q, q}); err != nil {
			t.Fatalf("a plan within budget: %v", err)
		}
		if s.bq == nil {
			return
		}
		err := pf.Preflight(ctx, []warehouse.Query{q, q, q, q})
		var be *bigquery.BudgetError
		if !errors.As(err, &be) || !be.Session || be.Estimate != 400 || be.Budget != 350 {
			t.Fatalf("a plan of 4×100 B against a 350 B session: %#v (%v)", be, err)
		}
		if _, runs, _ := s.bq.Counts(); runs != 0 {
			t.Fatalf("%d statements ran; a refused plan runs none", runs)
		}
	})
}

// TestConformanceBudgetAcrossRestarts: the session budget counts every
// statement of the session, including one cut off by a cancelled call
// (which restarts the child), so it never resets; the refusal is still a
// *bigquery.BudgetError at the caller.
func TestConformanceBudgetAcrossRestarts(t *testing.T) {
	each(t, func(t *testing.T, s subject) {
		if s.bq == nil {
			t.Skip("no scan budget on DuckDB")
		}
		ctx := context.Background()
		q := warehouse.Query{SQL: "SELECT 1", Agent: "dw-quality", Tool: "t"}
		if _, err := s.w.Query(ctx, q); err != nil {
			t.Fatal(err)
		}
		s.bq.Mu.Lock()
		s.bq.Hang = true
		s.bq.Mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := s.w.Query(cctx, q)
		cancel()
		if err == nil {
			t.Fatal("a hung query returned")
		}
		s.bq.Mu.Lock()
		s.bq.Hang = false
		s.bq.Mu.Unlock()
		if _, err := s.w.Query(ctx, q); err != nil {
			t.Fatalf("third statement (300 B of 350): %v", err)
		}
		_, err = s.w.Query(ctx, q)
		var be *bigquery.BudgetError
		if !errors.As(err, &be) || !be.Session || be.Used != 300 || be.Budget != 350 {
			t.Fatalf("fourth statement: want a session BudgetError with 300 B used, got %#v (%v)", be, err)
		}
		if s.starts != nil && *s.starts != 2 {
			t.Errorf("%d children started; the cancelled call should have restarted it once", *s.starts)
		}
		if m, ok := s.w.(sessionMeter); !ok || m.Scanned() != 300 {
			t.Errorf("Scanned() after the session = %v", s.w)
		}
	})
}

// TestConformanceTypedErrors: refusals keep their type across the pipe: a
// per-query budget refusal is a *bigquery.BudgetError with its fields, and
// a statement the engine refuses matches warehouse.ErrRefused; the text
// is the driver's.
func TestConformanceTypedErrors(t *testing.T) {
	each(t, func(t *testing.T, s subject) {
		ctx := context.Background()
		if s.bq != nil {
			s.bq.Mu.Lock()
			s.bq.Estimate = 5000
			s.bq.Mu.Unlock()
			_, err := s.w.Query(ctx, warehouse.Query{SQL: "SELECT 1"})
			var be *bigquery.BudgetError
			if !errors.As(err, &be) || be.Session || be.Estimate != 5000 || be.Budget != 300 || be.Warehouse != "bq" {
				t.Fatalf("over the per-query budget: %#v (%v)", be, err)
			}
			want := (&bigquery.BudgetError{Warehouse: "bq", Estimate: 5000, Budget: 300}).Error()
			if err.Error() != want {
				t.Errorf("text %q, want the driver's %q", err.Error(), want)
			}
			return
		}
		for _, sql := range []string{"DELETE FROM s.t", "SELECT * FROM s.nope"} {
			_, err := s.w.Query(ctx, warehouse.Query{SQL: sql})
			if sql == "DELETE FROM s.t" && !errors.Is(err, warehouse.ErrRefused) {
				t.Errorf("%s: %v, want a refusal (ErrRefused)", sql, err)
			}
			if err == nil {
				t.Errorf("%s succeeded", sql)
			}
			if verr := s.w.ValidateQuery(ctx, sql); !errors.Is(verr, warehouse.ErrRefused) {
				t.Errorf("ValidateQuery(%s) = %v, want ErrRefused", sql, verr)
			}
		}
	})
}

// TestConformanceCancellation: a cancelled call returns promptly with the
// context's error, a BigQuery job in flight is cancelled server-side (not
// left running and billing), and the next call works.
func TestConformanceCancellation(t *testing.T) {
	each(t, func(t *testing.T, s subject) {
		ctx := context.Background()
		q := warehouse.Query{SQL: "SELECT sum(hash(i)) FROM range(100000000000) t(i)"}
		if s.bq != nil {
			q.SQL = "SELECT 1"
			s.bq.Mu.Lock()
			s.bq.Hang = true
			s.bq.Mu.Unlock()
		}
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		start := time.Now()
		_, err := s.w.Query(cctx, q)
		cancel()
		if err == nil {
			t.Fatal("the long query finished")
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("cancelled call returned after %v", el)
		}
		if s.bq != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("cancelled call: %v, want the context's error", err)
			}
			if _, _, cancels := s.bq.Counts(); cancels != 1 && !s.killed {
				t.Errorf("%d job cancellations reached BigQuery, want 1 (the job would run on and bill)", cancels)
			}
			s.bq.Mu.Lock()
			s.bq.Hang = false
			s.bq.Mu.Unlock()
			q.SQL = "SELECT 1"
		} else {
			q.SQL = "SELECT count(*) FROM s.t"
		}
		res, err := s.w.Query(ctx, q)
		if err != nil || len(res.Rows) != 1 {
			t.Fatalf("the call after a cancelled one: %v %v", res, err)
		}
	})
}

// TestConformanceCatalog: tables list and describe the same through the
// child, and a described table is served from the driver's catalog cache
// the second time (BigQuery: no second INFORMATION_SCHEMA query).
func TestConformanceCatalog(t *testing.T) {
	each(t, func(t *testing.T, s subject) {
		ctx := context.Background()
		ref := warehouse.TableRef{Schema: "s", Name: "t"}
		if s.bq != nil {
			ref = warehouse.TableRef{Database: "acme-prod", Schema: "loyalty", Name: "t"}
		} else {
			tables, err := s.w.ListTables(ctx)
			if err != nil || len(tables) != 1 || tables[0].Name != "t" {
				t.Fatalf("tables: %v %v", tables, err)
			}
		}
		first, err := s.w.Describe(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		var before int
		if s.bq != nil {
			_, before, _ = s.bq.Counts()
		}
		second, err := s.w.Describe(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(first, second) || len(first.Columns) != 2 || first.Columns[0].Name != "id" {
			t.Fatalf("describe: %+v then %+v", first, second)
		}
		if s.bq != nil {
			if _, after, _ := s.bq.Counts(); after != before {
				t.Errorf("the second describe ran %d queries; the catalog cache should answer it", after-before)
			}
		}
	})
}
