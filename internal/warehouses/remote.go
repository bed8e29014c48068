package warehouses

import (
	"context"
	"fmt"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/bigquery"
	"github.com/dataworkers/dw/internal/warehouse/snowflake"
)

// openRemote opens a BigQuery or Snowflake warehouse, as its child does
// for an agent (each driver's OpenSection).
func openRemote(ctx context.Context, wc *config.Warehouse) (warehouse.Warehouse, error) {
	switch wc.Kind {
	case "bigquery":
		return bigquery.OpenSection(ctx, wc)
	case "snowflake":
		return snowflake.OpenSection(ctx, wc)
	}
	return nil, fmt.Errorf("warehouse %s: unknown kind %q; valid: duckdb, bigquery, snowflake", wc.Name, wc.Kind)
}
