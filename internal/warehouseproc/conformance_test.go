package warehouseproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
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
	"github.com/dataworkers/dw/internal/warehouse/duckdb/duckdbtest"
	"github.com/dataworkers/dw/internal/warehouse/snowflake"
	"github.com/dataworkers/dw/internal/warehouse/snowflake/snowflaketest"
)

// The conformance suite: every behaviour an agent relies on, run against
// each driver in this process and the same driver through the warehouse
// child, which must be indistinguishable. BigQuery runs against its REST
// fake (bigquerytest), Snowflake against its own (snowflaketest), DuckDB
// against a real file.

// childEnv makes this test binary the warehouse child (TestMain).
const childEnv = "DW_TEST_WAREHOUSE_CHILD"

// serveChild is this test binary as a warehouse child: it opens what
// the agent's open frame says (openDriver) and, like the children, cancels the
// driver's context on SIGINT (unless told to die of it, as a child stuck
// past the grace period is killed).
func serveChild() int {
	ctx, stop := context.Background(), func() {}
	if os.Getenv("DW_TEST_CHILD_DIES_ON_SIGINT") == "" {
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	}
	defer stop()
	if err := Serve(ctx, os.Stdin, os.Stdout, openDriver); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	return 0
}

// openDriver opens the driver an open frame names, from the frame alone,
// as each child's OpenSection does; the Snowflake fake's address, which
// dw.yaml has no key for, comes from DW_TEST_SNOWFLAKE_ADDR.
func openDriver(ctx context.Context, o Opening) (warehouse.Warehouse, error) {
	wc := o.Warehouse
	switch wc.Kind {
	case "duckdb":
		return duckdb.Open(wc.Name, wc.Path, 5*time.Second)
	case "bigquery":
		return bigquery.Open(ctx, bigquery.Config{Name: wc.Name, Project: wc.Project, Dataset: wc.Dataset, Location: wc.Location,
			MaxBytesPerQuery: wc.MaxBytesPerQuery, MaxBytesPerSession: wc.MaxBytesPerSession, Timeout: wc.Timeout},
			option.WithEndpoint(wc.Endpoint), option.WithoutAuthentication())
	case "snowflake":
		host, port, _ := net.SplitHostPort(os.Getenv("DW_TEST_SNOWFLAKE_ADDR"))
		p, _ := strconv.Atoi(port)
		return snowflake.Open(ctx, snowflakeConfig(wc, host, p))
	}
	return nil, fmt.Errorf("unknown kind %q", wc.Kind)
}

// snowflakeConfig is the driver's configuration for a Snowflake section
// and the fake's address.
func snowflakeConfig(wc config.Warehouse, host string, port int) snowflake.Config {
	return snowflake.Config{Name: wc.Name, Account: wc.Account, User: wc.User, Database: wc.Database, PasswordEnv: wc.PasswordEnv,
		Timeout: wc.Timeout, Host: host, Port: port, Protocol: "http"}
}

// agentConfig is the configuration an agent loaded from a dw.yaml (not the
// embedded default, so no demo warehouse is seeded).
func agentConfig(t *testing.T) *config.Config {
	return &config.Config{Source: filepath.Join(t.TempDir(), "dw.yaml"), Home: t.TempDir()}
}

type subject struct {
	name   string
	kind   string // duckdb, bigquery or snowflake
	w      warehouse.Warehouse
	bq     *bigquerytest.Fake
	sf     *snowflaketest.Fake
	starts *int // children started, for the subjects through the child
	// killed: the child dies on the cancel signal, so nothing it did in the
	// cancelled call reaches the agent but what the next child re-books.
	killed bool
}

// bqSection is the BigQuery warehouse of the BigQuery subjects, with
// budgets of 300 bytes per query and 350 per session.
func bqSection(name, endpoint string) config.Warehouse {
	return config.Warehouse{Name: name, Kind: "bigquery", Project: "acme-prod", Dataset: "loyalty", Location: "US", Endpoint: endpoint,
		MaxBytesPerQuery: 300, MaxBytesPerSession: 350, Timeout: 10 * time.Second}
}

// sfSection is the Snowflake warehouse of the Snowflake subjects.
func sfSection(name string) config.Warehouse {
	return config.Warehouse{Name: name, Kind: "snowflake", Account: "acme", User: "dw_reader", Database: "ANALYTICS",
		PasswordEnv: "DW_TEST_SF_PASSWORD", Timeout: 10 * time.Second}
}

// subjects opens the sessions, each fresh.
func subjects(t *testing.T) []subject {
	t.Helper()
	ctx := context.Background()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// DuckDB: one real file for both.
	path := filepath.Join(t.TempDir(), "wh.duckdb")
	duckdbtest.File(t, path, `CREATE SCHEMA s`, `CREATE TABLE s.t AS SELECT range AS id, 'x' || range AS name FROM range(10)`)
	duckDirect, err := duckdb.Open("t", path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { duckDirect.Close() })

	newBQ := func() *bigquerytest.Fake {
		f := bigquerytest.New(t)
		f.Estimate, f.Billed = 100, 100
		f.Results["SELECT 1"] = bigquerytest.Result{Fields: []map[string]any{bigquerytest.Field("n", "INTEGER")}, Rows: [][]any{{"1"}}}
		f.Results["INFORMATION_SCHEMA.COLUMNS"] = bigquerytest.Result{
			Fields: []map[string]any{bigquerytest.Field("column_name", "STRING"), bigquerytest.Field("data_type", "STRING"), bigquerytest.Field("is_nullable", "BOOLEAN"), bigquerytest.Field("ordinal_position", "INTEGER")},
			Rows:   [][]any{{"id", "INT64", "false", "1"}, {"name", "STRING", "true", "2"}}}
		return f
	}
	bqDirectFake := newBQ()
	bqc := bqSection("bq", bqDirectFake.URL())
	bqDirect, err := bigquery.Open(ctx, bigquery.Config{Name: bqc.Name, Project: bqc.Project, Dataset: bqc.Dataset, Location: bqc.Location,
		MaxBytesPerQuery: bqc.MaxBytesPerQuery, MaxBytesPerSession: bqc.MaxBytesPerSession, Timeout: bqc.Timeout},
		option.WithEndpoint(bqc.Endpoint), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bqDirect.Close() })
	bqChildFake, bqKilledFake := newBQ(), newBQ()

	// Snowflake answers in its catalog spelling: upper-case names.
	newSF := func() *snowflaketest.Fake {
		f := snowflaketest.New(t)
		text := snowflaketest.Text
		f.Results["SELECT 1"] = snowflaketest.Result{Columns: []map[string]any{snowflaketest.Column("N", "fixed")}, Rows: [][]*string{{text("1")}}}
		f.Results["INFORMATION_SCHEMA.TABLES"] = snowflaketest.Result{
			Columns: []map[string]any{snowflaketest.Column("TABLE_CATALOG", "text"), snowflaketest.Column("TABLE_SCHEMA", "text"), snowflaketest.Column("TABLE_NAME", "text")},
			Rows:    [][]*string{{text("ANALYTICS"), text("S"), text("T")}}}
		f.Results["INFORMATION_SCHEMA.COLUMNS"] = snowflaketest.Result{
			Columns: []map[string]any{snowflaketest.Column("COLUMN_NAME", "text"), snowflaketest.Column("DATA_TYPE", "text"), snowflaketest.Column("N", "boolean"), snowflaketest.Column("ORDINAL_POSITION", "fixed")},
			Rows:    [][]*string{{text("ID"), text("NUMBER"), text("false"), text("1")}, {text("NAME"), text("TEXT"), text("true"), text("2")}}}
		f.CompileErrors["s.nope"] = "SQL compilation error:\nObject 'S.NOPE' does not exist or not authorized."
		return f
	}
	t.Setenv("DW_TEST_SF_PASSWORD", "not-a-real-password")
	sfDirectFake, sfChildFake := newSF(), newSF()
	host, port := sfDirectFake.Addr()
	sfDirect, err := snowflake.Open(ctx, snowflakeConfig(sfSection("sf"), host, port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sfDirect.Close() })

	sfHost, sfPort := sfChildFake.Addr()
	starts := map[string]*int{}
	env := map[string][]string{
		"duck":     nil,
		"bq":       nil,
		"bqkilled": {"DW_TEST_CHILD_DIES_ON_SIGINT=1"},
		"sf":       {"DW_TEST_SNOWFLAKE_ADDR=" + net.JoinHostPort(sfHost, strconv.Itoa(sfPort))},
	}
	old := Command
	Command = func(name, _ string) (*exec.Cmd, error) {
		extra, ok := env[name]
		if !ok {
			return nil, fmt.Errorf("no test child for warehouse %q", name)
		}
		*starts[name]++
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(append(os.Environ(), childEnv+"=1"), extra...)
		return cmd, nil
	}
	t.Cleanup(func() { Command = old })
	cfg := agentConfig(t)
	child := func(wc config.Warehouse) (warehouse.Warehouse, *int) {
		starts[wc.Name] = new(int)
		w, err := Open(ctx, cfg, &wc, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w, starts[wc.Name]
	}
	duckChild, duckStarts := child(config.Warehouse{Name: "duck", Kind: "duckdb", Path: path})
	bqChild, bqStarts := child(bqSection("bq", bqChildFake.URL()))
	bqKilled, bqKilledStarts := child(bqSection("bqkilled", bqKilledFake.URL()))
	sfChild, sfStarts := child(sfSection("sf"))
	return []subject{
		{name: "duckdb/direct", kind: "duckdb", w: duckDirect},
		{name: "duckdb/child", kind: "duckdb", w: duckChild, starts: duckStarts},
		{name: "bigquery/direct", kind: "bigquery", w: bqDirect, bq: bqDirectFake},
		{name: "bigquery/child", kind: "bigquery", w: bqChild, bq: bqChildFake, starts: bqStarts},
		{name: "bigquery/child-killed", kind: "bigquery", w: bqKilled, bq: bqKilledFake, starts: bqKilledStarts, killed: true},
		{name: "snowflake/direct", kind: "snowflake", w: sfDirect, sf: sfDirectFake},
		{name: "snowflake/child", kind: "snowflake", w: sfChild, sf: sfChildFake, starts: sfStarts},
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
	"duckdb":    reflect.TypeFor[*duckdb.Warehouse](),
	"bigquery":  reflect.TypeFor[*bigquery.Warehouse](),
	"snowflake": reflect.TypeFor[*snowflake.Warehouse](),
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
			if !errors.As(err, &be) || be.Session || be.Estimate != 5000 || be.Budget != 300 || be.Warehouse != s.w.Name() {
				t.Fatalf("over the per-query budget: %#v (%v)", be, err)
			}
			want := (&bigquery.BudgetError{Warehouse: s.w.Name(), Estimate: 5000, Budget: 300}).Error()
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
		switch {
		case s.bq != nil:
			q.SQL = "SELECT 1"
			s.bq.Mu.Lock()
			s.bq.Hang = true
			s.bq.Mu.Unlock()
		case s.sf != nil:
			q.SQL = "SELECT 1"
			s.sf.Mu.Lock()
			s.sf.Hang = true
			s.sf.Mu.Unlock()
		}
		// The call is given up 300 ms after the statement reached the
		// warehouse (a fake's count moved; DuckDB's runs in the child, so
		// from the call): a fixed deadline from the call could expire on a
		// loaded machine before a child started, and then nothing is
		// running to abort.
		reached := func() bool { return true }
		switch {
		case s.bq != nil:
			_, runs0, _ := s.bq.Counts()
			reached = func() bool { _, runs, _ := s.bq.Counts(); return runs > runs0 }
		case s.sf != nil:
			n0 := len(s.sf.Queries())
			reached = func() bool { return len(s.sf.Queries()) > n0 }
		}
		cctx, cancel := context.WithCancel(ctx)
		var cancelled time.Time
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			for deadline := time.Now().Add(30 * time.Second); !reached() && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			cancelled = time.Now()
			cancel()
		}()
		_, err := s.w.Query(cctx, q)
		<-stopped
		if err == nil {
			t.Fatal("the long query finished")
		}
		if el := time.Since(cancelled); el > 3*time.Second {
			t.Errorf("cancelled call returned %v after it was given up", el)
		}
		if s.kind != "duckdb" && !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call: %v, want the context's error", err)
		}
		switch {
		case s.bq != nil:
			if _, _, cancels := s.bq.Counts(); cancels != 1 && !s.killed {
				t.Errorf("%d job cancellations reached BigQuery, want 1 (the job would run on and bill)", cancels)
			}
			s.bq.Mu.Lock()
			s.bq.Hang = false
			s.bq.Mu.Unlock()
			q.SQL = "SELECT 1"
		case s.sf != nil:
			// gosnowflake sends the abort as the statement is given up.
			for deadline := time.Now().Add(5 * time.Second); s.sf.Aborts() == 0 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if n := s.sf.Aborts(); n != 1 {
				t.Errorf("%d aborts reached Snowflake, want 1 (the statement would run on and bill)", n)
			}
			s.sf.Mu.Lock()
			s.sf.Hang = false
			s.sf.Mu.Unlock()
			q.SQL = "SELECT 1"
		default:
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
		switch s.kind {
		case "bigquery":
			ref = warehouse.TableRef{Database: "acme-prod", Schema: "loyalty", Name: "t"}
		case "snowflake":
			ref = warehouse.TableRef{Schema: "S", Name: "T"}
		}
		if s.bq == nil {
			tables, err := s.w.ListTables(ctx)
			if err != nil || len(tables) != 1 || !strings.EqualFold(tables[0].Name, "t") {
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
		if !reflect.DeepEqual(first, second) || len(first.Columns) != 2 || !strings.EqualFold(first.Columns[0].Name, "id") || first.Columns[1].Position != 2 {
			t.Fatalf("describe: %+v then %+v", first, second)
		}
		if s.bq != nil {
			if _, after, _ := s.bq.Counts(); after != before {
				t.Errorf("the second describe ran %d queries; the catalog cache should answer it", after-before)
			}
		}
	})
}
