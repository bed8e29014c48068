package snowflake

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/snowflake/snowflaketest"
)

// TestValidateCompilesAsASubquery: ValidateQuery asks Snowflake to compile
// the statement, describe only (never run) and as one statement, as the
// body of a subquery; a compilation error is a refusal in Snowflake's
// words. What is not a query (PUT and GET, which gosnowflake would carry
// out on local files, DML, a second statement) never reaches the driver.
func TestValidateCompilesAsASubquery(t *testing.T) {
	f := snowflaketest.New(t)
	f.CompileErrors["CALL"] = "SQL compilation error:\nsyntax error line 2 at position 0 unexpected 'CALL'."
	wh := openFake(t, f)
	ctx := context.Background()
	if err := wh.ValidateQuery(ctx, "SELECT amount AS value FROM billing.invoices;"); err != nil {
		t.Fatalf("a SELECT was refused: %v", err)
	}
	queries := f.Queries()
	if len(queries) != 1 {
		t.Fatalf("%d query requests", len(queries))
	}
	q := queries[0]
	if q["sqlText"] != "SELECT * FROM (\nSELECT amount AS value FROM billing.invoices\n) AS dw_validated" {
		t.Errorf("sqlText %q", q["sqlText"])
	}
	if q["describeOnly"] != true {
		t.Errorf("describeOnly %v: the statement would run", q["describeOnly"])
	}
	if p, _ := q["parameters"].(map[string]any); p["MULTI_STATEMENT_COUNT"] != float64(1) {
		t.Errorf("parameters %v, want MULTI_STATEMENT_COUNT 1", p)
	}

	// An anonymous procedure starts with WITH, like a query, and passes
	// the first-word check; inside a subquery Snowflake's grammar refuses it.
	err := wh.ValidateQuery(ctx, "WITH p AS PROCEDURE () RETURNS INT LANGUAGE SQL AS 'BEGIN RETURN 1 END' CALL p()")
	if !errors.Is(err, warehouse.ErrRefused) || !strings.Contains(err.Error(), "unexpected 'CALL'") {
		t.Errorf("CALL: %v", err)
	}
	sent := len(f.Queries())
	for _, sql := range []string{
		"PUT file:///etc/passwd @~/staged",
		"GET @~/staged file:///tmp/",
		"SELECT 1; DROP TABLE t",
		"DELETE FROM t",
		"COPY INTO @~/out FROM (SELECT * FROM t)",
		"ALTER SESSION SET MULTI_STATEMENT_COUNT = 0",
	} {
		if err := wh.ValidateQuery(ctx, sql); !errors.Is(err, warehouse.ErrRefused) {
			t.Errorf("%q: %v; want a refusal", sql, err)
		}
		if _, err := wh.Query(ctx, warehouse.Query{SQL: sql}); !errors.Is(err, warehouse.ErrRefused) {
			t.Errorf("Query %q: %v; want a refusal", sql, err)
		}
	}
	if n := len(f.Queries()); n != sent {
		t.Errorf("%d refused statements reached Snowflake", n-sent)
	}
}

// TestQueryPinsOneStatement: every statement carries MULTI_STATEMENT_COUNT
// 1, so Snowflake refuses a second statement whatever the DSN says.
func TestQueryPinsOneStatement(t *testing.T) {
	f := snowflaketest.New(t)
	f.Results["SELECT 42"] = fortyTwo
	wh := openFake(t, f)
	if _, err := wh.Query(context.Background(), warehouse.Query{SQL: "SELECT 42 AS n"}); err != nil {
		t.Fatal(err)
	}
	if p, _ := f.Queries()[0]["parameters"].(map[string]any); p["MULTI_STATEMENT_COUNT"] != float64(1) {
		t.Errorf("parameters %v, want MULTI_STATEMENT_COUNT 1", p)
	}
}
