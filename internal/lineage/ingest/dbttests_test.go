package ingest

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func readTests(t *testing.T, path string) ([]DBTTest, []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tests, notes, err := ReadDBTTests(f)
	if err != nil {
		t.Fatal(err)
	}
	return tests, notes
}

func countByName(ts []DBTTest) map[string]int {
	c := map[string]int{}
	for _, x := range ts {
		c[x.Name]++
	}
	return c
}

// Two real manifests: their generic tests of the four kinds are read with
// the tested table's warehouse id; package tests are named in the notes.
func TestReadDBTTestsFromRealManifests(t *testing.T) {
	tests, notes := readTests(t, "testdata/dbt/dbt-bouncer__dbt_16__manifest.json")
	if got, want := countByName(tests), map[string]int{"unique": 6, "not_null": 34, "accepted_values": 3, "relationships": 1}; !mapsEqual(got, want) {
		t.Errorf("dbt-bouncer tests %v, want %v", got, want)
	}
	i := slices.IndexFunc(tests, func(x DBTTest) bool { return x.Name == "relationships" })
	if r := tests[i]; r.Asset != "duckdb://dbt.main.orders" || r.Column != "customer_id" || r.To != "duckdb://dbt.main.customers" || r.Field != "customer_id" {
		t.Errorf("relationships %+v", r)
	}
	i = slices.IndexFunc(tests, func(x DBTTest) bool {
		return x.Name == "accepted_values" && x.Asset == "duckdb://dbt.main.stg_payments"
	})
	if i < 0 || !slices.Equal(tests[i].Values, []string{"credit_card", "coupon", "bank_transfer", "gift_card"}) {
		t.Errorf("accepted_values on stg_payments: %+v", tests)
	}
	if !slices.Contains(notes, "12 dbt_utils.unique_combination_of_columns test(s) not mapped to expectations") {
		t.Errorf("notes %q should name the dbt_utils tests left out", notes)
	}
	tests, _ = readTests(t, "testdata/dbt/whyline-denver__manifest.json")
	if got, want := countByName(tests), map[string]int{"unique": 9, "not_null": 36, "relationships": 9}; !mapsEqual(got, want) {
		t.Errorf("whyline-denver tests %v, want %v", got, want)
	}
	for _, x := range tests {
		if !strings.HasPrefix(x.Asset, "bigquery://whyline-denver.") || x.Column == "" {
			t.Errorf("test without a bigquery table or column: %+v", x)
		}
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A crafted manifest with the four tests on one model, plus tests that must
// not become expectations: filtered by where, disabled, from a package, and
// a singular SQL test.
func TestReadDBTTestsCrafted(t *testing.T) {
	manifest := `{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json", "adapter_type": "duckdb", "project_name": "shop"},
	 "nodes": {
	  "model.shop.orders": {"unique_id": "model.shop.orders", "resource_type": "model", "name": "orders", "database": "wh", "schema": "shop", "alias": "orders", "config": {"materialized": "table"}},
	  "model.shop.customers": {"unique_id": "model.shop.customers", "resource_type": "model", "name": "customers", "database": "wh", "schema": "shop", "alias": "customers", "config": {"materialized": "table"}},
	  "test.shop.unique_orders_order_id": {"unique_id": "test.shop.unique_orders_order_id", "resource_type": "test", "column_name": "order_id", "attached_node": "model.shop.orders",
	    "test_metadata": {"name": "unique", "kwargs": {"column_name": "order_id"}, "namespace": null}, "depends_on": {"nodes": ["model.shop.orders"]}, "config": {"enabled": true}},
	  "test.shop.not_null_orders_order_id": {"unique_id": "test.shop.not_null_orders_order_id", "resource_type": "test", "column_name": "order_id", "attached_node": "model.shop.orders",
	    "test_metadata": {"name": "not_null", "kwargs": {"column_name": "order_id"}}, "depends_on": {"nodes": ["model.shop.orders"]}},
	  "test.shop.accepted_values_orders_status": {"unique_id": "test.shop.accepted_values_orders_status", "resource_type": "test", "column_name": "status", "attached_node": "model.shop.orders",
	    "test_metadata": {"name": "accepted_values", "kwargs": {"column_name": "status", "values": ["placed", "shipped", 3]}}, "depends_on": {"nodes": ["model.shop.orders"]}},
	  "test.shop.relationships_orders_customer_id": {"unique_id": "test.shop.relationships_orders_customer_id", "resource_type": "test", "column_name": "customer_id", "attached_node": "model.shop.orders",
	    "test_metadata": {"name": "relationships", "kwargs": {"column_name": "customer_id", "to": "ref('customers')", "field": "id"}}, "depends_on": {"nodes": ["model.shop.customers", "model.shop.orders"]}},
	  "test.shop.not_null_orders_note": {"unique_id": "test.shop.not_null_orders_note", "resource_type": "test", "column_name": "note", "attached_node": "model.shop.orders",
	    "test_metadata": {"name": "not_null", "kwargs": {}}, "depends_on": {"nodes": ["model.shop.orders"]}, "config": {"where": "status = 'placed'"}},
	  "test.shop.not_null_orders_off": {"unique_id": "test.shop.not_null_orders_off", "resource_type": "test", "column_name": "off", "attached_node": "model.shop.orders",
	    "test_metadata": {"name": "not_null", "kwargs": {}}, "depends_on": {"nodes": ["model.shop.orders"]}, "config": {"enabled": false}},
	  "test.shop.utils": {"unique_id": "test.shop.utils", "resource_type": "test", "attached_node": "model.shop.orders",
	    "test_metadata": {"name": "unique", "namespace": "dbt_utils", "kwargs": {}}, "depends_on": {"nodes": ["model.shop.orders"]}},
	  "test.shop.singular": {"unique_id": "test.shop.singular", "resource_type": "test", "depends_on": {"nodes": ["model.shop.orders"]}}
	 },
	 "sources": {}}`
	tests, notes, err := ReadDBTTests(strings.NewReader(manifest))
	if err != nil {
		t.Fatal(err)
	}
	if got := countByName(tests); !mapsEqual(got, map[string]int{"unique": 1, "not_null": 1, "accepted_values": 1, "relationships": 1}) {
		t.Fatalf("tests %v (%+v), notes %q", got, tests, notes)
	}
	for _, x := range tests {
		if x.Asset != "duckdb://wh.shop.orders" || x.Node != "model.shop.orders" {
			t.Errorf("%s on %s (%s), want duckdb://wh.shop.orders", x.Name, x.Asset, x.Node)
		}
		switch x.Name {
		case "accepted_values":
			if !slices.Equal(x.Values, []string{"placed", "shipped", "3"}) {
				t.Errorf("values %q", x.Values)
			}
		case "relationships":
			if x.To != "duckdb://wh.shop.customers" || x.Field != "id" || x.Column != "customer_id" {
				t.Errorf("relationships %+v", x)
			}
		}
	}
	if len(notes) != 2 {
		t.Errorf("notes %q, want the filtered/disabled not_null tests and the dbt_utils one", notes)
	}
	if _, _, err := ReadDBTTests(strings.NewReader(`{"metadata": {}}`)); err == nil {
		t.Error("a manifest without a schema version was accepted")
	}
}
