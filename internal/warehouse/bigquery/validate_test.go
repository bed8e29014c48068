package bigquery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/api/option"

	"github.com/dataworkers/dw/internal/warehouse"
)

// TestOnlyDryRunSelectsRun: BigQuery's dry run names the statement type,
// and anything but SELECT (a script of several statements, DML, DDL,
// EXPORT DATA, LOAD DATA) is refused, by ValidateQuery and by Query, with
// no job but the free dry run ever inserted.
func TestOnlyDryRunSelectsRun(t *testing.T) {
	f := newFake(t)
	f.statementTypes = map[string]string{
		"DECLARE":     "SCRIPT",
		"EXPORT DATA": "EXPORT_DATA",
		"LOAD DATA":   "LOAD_DATA",
		"MERGE":       "MERGE",
		"EXTERNAL":    "CREATE_TABLE",
	}
	f.results["SELECT 7"] = fakeResult{fields: []map[string]any{field("n", "INTEGER")}, rows: [][]any{{"7"}}}
	wh := openFake(t, f, Config{})
	ctx := context.Background()
	for sql, want := range map[string]string{
		// What BigQuery itself classifies; each passes the cheap
		// first-word check, so only the dry run's answer stops it.
		"WITH x AS (SELECT 1) SELECT * FROM x /* DECLARE */":   "statement type SCRIPT",
		"SELECT 1 /* EXPORT DATA */":                           "statement type EXPORT_DATA",
		"SELECT 1 /* LOAD DATA */":                             "statement type LOAD_DATA",
		"(SELECT 1) /* MERGE */":                               "statement type MERGE",
		"SELECT 1 /* EXTERNAL */":                              "statement type CREATE_TABLE",
		"EXPORT DATA OPTIONS(uri='gs://b/*') AS SELECT 1":      "refusing a EXPORT statement",
		"SELECT 1; DROP TABLE loyalty.t":                       "more than one part",
		"CREATE TEMP FUNCTION f() AS (1); SELECT f() AS value": "more than one part",
	} {
		f.mu.Lock()
		before := len(f.inserts)
		f.mu.Unlock()
		verr := wh.ValidateQuery(ctx, sql)
		_, qerr := wh.Query(ctx, warehouse.Query{SQL: sql})
		for what, err := range map[string]error{"ValidateQuery": verr, "Query": qerr} {
			if !errors.Is(err, warehouse.ErrRefused) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s(%q) = %v; want a refusal saying %q", what, sql, err, want)
			}
		}
		f.mu.Lock()
		for _, job := range f.inserts[before:] {
			if dry, _ := job["configuration"].(map[string]any)["dryRun"].(bool); !dry {
				t.Errorf("%q: a real job was inserted", sql)
			}
		}
		f.mu.Unlock()
	}
	if err := wh.ValidateQuery(ctx, "SELECT 7 AS n"); err != nil {
		t.Fatalf("a SELECT was refused: %v", err)
	}
	if res, err := wh.Query(ctx, warehouse.Query{SQL: "SELECT 7 AS n"}); err != nil || res.Rows[0][0] != int64(7) {
		t.Fatalf("a SELECT did not run: %v %v", res, err)
	}
}

// TestInvalidQueryIsARefusal: BigQuery answering the dry run with 400
// invalidQuery is the statement's fault (a refusal in BigQuery's words);
// being refused access is not.
func TestInvalidQueryIsARefusal(t *testing.T) {
	f := newFake(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case bytes.Contains(body, []byte("nope")):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": 400,
				"message": "Unrecognized name: nope at [1:8]", "errors": []any{map[string]any{"reason": "invalidQuery", "message": "Unrecognized name: nope at [1:8]"}}}})
		case bytes.Contains(body, []byte("boom")):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": 403,
				"message": "Access Denied: Project acme-prod", "errors": []any{map[string]any{"reason": "accessDenied", "message": "Access Denied"}}}})
		default:
			r.Body = io.NopCloser(bytes.NewReader(body))
			f.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	wh, err := Open(context.Background(), Config{Name: "bq", Project: "acme-prod", Dataset: "loyalty", Location: "US"},
		option.WithEndpoint(srv.URL), option.WithoutAuthentication(), option.WithHTTPClient(&http.Client{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	ctx := context.Background()
	err = wh.ValidateQuery(ctx, "SELECT nope")
	if !errors.Is(err, warehouse.ErrRefused) || !strings.Contains(err.Error(), "Unrecognized name: nope") {
		t.Errorf("invalid query: %v", err)
	}
	err = wh.ValidateQuery(ctx, "SELECT boom")
	if err == nil || errors.Is(err, warehouse.ErrRefused) || !strings.Contains(err.Error(), "Access Denied") {
		t.Errorf("server failure: %v; want a plain error", err)
	}
}
