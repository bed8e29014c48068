package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouseproc/childtest"
)

func TestMain(m *testing.M) { childtest.Main(m, main) }

// TestOpensTheSectionWithItsSecretFromTheEnvironment: the child opens the
// Snowflake section the agent sends with the password its variable holds
// in the child's environment; a variable left empty is the driver's
// error naming the variable (never a value), on every call. (dw.yaml has
// no key for a Snowflake host, so the fake cannot stand in for the
// service here: the driver's own tests and warehouseproc's conformance
// suite run it against snowflaketest.)
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
}

// TestArgumentsAreAUsageError: the child takes no arguments.
func TestArgumentsAreAUsageError(t *testing.T) { childtest.Usage(t, "snowflake") }

// TestRefusesOtherKinds: handed a DuckDB or BigQuery warehouse, the
// Snowflake child says so and opens nothing.
func TestRefusesOtherKinds(t *testing.T) { childtest.RefusesOtherKinds(t, "snowflake") }
