package warehouses

import (
	"context"
	"errors"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
)

func openRemote(ctx context.Context, wc *config.Warehouse) (warehouse.Warehouse, error) {
	return nil, errors.New("TEMPORARY: wire bigquery/snowflake")
}
