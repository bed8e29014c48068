package bigquery

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/bigquery/bigquerytest"
)

// TestOnlyDryRunSelectsRun: BigQuery's dry run names the statement type,
// and anything but SELECT (a script of several statements, DML, DDL,
// EXPORT DATA, LOAD DATA) is refused, by ValidateQuery and by Query, with
// no job but the free dry run ever inserted.
func TestOnlyDryRunSelectsRun(t *testing.T) {
	f := bigquerytest.New(t)
	f.StatementTypes = map[string]string{
		"DECLARE":     "SCRIPT",
		"EXPORT DATA": "EXPORT_DATA",
		"LOAD DATA":   "LOAD_DATA",
		"MERGE":       "MERGE",
		"EXTERNAL":    "CREATE_TABLE",
	}
	f.Results["SELECT 7"] = bigquerytest.Result{Fields: []map[string]any{bigquerytest.Field("n", "INTEGER")}, Rows: [][]any{{"7"}}}
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
		before := len(f.Inserts())
		verr := wh.ValidateQuery(ctx, sql)
		_, qerr := wh.Query(ctx, warehouse.Query{SQL: sql})
		for what, err := range map[string]error{"ValidateQuery": verr, "Query": qerr} {
			if !errors.Is(err, warehouse.ErrRefused) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s(%q) = %v; want a refusal saying %q", what, sql, err, want)
			}
		}
		for _, job := range f.Inserts()[before:] {
			if dry, _ := job["configuration"].(map[string]any)["dryRun"].(bool); !dry {
				t.Errorf("%q: a real job was inserted", sql)
			}
		}
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
	f := bigquerytest.New(t)
	f.Errors["nope"] = bigquerytest.APIError{Code: http.StatusBadRequest, Reason: "invalidQuery", Message: "Unrecognized name: nope at [1:8]"}
	f.Errors["boom"] = bigquerytest.APIError{Code: http.StatusForbidden, Reason: "accessDenied", Message: "Access Denied: Project acme-prod"}
	wh := openFake(t, f, Config{})
	ctx := context.Background()
	err := wh.ValidateQuery(ctx, "SELECT nope")
	if !errors.Is(err, warehouse.ErrRefused) || !strings.Contains(err.Error(), "Unrecognized name: nope") {
		t.Errorf("invalid query: %v", err)
	}
	err = wh.ValidateQuery(ctx, "SELECT boom")
	if err == nil || errors.Is(err, warehouse.ErrRefused) || !strings.Contains(err.Error(), "Access Denied") {
		t.Errorf("server failure: %v; want a plain error", err)
	}
}
