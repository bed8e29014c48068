package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse/snowflake/snowflaketest"
	"github.com/dataworkers/dw/internal/warehouseproc/childtest"
)

func TestMain(m *testing.M) { childtest.Main(m, main) }

// TestOpensTheSectionWithItsSecretFromTheEnvironment: the child opens the
// Snowflake section the agent sends with the password its variable holds
// in the child's environment; a variable left empty is the driver's
// error naming the variable (never a value), on every call; with the
// variable set, the child logs in with that password at the section's
// endpoint (the Snowflake fake on loopback) and lists its tables.
func TestOpensTheSectionWithItsSecretFromTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{Source: filepath.Join(dir, "dw.yaml"), Home: dir}
	wc := &config.Warehouse{Name: "sf", Kind: "snowflake", Account: "acme", User: "dw_reader", Database: "ANALYTICS", PasswordEnv: "DW_TEST_SF_CHILD_PASSWORD"}
	t.Setenv("DW_TEST_SF_CHILD_PASSWORD", "")
	w := childtest.Open(t, cfg, wc)
	for i := 0; i < 2; i++ {
		_, err := w.ListTables(context.Background())
		if err == nil || !strings.Contains(err.Error(), "snowflake warehouse sf: environment variable DW_TEST_SF_CHILD_PASSWORD is empty") {
			t.Fatalf("call %d with the password variable empty: %v; want the driver's error naming the variable", i, err)
		}
	}

	f := snowflaketest.New(t)
	text := snowflaketest.Text
	f.Results["INFORMATION_SCHEMA.TABLES"] = snowflaketest.Result{
		Columns: []map[string]any{snowflaketest.Column("TABLE_CATALOG", "text"), snowflaketest.Column("TABLE_SCHEMA", "text"), snowflaketest.Column("TABLE_NAME", "text")},
		Rows:    [][]*string{{text("ANALYTICS"), text("MARTS"), text("ORDERS")}},
	}
	host, port := f.Addr()
	t.Setenv("DW_TEST_SF_CHILD_PASSWORD", "child-secret")
	at := *wc
	at.Name, at.Endpoint = "sf-at-endpoint", fmt.Sprintf("http://%s:%d", host, port)
	refs, err := childtest.Open(t, cfg, &at).ListTables(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || refs[0].Name != "ORDERS" {
		t.Fatalf("tables %+v; the service lists ANALYTICS.MARTS.ORDERS", refs)
	}
	data, _ := f.Login()["data"].(map[string]any)
	if data["LOGIN_NAME"] != "dw_reader" || data["PASSWORD"] != "child-secret" {
		t.Fatalf("the endpoint saw login %v with the password set: %v; want dw_reader with the variable's value", data["LOGIN_NAME"], data["PASSWORD"] == "child-secret")
	}
}

// TestArgumentsAreAUsageError: the child takes no arguments.
func TestArgumentsAreAUsageError(t *testing.T) { childtest.Usage(t, "snowflake") }

// TestRefusesOtherKinds: handed a DuckDB or BigQuery warehouse, the
// Snowflake child says so and opens nothing.
func TestRefusesOtherKinds(t *testing.T) { childtest.RefusesOtherKinds(t, "snowflake") }
