package local

import (
	"context"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/config"
)

// TestRefusesARemoteKind: the DuckDB child is never asked to serve
// BigQuery or Snowflake by an agent (warehouseproc picks the child by
// kind); if it were, it says so, and opens nothing.
func TestRefusesARemoteKind(t *testing.T) {
	for _, kind := range []string{"bigquery", "snowflake", ""} {
		w, err := Open(context.Background(), &config.Config{}, &config.Warehouse{Name: "wh", Kind: kind}, nil)
		if err == nil || w != nil || !strings.Contains(err.Error(), "is not duckdb") {
			t.Fatalf("kind %q: %v, %v; want an error saying the kind is not duckdb", kind, w, err)
		}
	}
}
