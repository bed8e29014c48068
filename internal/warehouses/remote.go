package warehouses

import (
	"context"
	"fmt"

	"google.golang.org/api/option"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/bigquery"
	"github.com/dataworkers/dw/internal/warehouse/snowflake"
)

// openRemote opens a BigQuery or Snowflake warehouse. Credentials are read
// from the environment variables the configuration names, inside the
// drivers, never from the file.
func openRemote(ctx context.Context, wc *config.Warehouse) (warehouse.Warehouse, error) {
	switch wc.Kind {
	case "bigquery":
		cfg := bigquery.Config{Name: wc.Name, Project: wc.Project, Location: wc.Location, Dataset: wc.Dataset,
			CredentialsEnv: wc.CredentialsEnv, MaxBytesPerQuery: wc.MaxBytesPerQuery, MaxBytesPerSession: wc.MaxBytesPerSession, Timeout: wc.Timeout}
		var opts []option.ClientOption
		if wc.Endpoint != "" {
			opts = append(opts, option.WithEndpoint(wc.Endpoint), option.WithoutAuthentication())
		}
		return bigquery.Open(ctx, cfg, opts...)
	case "snowflake":
		return snowflake.Open(ctx, snowflake.Config{Name: wc.Name, Account: wc.Account, User: wc.User, Warehouse: wc.Compute,
			Role: wc.Role, Database: wc.Database, Schema: wc.Schema, PasswordEnv: wc.PasswordEnv, PrivateKeyEnv: wc.PrivateKeyEnv, Timeout: wc.Timeout})
	}
	return nil, fmt.Errorf("warehouse %s: unknown kind %q; valid: duckdb, bigquery, snowflake", wc.Name, wc.Kind)
}
