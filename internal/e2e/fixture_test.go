package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// smallWarehouse writes a DuckDB file with one known table and a dw.yaml
// naming it, and returns the environment an agent needs to use them.
func smallWarehouse(t *testing.T) map[string]string {
	t.Helper()
	home := t.TempDir()
	path := filepath.Join(home, "warehouse.duckdb")
	db, err := duckdb.OpenWrite(context.Background(), path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`CREATE SCHEMA shop`,
		`CREATE TABLE shop.orders (order_id VARCHAR NOT NULL, customer_id VARCHAR, amount DECIMAL(10,2), created_at TIMESTAMP)`,
		`INSERT INTO shop.orders SELECT 'o' || i, CASE WHEN i % 10 = 0 THEN NULL ELSE 'c' || (i % 7) END, i * 1.5,
			TIMESTAMP '2026-11-01 00:00:00' + INTERVAL (i) MINUTE FROM range(1000) t(i)`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	db.Close()
	cfg := filepath.Join(home, "dw.yaml")
	yaml := "home: " + home + "\nwarehouses:\n  - name: shop\n    kind: duckdb\n    path: " + path + "\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"DW_CONFIG": cfg, "DW_HOME": home}
}

// withRegistry adds a Schema Registry to the environment's dw.yaml.
func withRegistry(t *testing.T, env map[string]string, url string) {
	t.Helper()
	f, err := os.OpenFile(env["DW_CONFIG"], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("schema_registry:\n  url: " + url + "\n"); err != nil {
		t.Fatal(err)
	}
}
