package bigquery

import (
	"context"
	"fmt"

	"google.golang.org/api/option"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
)

// OpenSection opens the BigQuery warehouse a dw.yaml section describes:
// dw's own commands (internal/warehouses) and the agents' BigQuery child
// (cmd/dw-warehouse-bigquery) both open it here. Credentials are read from
// the environment variable the section names, never from the file. An
// endpoint (an emulator, a test server) turns authentication off.
func OpenSection(ctx context.Context, wc *config.Warehouse) (warehouse.Warehouse, error) {
	if wc.Kind != "bigquery" {
		return nil, fmt.Errorf("warehouse %s: kind %q is not bigquery", wc.Name, wc.Kind)
	}
	cfg := Config{Name: wc.Name, Project: wc.Project, Location: wc.Location, Dataset: wc.Dataset,
		CredentialsEnv: wc.CredentialsEnv, MaxBytesPerQuery: wc.MaxBytesPerQuery, MaxBytesPerSession: wc.MaxBytesPerSession, Timeout: wc.Timeout}
	var opts []option.ClientOption
	if wc.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(wc.Endpoint), option.WithoutAuthentication())
	}
	w, err := Open(ctx, cfg, opts...)
	if err != nil {
		return nil, err // not a nil *Warehouse in a non-nil interface
	}
	return w, nil
}
