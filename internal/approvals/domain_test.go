package approvals

import (
	"testing"

	"github.com/dataworkers/dw/internal/config"
)

// The case: the catalog prints duckdb://warehouse.sales.orders, a
// check prints duckdb://sales.orders, a person types sales.orders; a domain
// written in any of those spellings owns all of them, and nothing else.
func TestDomainForAssetAnySpelling(t *testing.T) {
	for _, glob := range []string{"duckdb://sales.*", "sales.*", "duckdb://warehouse.sales.*", "DUCKDB://Warehouse.Sales.*"} {
		cfg, err := config.Parse("dw.yaml", []byte(`
warehouses:
  - {name: wh, kind: duckdb, path: /data/warehouse.duckdb}
people:
  - {id: ana, name: Ana}
domains:
  - name: sales
    assets: ["`+glob+`"]
    owners: [ana]
  - name: everything-else
    assets: ["duckdb://**"]
    owners: [ana]
`))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"duckdb://warehouse.sales.orders", "duckdb://sales.orders", "sales.orders", `"Sales"."Orders"`} {
			if d, ok := DomainForAsset(cfg, id); !ok || d.Name != "sales" {
				t.Errorf("glob %s: %s is in %v", glob, id, d)
			}
		}
		for _, id := range []string{"duckdb://warehouse.crm.accounts", "duckdb://other.sales.orders"} {
			if d, ok := DomainForAsset(cfg, id); !ok || d.Name != "everything-else" {
				t.Errorf("glob %s: %s is in %v", glob, id, d)
			}
		}
		if d, ok := DomainForAsset(cfg, "snowflake://sales.orders"); ok {
			t.Errorf("glob %s: a Snowflake table is in %s", glob, d.Name)
		}
	}
}
