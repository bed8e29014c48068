package incidents

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// fakeWarehouse records the statements it is sent and answers with rows.
type fakeWarehouse struct {
	queries []warehouse.Query
	rows    [][]any
}

func (f *fakeWarehouse) Name() string               { return "fake" }
func (f *fakeWarehouse) Dialect() warehouse.Dialect { return warehouse.DuckDB{} }
func (f *fakeWarehouse) Query(_ context.Context, q warehouse.Query) (*warehouse.Result, error) {
	if err := warehouse.ReadOnlyStatement(q.SQL); err != nil {
		return nil, err
	}
	f.queries = append(f.queries, q)
	return &warehouse.Result{Columns: []string{"bucket", "value"}, Rows: f.rows}, nil
}
func (f *fakeWarehouse) ValidateQuery(_ context.Context, sqlText string) error {
	return warehouse.ReadOnlyStatement(sqlText)
}
func (f *fakeWarehouse) ListTables(context.Context) ([]warehouse.TableRef, error) { return nil, nil }
func (f *fakeWarehouse) Describe(context.Context, warehouse.TableRef) (*warehouse.Table, error) {
	return nil, nil
}
func (f *fakeWarehouse) Close() error { return nil }

func TestComputeMetricWrapsTheStoredSQL(t *testing.T) {
	fw := &fakeWarehouse{rows: [][]any{{tue(13, 0), int64(450)}, {"2026-10-13 14:00:00", "41.5"}, {tue(15, 0), nil}}}
	def := MetricDefinition{Name: "avg_balance", Source: SourceSQL, SQL: "SELECT hour, AVG(balance) AS avg_balance FROM b GROUP BY hour -- hourly;",
		ValueColumn: "avg_balance", TimeColumn: "hour"}
	pts, err := ComputeMetric(context.Background(), fw, def, Window{Start: tue(13, 0), End: tue(16, 0)})
	if err != nil {
		t.Fatal(err)
	}
	want := "SELECT m.\"hour\" AS bucket, m.\"avg_balance\" AS value FROM (\n" +
		"SELECT hour, AVG(balance) AS avg_balance FROM b GROUP BY hour -- hourly\n" +
		") AS m WHERE m.\"hour\" >= ? AND m.\"hour\" < ? ORDER BY 1 LIMIT 10001"
	if got := fw.queries[0].SQL; got != want {
		t.Fatalf("statement:\n%s\nwant:\n%s", got, want)
	}
	if args := fw.queries[0].Args; len(args) != 2 || args[0] != tue(13, 0) || args[1] != tue(16, 0) {
		t.Fatalf("args %v", args)
	}
	// NULL records no point; strings are parsed.
	if len(pts) != 2 || pts[0].Value != 450 || !pts[1].At.Equal(tue(14, 0)) || pts[1].Value != 41.5 {
		t.Fatalf("points %+v", pts)
	}

	// A definition changed behind the tool's back is refused before it runs.
	bad := def
	bad.SQL = "SELECT 1; DELETE FROM b"
	if _, err := ComputeMetric(context.Background(), fw, bad, Window{Start: tue(13, 0), End: tue(16, 0)}); err == nil || len(fw.queries) != 1 {
		t.Fatalf("bad stored SQL: err %v, queries %d", err, len(fw.queries))
	}
	if _, err := ComputeMetric(context.Background(), fw, def, Window{Start: tue(16, 0), End: tue(13, 0)}); err == nil || !strings.Contains(err.Error(), "before or when it starts") {
		t.Fatalf("reversed window: %v", err)
	}
}

func TestComputeMetricOnDuckDB(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wh.duckdb")
	w, err := duckdb.OpenWrite(context.Background(), path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"CREATE SCHEMA loyalty",
		"CREATE TABLE loyalty.member_balances (member_id INTEGER, balance BIGINT, updated_at TIMESTAMP)",
		// 13:00 hour: balances in the hundreds; 14:00 hour: restarted from zero.
		`INSERT INTO loyalty.member_balances SELECT i, 400 + i % 100, TIMESTAMP '2026-10-13 13:00:00' + INTERVAL (i % 60) MINUTE FROM range(1000) t(i)`,
		`INSERT INTO loyalty.member_balances SELECT i, 10 + i % 5, TIMESTAMP '2026-10-13 14:00:00' + INTERVAL (i % 60) MINUTE FROM range(1000) t(i)`,
	} {
		if _, err := w.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	w.Close()
	wh, err := duckdb.Open("demo", path, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s, _ := newService(t, db, tue(15, 5), nil)
		s.OpenWarehouse = func(_ context.Context, name string) (warehouse.Warehouse, error) {
			if name != "demo" {
				t.Fatalf("opened warehouse %q", name)
			}
			return wh, nil
		}
		mustDefine(t, s, DefineMetricParams{Name: "avg_active_member_balance", Description: "average balance of members active in the hour",
			Asset: "duckdb://loyalty.member_balances", Warehouse: "demo", TimeColumn: "hour", ValueColumn: "avg_balance",
			SQL: `SELECT date_trunc('hour', updated_at) AS hour, AVG(balance) AS avg_balance
			      FROM loyalty.member_balances GROUP BY 1`})
		r := mustMonitor(t, s, MonitorParams{Metric: "avg_active_member_balance", Window: &Window{Start: tue(12, 0), End: tue(15, 0)}})
		if r.Recorded != 2 || !r.Points[0].At.Equal(tue(13, 0)) || r.Points[0].Value != 449.5 || r.Points[1].Value != 12 {
			t.Fatalf("computed %+v", r.Points)
		}
		// The default window is the last complete hour.
		r = mustMonitor(t, s, MonitorParams{Metric: "avg_active_member_balance"})
		if r.Recorded != 1 || !r.Points[0].At.Equal(tue(14, 0)) {
			t.Fatalf("default window computed %+v", r.Points)
		}
	})
}

// The refusal of SQL that does not start with SELECT or WITH quoted its
// first token whole: 65,000 control characters (no space, so one token)
// came back as 260,000 characters. It names the start of the token only.
func TestMetricSQLRefusalQuotesABoundedHead(t *testing.T) {
	for _, sqlText := range []string{strings.Repeat("\x01", 65000), strings.Repeat("é", 65000), "DELETE" + strings.Repeat("x", 90000)} {
		err := validateMetricSQL(sqlText)
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("%.20q: %v, want a refusal", sqlText, err)
		}
		if n := utf8.RuneCountInString(err.Error()); n > 400 {
			t.Errorf("%.20q: refusal of %d characters", sqlText, n)
		}
	}
	err := validateMetricSQL("DROP TABLE x")
	if err == nil || err.Error() != `metric SQL must be a single SELECT; found "DROP" (sql must start with SELECT or WITH: metrics are read-only queries)` {
		t.Errorf("short head: %v", err)
	}
}
