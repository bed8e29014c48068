package incidents

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// TestMetricSQLCannotLeaveTheWarehouse is the reported exploit and its
// cousins, as a client sends them: define_metric with SQL that reads a
// file, a URL or writes somewhere is refused with a clear error, and a
// definition with such SQL written into the store behind the tool's back
// is refused by monitor_metrics before anything runs. No byte of the
// secret file appears in any answer, no HTTP request is made, no file is
// written, and no definition is stored.
func TestMetricSQLCannotLeaveTheWarehouse(t *testing.T) {
	s := newStory(t, "billing")
	cs := client(t, s)
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	marker := "MARKER" + hex.EncodeToString(b)
	dir := t.TempDir()
	secret := filepath.Join(dir, "shadow")
	if err := os.WriteFile(secret, []byte("value\n"+marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintf(w, "value\n%s\n", marker)
	}))
	t.Cleanup(srv.Close)
	// A view over read_text, as a loader with file access could leave.
	w, err := duckdb.OpenWrite(s.ctx, s.whPath, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Exec(fmt.Sprintf(`CREATE VIEW usage.leak AS SELECT content FROM read_text('%s')`, secret)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	home := os.Getenv("DW_HOME")
	var storeFiles []string
	entries, _ := os.ReadDir(home)
	for _, e := range entries {
		if p := filepath.Join(home, e.Name()); e.Type().IsRegular() && p != s.whPath && !strings.HasPrefix(e.Name(), "demo.duckdb") {
			storeFiles = append(storeFiles, p)
		}
	}
	if len(storeFiles) == 0 {
		t.Fatalf("no store file in %s", home)
	}

	const (
		external   = "file and network access are disabled"
		notASelect = "SELECT"
	)
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	cases := []struct{ name, sql, want string }{
		{"read_text", "SELECT content AS value FROM read_text(" + q(secret) + ")", external},
		{"READ_TEXT", "SELECT content AS value FROM READ_TEXT(" + q(secret) + ")", external},
		{`"read_text"`, `SELECT content AS value FROM "read_text"(` + q(secret) + ")", external},
		{"read_text in a CTE", "WITH s AS (SELECT content FROM read_text(" + q(secret) + ")) SELECT content AS value FROM s", external},
		{"a view over read_text", "SELECT content AS value FROM usage.leak", external},
		{"read_csv", "SELECT value FROM read_csv(" + q(secret) + ")", external},
		{"read_csv_auto", "SELECT value FROM read_csv_auto(" + q(secret) + ")", external},
		{"read_blob", "SELECT content AS value FROM read_blob(" + q(secret) + ")", external},
		{"read_blob of the store", "SELECT content AS value FROM read_blob(" + q(storeFiles[0]) + ")", external},
		{"read_blob of the warehouse", "SELECT content AS value FROM read_blob(" + q(s.whPath) + ")", external},
		{"read_parquet", "SELECT * FROM read_parquet(" + q(secret) + ")", external},
		{"glob", "SELECT file AS value FROM glob(" + q(dir+"/*") + ")", external},
		{"an http URL", "SELECT value FROM read_csv(" + q(srv.URL+"/x.csv") + ")", external},
		{"COPY TO", "COPY usage.usage_hourly TO " + q(filepath.Join(dir, "out.csv")), notASelect},
		{"ATTACH", "ATTACH " + q(storeFiles[0]) + " AS st", notASelect},
		{"INSTALL", "INSTALL httpfs", notASelect},
		{"LOAD", "LOAD httpfs", notASelect},
		{"a second statement", "SELECT 1 AS value; SELECT content FROM read_text(" + q(secret) + ")", "one statement"},
		{"SET", "SET enable_external_access = true", notASelect},
		{"PRAGMA", "PRAGMA table_info('usage.usage_hourly')", notASelect},
		{"CREATE TABLE", "CREATE TABLE usage.x AS SELECT 1 AS value", notASelect},
		{"EXPORT DATABASE", "EXPORT DATABASE " + q(filepath.Join(dir, "export")), notASelect},
	}
	leaks := func(t *testing.T, what, text string) {
		t.Helper()
		if strings.Contains(text, marker) || strings.Contains(text, marker[:12]) || strings.Contains(text, "SQLite format") {
			t.Errorf("%s carries file contents: %s", what, text)
		}
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("escape_%d", i)
			got := callErr(t, cs, "define_metric", map[string]any{"name": name, "description": "d", "asset": "duckdb://usage.usage_hourly",
				"warehouse": "demo", "sql": c.sql, "grain": "snapshot"})
			if !strings.Contains(got, c.want) {
				t.Errorf("define_metric: %q does not say %q", got, c.want)
			}
			leaks(t, "define_metric", got)
			t.Logf("define_metric: %s", got)
			var stored int
			if err := s.db().QueryRowContext(s.ctx, `SELECT count(*) FROM incident_metrics WHERE name = ?`, name).Scan(&stored); err != nil || stored != 0 {
				t.Fatalf("refused definition stored: %d %v", stored, err)
			}

			// The same SQL stored behind the tool's back.
			now := time.Now().UnixMilli()
			if _, err := s.db().ExecContext(s.ctx, `INSERT INTO incident_metrics (name, description, asset, unit, source, warehouse, sql_text,
				value_column, time_column, grain, direction, symptom_kind, column_name, moves_with, created_ms, updated_ms)
				VALUES (?, 'd', 'duckdb://usage.usage_hourly', '', 'sql', 'demo', ?, 'value', '', '', 'both', 'value', '', '[]', ?, ?)`,
				name, c.sql, now, now); err != nil {
				t.Fatal(err)
			}
			got = callErr(t, cs, "monitor_metrics", map[string]any{"metric": name})
			if !strings.Contains(got, c.want) {
				t.Errorf("monitor_metrics: %q does not say %q", got, c.want)
			}
			leaks(t, "monitor_metrics", got)
			t.Logf("monitor_metrics: %s", got)
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the HTTP server was asked %d times", n)
	}
	for _, p := range []string{"out.csv", "export"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	// A metric that stays inside the warehouse is still defined and computed.
	call(t, cs, "define_metric", map[string]any{"name": "usage_rows", "description": "rows landed", "asset": "duckdb://usage.usage_hourly",
		"warehouse": "demo", "sql": "SELECT count(*) AS value FROM usage.usage_hourly", "grain": "snapshot"}, nil)
	var mon struct {
		Recorded int `json:"recorded"`
	}
	call(t, cs, "monitor_metrics", map[string]any{"metric": "usage_rows"}, &mon)
	if mon.Recorded != 1 {
		t.Errorf("the warehouse metric recorded %d points, want 1", mon.Recorded)
	}
}
