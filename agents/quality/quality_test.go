package quality

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
	"github.com/dataworkers/dw/internal/warehouses"
)

// day is the judged day; the clock reads 15:00 on it, so today's window
// holds hours 0 to 14, all landed.
var day = time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)

// qualityFixture is a DuckDB warehouse with two tables of 21 days of
// hourly history and today: s.healthy lands 100 rows an hour with an
// amount on every row; s.broken does the same until today, when a fifth of
// the amounts are null. The store is a SQLite file in a temporary home.
func qualityFixture(t *testing.T) (*handlers, string) {
	t.Helper()
	ctx := context.Background()
	home := t.TempDir()
	t.Setenv("DW_HOME", home)
	path := filepath.Join(home, "q.duckdb")
	db, err := duckdb.OpenWrite(ctx, path, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := day.AddDate(0, 0, -21)
	hours := 21*24 + 15
	todayFrom := 21 * 24
	table := func(name string, broken bool) string {
		nulls := "FALSE"
		if broken {
			nulls = fmt.Sprintf("h >= %d AND i %% 5 = 0", todayFrom)
		}
		return fmt.Sprintf(`CREATE TABLE s.%s AS SELECT TIMESTAMP '%s' + INTERVAL (h) HOUR + INTERVAL (i * 30) SECOND AS event_time,
			h * 1000 + i AS id, CASE WHEN %s THEN NULL ELSE i * 1.5 END AS amount
			FROM range(0, %d) a(h), range(0, 100) b(i)`, name, start.Format("2006-01-02 15:04:05"), nulls, hours)
	}
	for _, q := range []string{"CREATE SCHEMA s", table("healthy", false), table("broken", true)} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%.80s: %v", q, err)
		}
	}
	db.Close()
	cfg, err := config.Parse("dw.yaml", []byte(fmt.Sprintf("home: %s\nwarehouses:\n  - {name: w, kind: duckdb, path: %q}\n", home, path)))
	if err != nil {
		t.Fatal(err)
	}
	d := deps.New(Name, cfg, clock.NewFake(day.Add(15*time.Hour)), nil)
	d.OpenWarehouse = warehouses.Open
	t.Cleanup(func() { d.Close() })
	return &handlers{d: d}, path
}

// recordHistory records the three weeks before today, as a first check does.
func recordHistory(t *testing.T, h *handlers, table string) {
	t.Helper()
	out, _, err := h.runQualityCheck(context.Background(), RunIn{CheckRequest: checks.CheckRequest{Table: table,
		Since: day.AddDate(0, 0, -21).Format(time.RFC3339), Until: day.Format(time.RFC3339), Bucket: "hour"}, NoIncident: true})
	if err != nil {
		t.Fatalf("record %s history: %v", table, err)
	}
	if len(out.Incidents) != 0 {
		t.Fatalf("a history backfill with no_incident opened %v", out.Incidents)
	}
}

// roundTrip decodes an answer as a client would, from its JSON.
func roundTrip[T any](t *testing.T, v any) T {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("answer does not decode: %v\n%s", err, raw)
	}
	return out
}

type parsedCheck struct {
	Status    string   `json:"status"`
	Problems  []string `json:"problems"`
	Summary   string   `json:"summary"`
	Incidents []struct {
		ID     string `json:"id"`
		Opened bool   `json:"opened"`
	} `json:"incidents"`
	Results []struct {
		Metric    string `json:"metric"`
		Dimension string `json:"dimension"`
		Status    string `json:"status"`
	} `json:"results"`
}

// TestHealthyTableIsQuietAnomalousTableIsFlagged: judged against its own
// three weeks, a healthy table passes today with no problem and no
// incident; the same table with a fifth of today's amounts null is
// anomalous on null_rate(amount), names the nulls problem, and opens an
// incident. Both read from the parsed answer.
func TestHealthyTableIsQuietAnomalousTableIsFlagged(t *testing.T) {
	h, _ := qualityFixture(t)
	ctx := context.Background()
	for _, table := range []string{"s.healthy", "s.broken"} {
		recordHistory(t, h, table)
	}
	today := RunIn{CheckRequest: checks.CheckRequest{Table: "s.healthy", Period: "today", Bucket: "hour"}}
	out, summary, err := h.runQualityCheck(ctx, today)
	if err != nil {
		t.Fatal(err)
	}
	healthy := roundTrip[parsedCheck](t, out)
	if healthy.Status != "pass" || len(healthy.Problems) != 0 || len(healthy.Incidents) != 0 {
		t.Errorf("healthy table: status %s problems %v incidents %v\n%s", healthy.Status, healthy.Problems, healthy.Incidents, summary)
	}

	today.Table = "s.broken"
	out, summary, err = h.runQualityCheck(ctx, today)
	if err != nil {
		t.Fatal(err)
	}
	broken := roundTrip[parsedCheck](t, out)
	if broken.Status != "anomalous" && broken.Status != "fail" {
		t.Errorf("broken table: status %s\n%s", broken.Status, summary)
	}
	if !slices.Contains(broken.Problems, "nulls") || slices.Contains(broken.Problems, "volume") {
		t.Errorf("broken table: problems %v, want nulls only", broken.Problems)
	}
	flagged := false
	for _, r := range broken.Results {
		if r.Metric == "null_rate" && r.Dimension == "amount" {
			flagged = r.Status == "anomalous" || r.Status == "fail"
		}
	}
	if !flagged {
		t.Errorf("null_rate(amount) not flagged: %+v", broken.Results)
	}
	if len(broken.Incidents) != 1 || !broken.Incidents[0].Opened || broken.Incidents[0].ID == "" {
		t.Errorf("broken table: incidents %+v, want one opened", broken.Incidents)
	}
	if !strings.Contains(summary, broken.Incidents[0].ID) {
		t.Errorf("the summary does not name the incident: %s", summary)
	}
}

// TestNoHistoryIsNotJudged: a first check with no history says so first
// and at the top level, never an all-clear.
func TestNoHistoryIsNotJudged(t *testing.T) {
	h, _ := qualityFixture(t)
	out, summary, err := h.runQualityCheck(context.Background(), RunIn{CheckRequest: checks.CheckRequest{Table: "s.healthy", Period: "today", Bucket: "hour"}})
	if err != nil {
		t.Fatal(err)
	}
	got := roundTrip[parsedCheck](t, out)
	if got.Status != string(checks.NotJudged) {
		t.Errorf("status %q with no history, want not_judged", got.Status)
	}
	if !strings.Contains(got.Summary, "NOT JUDGED") || strings.Contains(got.Summary, "no volume") {
		t.Errorf("summary reads as an all-clear: %s", summary)
	}
}

// TestHostileInputsChangeNothing: SQL in a table name, a NUL, a huge
// name and an unknown warehouse each get a clear error, and neither the
// warehouse nor the store changes.
func TestHostileInputsChangeNothing(t *testing.T) {
	h, path := qualityFixture(t)
	ctx := context.Background()
	recordHistory(t, h, "s.healthy")
	db, err := h.d.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	countIncidents := func() int {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM incidents`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := countIncidents()
	cases := []struct {
		name string
		in   RunIn
		want string
	}{
		{"SQL in the table name", RunIn{CheckRequest: checks.CheckRequest{Table: "s.healthy; DROP TABLE s.healthy"}}, "s.healthy"},
		{"quote injection", RunIn{CheckRequest: checks.CheckRequest{Table: `s."healthy"" OR 1=1 --`}}, ""},
		{"NUL in the table name", RunIn{CheckRequest: checks.CheckRequest{Table: "s.heal\x00thy"}}, ""},
		{"huge table name", RunIn{CheckRequest: checks.CheckRequest{Table: strings.Repeat("x", 1<<20)}}, ""},
		{"unknown warehouse", RunIn{CheckRequest: checks.CheckRequest{Table: "s.healthy"}, Warehouse: "prod"}, "w"},
		{"SQL in the time column", RunIn{CheckRequest: checks.CheckRequest{Table: "s.healthy", Period: "today", TimeColumn: "event_time); DROP TABLE s.broken; --"}}, ""},
		{"unknown period", RunIn{CheckRequest: checks.CheckRequest{Table: "s.healthy", Period: "tomorrow"}}, "today"},
	}
	for _, c := range cases {
		out, _, err := h.runQualityCheck(ctx, c.in)
		if err == nil {
			t.Errorf("%s: accepted (%+v)", c.name, out)
			continue
		}
		msg := err.Error()
		if len(msg) > 2000 || strings.ContainsRune(msg, 0) {
			t.Errorf("%s: the error is not fit to show (%d bytes): %.300s", c.name, len(msg), msg)
		}
		if c.want != "" && !strings.Contains(msg, c.want) {
			t.Errorf("%s: error %q does not say what is valid (%q)", c.name, msg, c.want)
		}
	}
	if n := countIncidents(); n != before {
		t.Errorf("hostile inputs opened %d incidents", n-before)
	}
	w, err := duckdb.Open("check", path, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	refs, err := w.ListTables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 {
		t.Errorf("the warehouse changed: %d tables, want the 2 it had", len(refs))
	}
}

// TestListTablesTextNamesColumns: a text-only client gets every column's
// name in list_tables' text, and the structured answer has them too.
func TestListTablesTextNamesColumns(t *testing.T) {
	h, _ := qualityFixture(t)
	s, err := mcpserver.New(mcpserver.Agent{Name: Name, Register: func(s *mcpserver.Server) error { Register(s, h.d); return nil }}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.MCP.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_tables", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	for _, want := range []string{"s.healthy (", "s.broken (", "event_time", "amount", "id "} {
		if !strings.Contains(text, want) {
			t.Errorf("list_tables text lacks %q:\n%s", want, text)
		}
	}
	out := roundTrip[ListTablesOut](t, res.StructuredContent)
	if len(out.Tables) != 2 || len(out.Tables[0].Columns) != 3 {
		t.Errorf("structured answer: %+v", out.Tables)
	}
}
