package snowflake

import (
	"context"
	"fmt"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
)

// OpenSection opens the Snowflake warehouse a dw.yaml section describes:
// dw's own commands (internal/warehouses) and the agents' Snowflake child
// (cmd/dw-warehouse-snowflake) both open it here. The password or private
// key is read from the environment variable the section names, never from
// the file.
func OpenSection(ctx context.Context, wc *config.Warehouse) (warehouse.Warehouse, error) {
	if wc.Kind != "snowflake" {
		return nil, fmt.Errorf("warehouse %s: kind %q is not snowflake", wc.Name, wc.Kind)
	}
	protocol, host, port, err := wc.SnowflakeEndpoint()
	if err != nil {
		return nil, fmt.Errorf("snowflake warehouse %s: endpoint %w", wc.Name, err)
	}
	w, err := Open(ctx, Config{Name: wc.Name, Account: wc.Account, User: wc.User, Warehouse: wc.Compute,
		Role: wc.Role, Database: wc.Database, Schema: wc.Schema, PasswordEnv: wc.PasswordEnv, PrivateKeyEnv: wc.PrivateKeyEnv, Timeout: wc.Timeout,
		Host: host, Port: port, Protocol: protocol})
	if err != nil {
		return nil, err // not a nil *Warehouse in a non-nil interface
	}
	return w, nil
}
