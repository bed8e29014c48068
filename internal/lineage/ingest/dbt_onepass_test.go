package ingest

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// onePassSeeds are manifests, well-formed and not, that the one-pass
// reader must agree with the checked reader on.
var onePassSeeds = []string{
	`{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json","adapter_type":"duckdb","project_name":"p"},` +
		`"nodes":{"model.p.b":{"unique_id":"model.p.b","resource_type":"model","name":"b","schema":"s","tags":["x","y"],"config":{"tags":"z","meta":{"owner":"o"}},"depends_on":{"nodes":["model.p.a","test.p.t"]}},` +
		`"model.p.a":{"unique_id":"model.p.a","resource_type":"model","name":"a","schema":"s","database":"d","columns":{"id":{"name":"id","data_type":"int"}}},` +
		`"test.p.t":{"unique_id":"test.p.t","resource_type":"test","test_metadata":{"name":"unique"}}},` +
		`"sources":{"source.p.s.t":{"unique_id":"source.p.s.t","resource_type":"source","name":"t","schema":"s","identifier":"t"}},` +
		`"exposures":{"exposure.p.e":{"unique_id":"exposure.p.e","resource_type":"exposure","name":"e","type":"dashboard","owner":{"name":"n"},"depends_on":{"nodes":["model.p.b"]}}},` +
		`"macros":{"macro.x":{"arguments":[1,2,{"a":null}]}},"child_map":[],"docs":"anything","groups":{"group.p.g":{"name":"g","owner":{"email":"a@b"}}}}`,
	`{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v9.json","adapter_type":"snowflake"},"nodes":{},"sources":{},"parent_map":{"x":["y"]}}`,
	`{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v9.json","adapter_type":"snowflake"},"nodes":{},"sources":{},"parent_map":null,"groups":null}`,
	`{"metadata":null,"nodes":{},"sources":{}}`,
	`{"nodes":{},"sources":{}}`,
	`{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json","adapter_type":"duckdb"},"sources":{}}`,
	`{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json","adapter_type":"duckdb"},"nodes":{"model.p.a":{"unique_id":"model.p.b","resource_type":"model"}},"sources":{}}`,
	// A key twice: the checked reader keeps the last; the one-pass
	// reader hands such a document over.
	`{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json","adapter_type":"duckdb"},"nodes":{"model.p.a":{"unique_id":"model.p.a","resource_type":"model","tags":7},"model.p.a":{"unique_id":"model.p.a","resource_type":"model"}},"sources":{}}`,
	`{"metadata":{"adapter_type":"duckdb"},"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json","adapter_type":"duckdb"},"nodes":{},"sources":{}}`,
	`{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json","adapter_type":"duckdb"},"nodes":{},"sources":{}} {}`,
	`{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json","adapter_type":"duckdb"},"nodes":{"a":{"resource_type":"model","columns":{"c":{"name":1}}}},"sources":{}}`,
	`{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json","adapter_type":"duckdb"},"nodes":null,"sources":{}}`,
	"\xef\xbb\xbf{}",
	`{"metadata": {"dbt_schema_version": "x", "adapter_type": {"password": "hunter2"}}}`,
	`["x"]`, `null`, `{`, ``,
}

// checkOnePass: whenever the one-pass reader takes a document, it reads
// exactly what the checked reader does, errors included.
func checkOnePass(t *testing.T, data []byte) (taken bool) {
	t.Helper()
	d := decodeManifest(data)
	if d == nil {
		return false
	}
	got, gotErr := d.build()
	want, wantErr := parseManifestChecked(data)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("one pass: error %v; checked reader: %v", gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("one pass and checked reader differ:\n%+v\n%+v", got, want)
	}
	return true
}

func TestManifestOnePassAgrees(t *testing.T) {
	taken := 0
	for _, s := range onePassSeeds {
		if checkOnePass(t, []byte(s)) {
			taken++
		}
	}
	files, _ := filepath.Glob("testdata/dbt/*.json")
	if len(files) == 0 {
		t.Fatal("no manifests in testdata/dbt")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Real manifests are well-formed: the one pass must take them,
		// else it saves nothing.
		if !checkOnePass(t, data) {
			t.Errorf("%s: the one-pass reader handed a real manifest over", f)
		}
		if m, err := parseManifest(data); err != nil {
			t.Errorf("%s: %v", f, err)
		} else if len(m.nodes) == 0 {
			t.Errorf("%s: no nodes read", f)
		}
	}
	// Seeds 0-6 are well-formed JSON the one pass reads itself (some
	// with errors it words as the checked reader does); the rest it hands over.
	if taken != 7 {
		t.Errorf("the one-pass reader took %d seeds, want 7", taken)
	}
}

func FuzzManifestOnePass(f *testing.F) {
	for _, s := range onePassSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkOnePass(t, data) })
}
