package bigquery

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/config"
)

// TestOpenSectionMapsEveryKey: each BigQuery key of a dw.yaml section
// reaches the driver's configuration, and a section of another kind opens
// nothing.
func TestOpenSectionMapsEveryKey(t *testing.T) {
	wc := &config.Warehouse{Name: "bq", Kind: "bigquery", Project: "acme-prod", Location: "EU", Dataset: "loyalty", Endpoint: "http://127.0.0.1:9",
		MaxBytesPerQuery: 1 << 20, MaxBytesPerSession: 1 << 30, Timeout: 42 * time.Second}
	w, err := OpenSection(context.Background(), wc)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got := w.(*Warehouse).cfg
	want := Config{Name: "bq", Project: "acme-prod", Location: "EU", Dataset: "loyalty",
		MaxBytesPerQuery: 1 << 20, MaxBytesPerSession: 1 << 30, Timeout: 42 * time.Second}
	want.SetDefaults()
	if got != want {
		t.Fatalf("driver configuration %+v; want %+v", got, want)
	}
	// The credentials come from the variable the section names.
	wc.CredentialsEnv = "DW_TEST_BQ_SECTION_CREDS"
	t.Setenv("DW_TEST_BQ_SECTION_CREDS", "")
	if w, err := OpenSection(context.Background(), wc); err == nil || w != nil || !strings.Contains(err.Error(), "DW_TEST_BQ_SECTION_CREDS is empty") {
		t.Fatalf("credentials_env naming an empty variable: %v, %v; want the driver's error naming it", w, err)
	}
	for _, kind := range []string{"duckdb", "snowflake", ""} {
		if w, err := OpenSection(context.Background(), &config.Warehouse{Name: "x", Kind: kind}); err == nil || w != nil {
			t.Fatalf("kind %q: %v, %v; want an error and no warehouse", kind, w, err)
		}
	}
}
