// Package snowflaketest speaks enough of Snowflake's REST protocol for
// gosnowflake to log in, run a statement, compile one without running it
// (describe only) and abort one, served on loopback and recording what the
// driver sent: the one Snowflake fake, for the driver's own tests and for
// tests that run it in a warehouse child process. Tests only.
package snowflaketest

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Result is what a statement returns: its columns as Snowflake's rowtype
// entries (Column) and its cells as the JSON result format sends them,
// text or nil.
type Result struct {
	Columns []map[string]any
	Rows    [][]*string
}

// Column is a nullable column of a Snowflake type as the rowtype names it
// (fixed, real, text, boolean, timestamp_ntz, ...).
func Column(name, typ string) map[string]any {
	return map[string]any{"name": name, "type": typ, "nullable": true, "scale": 0, "precision": 38, "length": 16777216}
}

// Text is a cell.
func Text(s string) *string { return &s }

// Fake is the service. Set its fields before the first request, or under Mu.
type Fake struct {
	Mu sync.Mutex
	// Results maps a SQL substring to what a statement containing it
	// returns; a statement matching none fails the test.
	Results map[string]Result
	// CompileErrors maps a SQL substring to the SQL compilation error
	// (SQLSTATE 42000) Snowflake answers a statement containing it with.
	CompileErrors map[string]string
	// Hang makes a statement wait until the client gives up.
	Hang bool

	t       testing.TB
	srv     *httptest.Server
	login   map[string]any
	queries []map[string]any
	aborts  int
}

// New starts the service on loopback; it stops when the test ends.
func New(t testing.TB) *Fake {
	f := &Fake{t: t, Results: map[string]Result{}, CompileErrors: map[string]string{}}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

// Addr is the host and port to give the driver, over plain HTTP
// (snowflake.Config Host, Port and Protocol "http").
func (f *Fake) Addr() (host string, port int) {
	h, p, _ := net.SplitHostPort(strings.TrimPrefix(f.srv.URL, "http://"))
	port, _ = strconv.Atoi(p)
	return h, port
}

// Login is the body of the last login request.
func (f *Fake) Login() map[string]any {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.login
}

// Queries are the query request bodies received, in order, so tests
// assert on the JSON the real driver sends.
func (f *Fake) Queries() []map[string]any {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return append([]map[string]any(nil), f.queries...)
}

// Aborts counts the abort requests received: statements cancelled in
// Snowflake rather than left running.
func (f *Fake) Aborts() int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.aborts
}

// ServeHTTP routes the login, query and abort requests; the others the
// driver sends (heartbeat, logout) succeed.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	_ = json.Unmarshal(body, &req)
	switch r.URL.Path {
	case "/session/v1/login-request":
		f.Mu.Lock()
		f.login = req
		f.Mu.Unlock()
		writeJSON(w, map[string]any{"success": true, "data": map[string]any{
			"token": "session-token", "masterToken": "master-token", "sessionId": 1,
			"validityInSeconds": 3600, "masterValidityInSeconds": 14400,
			"sessionInfo": map[string]any{"databaseName": "ANALYTICS"},
		}})
	case "/queries/v1/query-request":
		f.query(w, r, req)
	case "/queries/v1/abort-request":
		f.Mu.Lock()
		f.aborts++
		f.Mu.Unlock()
		writeJSON(w, map[string]any{"success": true})
	default:
		writeJSON(w, map[string]any{"success": true})
	}
}

const queryID = "01b2c3d4-0000-0000-0000-000000000001"

func (f *Fake) query(w http.ResponseWriter, r *http.Request, req map[string]any) {
	sql, _ := req["sqlText"].(string)
	f.Mu.Lock()
	f.queries = append(f.queries, req)
	hang := f.Hang
	var compileErr string
	for k, msg := range f.CompileErrors {
		if strings.Contains(sql, k) {
			compileErr = msg
		}
	}
	var res *Result
	for k, v := range f.Results {
		if strings.Contains(sql, k) {
			res = &v
		}
	}
	f.Mu.Unlock()
	if hang {
		<-r.Context().Done()
		return
	}
	if compileErr != "" {
		writeJSON(w, map[string]any{"success": false, "code": "001003", "message": compileErr,
			"data": map[string]any{"sqlState": "42000", "queryId": queryID}})
		return
	}
	// Describe only: compiled, never run, so no rows.
	describe, _ := req["describeOnly"].(bool)
	if res == nil && describe {
		res = &Result{}
	}
	if res == nil {
		f.t.Errorf("snowflaketest: no canned result for %s", sql)
		writeJSON(w, map[string]any{"success": false, "code": "000603", "message": "snowflaketest: no canned result",
			"data": map[string]any{"sqlState": "XX000", "queryId": queryID}})
		return
	}
	rows := res.Rows
	if describe {
		rows = nil
	}
	if rows == nil {
		rows = [][]*string{}
	}
	cols := res.Columns
	if cols == nil {
		cols = []map[string]any{}
	}
	writeJSON(w, map[string]any{"success": true, "data": map[string]any{
		"rowtype": cols, "rowset": rows, "total": len(rows), "returned": len(rows),
		"queryId": queryID, "queryResultFormat": "json",
	}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
