package ingest

import (
	"encoding/json"
	"testing"
)

// FuzzDBTManifest: a manifest is a file from anywhere. Parsing and turning
// every node into an asset never panics, and every edge joins two nodes the
// manifest defines.
func FuzzDBTManifest(f *testing.F) {
	f.Add([]byte(`{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json","adapter_type":"duckdb","project_name":"p"},` +
		`"nodes":{"model.p.a":{"unique_id":"model.p.a","resource_type":"model","name":"a","schema":"s","database":"d","tags":"x","depends_on":{"nodes":["source.p.s.t"]},"columns":{"id":{"name":"id","data_type":"int"}},"meta":{"owner":"o"}}},` +
		`"sources":{"source.p.s.t":{"unique_id":"source.p.s.t","resource_type":"source","name":"t","schema":"s","identifier":"t"}},` +
		`"exposures":{"exposure.p.e":{"unique_id":"exposure.p.e","resource_type":"exposure","name":"e","type":"dashboard","owner":{"name":"n","email":"e@x"},"depends_on":{"nodes":["model.p.a"]}}}}`))
	f.Add([]byte(`{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v9.json","adapter_type":"snowflake"},"nodes":{},"sources":{},"parent_map":{"x":["y"]},"groups":{"g":{"name":"g","owner":{"email":"a@b"}}}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseManifest(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		for _, n := range m.nodes {
			if _, err := m.assetInput(n, DBTOptions{}); err != nil && err.Error() == "" {
				t.Fatal("empty error")
			}
		}
		for _, e := range m.edges {
			if min(e[0], e[1]) < 0 || int(max(e[0], e[1])) >= len(m.nodes) {
				t.Fatalf("edge %v joins a node the manifest does not define (%d nodes)", e, len(m.nodes))
			}
		}
	})
}

// FuzzOpenLineage: events come from files and from other systems. Splitting,
// validating and planning them never panics, and a valid plan only names
// assets it also creates.
func FuzzOpenLineage(f *testing.F) {
	f.Add([]byte(`{"eventType":"COMPLETE","eventTime":"2026-03-10T12:00:00Z","run":{"runId":"0190a0c4-0000-7000-8000-000000000000"},` +
		`"job":{"namespace":"flink://prod","name":"usage-hourly-rollup"},"producer":"https://x","schemaURL":"https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",` +
		`"inputs":[{"namespace":"kafka://prod:9092","name":"api-usage","facets":{"schema":{"fields":[{"name":"response_bytes","type":"long"},{"name":"nested","type":"struct","fields":[{"name":"a","type":"int"}]}]}}}],` +
		`"outputs":[{"namespace":"snowflake://acme","name":"usage.usage_hourly","facets":{"columnLineage":{"fields":{"total":{"inputFields":[{"namespace":"kafka://prod:9092","name":"api-usage","field":"response_bytes"}]}}}}}]}`))
	f.Add([]byte(`[{"eventType":"START","job":{"namespace":"n","name":"${json-unit.any-string}"},"inputs":[{"namespace":"postgres://h:5432","name":"db.s.t"}],"outputs":[]}]`))
	f.Add([]byte("{\"job\":{}}\n{\"job\":{\"name\":\"x\"},\"outputs\":[{\"namespace\":\"bigquery\",\"name\":\"p.d.t\"}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		raws, err := splitEvents(data)
		if err != nil {
			return
		}
		for _, raw := range raws {
			_ = ValidateRunEvent(raw)
			var ev olEvent
			if json.Unmarshal(raw, &ev) != nil {
				continue
			}
			for _, opts := range []OpenLineageOptions{{}, {Validate: true}} {
				p, err := planEvent(&ev, opts)
				if err != nil {
					continue
				}
				made := map[string]bool{}
				for _, a := range p.assets {
					made[a.ID] = true
				}
				for _, e := range p.edges {
					if !made[e.from] || !made[e.to] {
						t.Fatalf("edge %s -> %s names an asset the plan does not create", e.from, e.to)
					}
				}
			}
		}
	})
}
