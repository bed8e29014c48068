package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzDBTTests: a manifest is a file from anywhere. Reading its tests
// never panics and drops nothing silently: every generic test node (a test
// with test metadata) is either returned or counted in a note, and each
// returned test is one of the four kinds, on a column, of a node the
// manifest defines, read from that node's own entry.
func FuzzDBTTests(f *testing.F) {
	f.Add([]byte(`{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json", "adapter_type": "duckdb", "project_name": "shop"},
	 "nodes": {
	  "model.shop.orders": {"unique_id": "model.shop.orders", "resource_type": "model", "name": "orders", "database": "wh", "schema": "shop", "alias": "orders"},
	  "model.shop.customers": {"unique_id": "model.shop.customers", "resource_type": "model", "name": "customers", "database": "wh", "schema": "shop"},
	  "test.shop.u": {"unique_id": "test.shop.u", "resource_type": "test", "column_name": "order_id", "attached_node": "model.shop.orders",
	    "test_metadata": {"name": "unique", "kwargs": {"column_name": "order_id"}, "namespace": null}, "depends_on": {"nodes": ["model.shop.orders"]}, "config": {"enabled": true}},
	  "test.shop.av": {"unique_id": "test.shop.av", "resource_type": "test", "attached_node": "model.shop.orders",
	    "test_metadata": {"name": "accepted_values", "kwargs": {"column_name": "status", "values": ["placed", 3, null, {"a": 1}]}}, "depends_on": {"nodes": ["model.shop.orders"]}},
	  "test.shop.r": {"unique_id": "test.shop.r", "resource_type": "test", "column_name": "customer_id",
	    "test_metadata": {"name": "relationships", "kwargs": {"field": "id"}}, "depends_on": {"nodes": ["model.shop.customers", "model.shop.orders"]}},
	  "test.shop.w": {"unique_id": "test.shop.w", "resource_type": "test", "column_name": "note", "attached_node": "model.shop.orders",
	    "test_metadata": {"name": "not_null"}, "config": {"where": "x"}},
	  "test.shop.utils": {"unique_id": "test.shop.utils", "resource_type": "test", "test_metadata": {"name": "unique", "namespace": "dbt_utils"}},
	  "test.shop.ghost": {"unique_id": "test.shop.ghost", "resource_type": "test", "column_name": "c", "attached_node": "model.shop.nowhere", "test_metadata": {"name": "unique"}},
	  "test.shop.singular": {"unique_id": "test.shop.singular", "resource_type": "test"}
	 },
	 "sources": {"source.shop.raw.t": {"unique_id": "source.shop.raw.t", "resource_type": "source", "name": "t", "schema": "raw", "identifier": "t"}}}`))
	f.Add([]byte(`{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v9.json"}, "nodes": {"test.x": {"resource_type": "test", "test_metadata": "hunter2"}}}`))
	f.Add([]byte(`{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v10.json"}, "nodes": {"test.x": {"resource_type": "test", "test_metadata": {"name": "not_null", "kwargs": {"column_name": 7}}}}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		defer time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("reading tests took over 10s: %d bytes", len(data))) }).Stop()
		tests, notes, err := ReadDBTTests(bytes.NewReader(data))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		// The checked reader: the manifest's nodes as plain JSON.
		var doc struct {
			Nodes   map[string]map[string]json.RawMessage `json:"nodes"`
			Sources map[string]map[string]json.RawMessage `json:"sources"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("tests read from a manifest whose nodes are not objects: %v", err)
		}
		str := func(n map[string]json.RawMessage, k string) string {
			var s string
			_ = json.Unmarshal(n[k], &s)
			return s
		}
		generic := 0
		kindOf := map[string]map[string]bool{} // a generic test's unique_id -> its tests' names
		defined := map[string]bool{}           // unique_ids of nodes and sources
		for _, n := range doc.Nodes {
			defined[str(n, "unique_id")] = true
			if md, ok := n["test_metadata"]; str(n, "resource_type") == "test" && ok && string(md) != "null" {
				generic++
				var meta struct {
					Name string `json:"name"`
				}
				_ = json.Unmarshal(md, &meta)
				id := str(n, "unique_id")
				if kindOf[id] == nil {
					kindOf[id] = map[string]bool{}
				}
				kindOf[id][meta.Name] = true
			}
		}
		for _, n := range doc.Sources {
			defined[str(n, "unique_id")] = true
		}
		counted := 0
		for _, note := range notes {
			k, _, _ := strings.Cut(note, " ")
			c, err := strconv.Atoi(k)
			if err != nil || c <= 0 || !strings.HasSuffix(note, "not mapped to expectations") {
				t.Fatalf("note %q does not count skipped tests", note)
			}
			counted += c
		}
		if len(tests)+counted != generic {
			t.Fatalf("%d generic test nodes, %d returned and %d counted in notes %q", generic, len(tests), counted, notes)
		}
		for _, x := range tests {
			switch {
			case x.Name != "unique" && x.Name != "not_null" && x.Name != "accepted_values" && x.Name != "relationships":
				t.Fatalf("test %+v of another kind", x)
			case x.Column == "" || x.Asset == "":
				t.Fatalf("test %+v without a column or table", x)
			case x.Name == "accepted_values" && len(x.Values) == 0:
				t.Fatalf("accepted_values %+v without values", x)
			case x.Name != "accepted_values" && x.Values != nil:
				t.Fatalf("%s test %+v with values", x.Name, x)
			}
			if !defined[x.Node] {
				t.Fatalf("test %+v on node %q the manifest does not define", x, x.Node)
			}
			if !kindOf[x.ID][x.Name] {
				t.Fatalf("test %+v: the manifest has no %s test %q", x, x.Name, x.ID)
			}
		}
	})
}
