package snowflake

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/config"
)

// TestOpenSectionMapsEveryKey: each Snowflake key of a dw.yaml section
// reaches the driver's configuration (dw.yaml's warehouse is Snowflake's
// compute warehouse), and a section of another kind opens nothing.
func TestOpenSectionMapsEveryKey(t *testing.T) {
	t.Setenv("DW_TEST_SECTION_PW", "secret")
	wc := &config.Warehouse{Name: "sf", Kind: "snowflake", Account: "acme-xy12345", User: "dw_reader", PasswordEnv: "DW_TEST_SECTION_PW",
		Role: "READER", Database: "ANALYTICS", Schema: "MARTS", Compute: "REPORTING_WH", Timeout: 42 * time.Second}
	w, err := OpenSection(context.Background(), wc)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got := w.(*Warehouse).cfg
	want := Config{Name: "sf", Account: "acme-xy12345", User: "dw_reader", Warehouse: "REPORTING_WH", Role: "READER", Database: "ANALYTICS",
		Schema: "MARTS", PasswordEnv: "DW_TEST_SECTION_PW", Timeout: 42 * time.Second}
	if got != want {
		t.Fatalf("driver configuration %+v; want %+v", got, want)
	}
	for _, kind := range []string{"duckdb", "bigquery", ""} {
		if w, err := OpenSection(context.Background(), &config.Warehouse{Name: "x", Kind: kind}); err == nil || w != nil {
			t.Fatalf("kind %q: %v, %v; want an error and no warehouse", kind, w, err)
		}
	}
}
