package ingest

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestDBTManifestV10(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, clk := newGraph(t, db)
		data := fixture(t, "dbt/dbt-bouncer__dbt_16__manifest.json")
		res, err := DBTManifest(ctx, g, bytes.NewReader(data), DBTOptions{Domain: "analytics"})
		if err != nil {
			t.Fatal(err)
		}
		if res.SchemaVersion != "v10" || res.Adapter != "duckdb" || res.Project != "dbt_bouncer_test_project" {
			t.Errorf("metadata: %+v", res)
		}
		want := map[string]int{"model": 27, "seed": 3, "snapshot": 1, "source": 10, "exposure": 1}
		for k, n := range want {
			if res.Counts[k] != n {
				t.Errorf("counts[%s] = %d, want %d (all: %v)", k, res.Counts[k], n, res.Counts)
			}
		}
		if res.AssetsCreated != 42 || lineagetest.Count(t, db, "lineage_assets") != 42 {
			t.Errorf("assets created %d, stored %d, want 42", res.AssetsCreated, lineagetest.Count(t, db, "lineage_assets"))
		}
		if res.Edges != 45 || res.EdgesCreated != 45 || lineagetest.Count(t, db, "lineage_edges") != 45 {
			t.Errorf("edges %d created %d stored %d, want 45", res.Edges, res.EdgesCreated, lineagetest.Count(t, db, "lineage_edges"))
		}

		pay := mustLineage(t, g, "dbt://model.dbt_bouncer_test_project.stg_payments")
		if pay.Asset.Kind != lineage.KindDBTModel || pay.Asset.Platform != "duckdb" || pay.Asset.Domain != "analytics" {
			t.Errorf("stg_payments: %+v", pay.Asset)
		}
		if got := neighborIDs(pay.Upstream); !slices.Equal(got, []string{"dbt://seed.dbt_bouncer_test_project.raw_payments"}) {
			t.Errorf("stg_payments upstream = %v", got)
		}
		if !slices.Contains(pay.Asset.Aliases, "duckdb://dbt.main.stg_payments") {
			t.Errorf("stg_payments aliases = %v, want its relation", pay.Asset.Aliases)
		}
		var cols []string
		for _, c := range pay.Asset.Columns {
			cols = append(cols, c.Name)
		}
		if !slices.Equal(cols, []string{"payment_id", "payment_method"}) {
			t.Errorf("stg_payments columns = %v", cols)
		}

		exp := mustLineage(t, g, "dbt://exposure.dbt_bouncer_test_project.customers")
		if exp.Asset.Kind != lineage.KindDashboard || exp.Asset.Owner != "Anna Anderson" || exp.Asset.OwnerEmail != "anna.anderson@example.com" {
			t.Errorf("exposure: %+v", exp.Asset)
		}
		if got := neighborIDs(exp.Upstream); !slices.Equal(got, []string{"dbt://model.dbt_bouncer_test_project.customers"}) {
			t.Errorf("exposure upstream = %v", got)
		}

		// A source is known by its table; meta gives owner, contact email and tags.
		src := mustLineage(t, g, "duckdb://dbt.sources_that_dont_really_exist.source_1")
		if src.Asset.Kind != lineage.KindSource || src.Asset.Owner != "Anna" || src.Asset.OwnerEmail != "anna@email.com" ||
			!slices.Contains(src.Asset.Tags, "example_tag") {
			t.Errorf("source_1: %+v", src.Asset)
		}
		snap := mustLineage(t, g, "snapshot_orders")
		if snap.Asset.Kind != lineage.KindSnapshot || !slices.Contains(snap.Asset.Tags, "payment") {
			t.Errorf("snapshot: %+v", snap.Asset)
		}

		// The relation, a case variant of it and the bare name all resolve.
		for _, ref := range []string{"duckdb://dbt.main.stg_payments", `duckdb://"DBT".Main.STG_PAYMENTS`, "stg_payments", "model.dbt_bouncer_test_project.stg_payments"} {
			id, err := g.Resolve(ctx, ref)
			if err != nil || id != "dbt://model.dbt_bouncer_test_project.stg_payments" {
				t.Errorf("Resolve(%s) = %s, %v", ref, id, err)
			}
		}

		// Importing again changes nothing, even later.
		before := lineagetest.GraphDump(t, db)
		v1, _, _ := lineage.GraphVersion(ctx, db)
		clk.Advance(time.Hour)
		res2, err := DBTManifest(ctx, g, bytes.NewReader(data), DBTOptions{Domain: "analytics"})
		if err != nil {
			t.Fatal(err)
		}
		v2, _, _ := lineage.GraphVersion(ctx, db)
		if !res2.Unchanged || res2.AssetsCreated+res2.AssetsUpdated+res2.EdgesCreated+res2.EdgesUpdated != 0 || v1 != v2 {
			t.Errorf("re-import changed the graph: %+v (version %d -> %d)", res2.ImportStats, v1, v2)
		}
		if after := lineagetest.GraphDump(t, db); !slices.Equal(before, after) {
			t.Errorf("re-import changed stored rows:\nbefore %d lines, after %d", len(before), len(after))
		}
	})
}

func TestDBTManifestV12(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		res, err := DBTManifest(ctx, g, bytes.NewReader(fixture(t, "dbt/whyline-denver__manifest.json")), DBTOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.SchemaVersion != "v12" || res.Adapter != "bigquery" {
			t.Errorf("metadata: %+v", res)
		}
		if res.Counts["model"] != 24 || res.Counts["source"] != 13 || res.Counts["exposure"] != 1 {
			t.Errorf("counts = %v", res.Counts)
		}
		if n := lineagetest.Count(t, db, "lineage_assets"); n != 38 {
			t.Errorf("assets = %d, want 38", n)
		}
		if n := lineagetest.Count(t, db, "lineage_edges"); n != 48 || res.Edges != 48 {
			t.Errorf("edges = %d (reported %d), want 48", n, res.Edges)
		}
		app := mustLineage(t, g, "dbt://exposure.whyline_denver_dbt.whyline_denver_app")
		if app.Asset.Kind != lineage.KindApplication || app.Asset.Owner != "WhyLine Team" || app.Asset.OwnerEmail != "team@example.com" ||
			app.Asset.URL != "https://whylinedenver.com" {
			t.Errorf("exposure: %+v", app.Asset)
		}
		if len(app.Upstream) != 7 || !slices.Contains(neighborIDs(app.Upstream), "dbt://model.whyline_denver_dbt.mart_weather_impacts") {
			t.Errorf("exposure upstream = %v, want the 7 marts", neighborIDs(app.Upstream))
		}
		tracts := mustLineage(t, g, "stg_denver_tracts")
		if got := neighborIDs(tracts.Upstream); !slices.Equal(got, []string{"bigquery://whyline-denver.raw_denver.raw_denver_tracts"}) {
			t.Errorf("stg_denver_tracts upstream = %v", got)
		}
		// BigQuery: the project compares case-insensitively, dataset and table names don't.
		if id, err := g.Resolve(ctx, "bigquery://WHYLINE-DENVER.stg_denver.stg_denver_tracts"); err != nil || id != "dbt://model.whyline_denver_dbt.stg_denver_tracts" {
			t.Errorf("project case: %s, %v", id, err)
		}
		if _, err := g.Resolve(ctx, "bigquery://whyline-denver.STG_DENVER.stg_denver_tracts"); !errors.Is(err, lineage.ErrUnknownAsset) {
			t.Errorf("dataset case should matter in BigQuery, got %v", err)
		}
		// The marts are tagged in config and carry meta.
		mart := mustLineage(t, g, "mart_weather_impacts")
		if !slices.Contains(mart.Asset.Tags, "marts") {
			t.Errorf("mart tags = %v", mart.Asset.Tags)
		}
	})
}

func TestDBTManifestRejectsBadInput(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		cases := []struct {
			name, doc string
			want      []string
		}{
			{"not json", `{"metadata": `, []string{"(top level)"}},
			{"array", `[1,2]`, []string{"(top level)"}},
			{"no metadata", `{"nodes": {}}`, []string{"metadata", "v9, v10, v11, v12"}},
			{"old version", `{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v7.json", "adapter_type": "duckdb"}, "nodes": {}, "sources": {}}`,
				[]string{"metadata.dbt_schema_version", "v7", "v9, v10, v11, v12"}},
			{"not a manifest", `{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/run-results/v5.json"}}`,
				[]string{"metadata.dbt_schema_version", "run-results"}},
			{"wrong type", `{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json", "adapter_type": "duckdb"},
				"sources": {}, "nodes": {"model.p.a": {"unique_id": "model.p.a", "resource_type": "model", "depends_on": {"nodes": "model.p.b"}}}}`,
				[]string{`nodes["model.p.a"].depends_on.nodes`}},
			{"bad tags", `{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v11.json", "adapter_type": "duckdb"},
				"sources": {}, "nodes": {"model.p.a": {"unique_id": "model.p.a", "resource_type": "model", "config": {"tags": 3}}}}`,
				[]string{`nodes["model.p.a"].config.tags`}},
			{"missing nodes", `{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v9.json", "adapter_type": "duckdb"}}`,
				[]string{"nodes: missing"}},
		}
		for _, c := range cases {
			_, err := DBTManifest(ctx, g, strings.NewReader(c.doc), DBTOptions{})
			if err == nil {
				t.Errorf("%s: no error", c.name)
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q does not mention %q", c.name, err, w)
				}
			}
		}
		if n := lineagetest.Count(t, db, "lineage_assets"); n != 0 {
			t.Errorf("bad manifests wrote %d assets", n)
		}
		if v, _, _ := lineage.GraphVersion(ctx, db); v != 0 {
			t.Errorf("graph version moved to %d", v)
		}
	})
}

// goTypeRE matches Go type names, which an input error must never show.
var goTypeRE = regexp.MustCompile(`interface \{|map\[|\[\]|\bu?int(8|16|32|64)?\b|float64|\bbool\b|lineage\.|json\.|Go (value|struct)|\*struct`)

// A manifest is any file the caller points at, so its errors name the
// field, what was expected and the kind of JSON value found, and never
// quote what the file holds: every document here hides "hunter2" where the
// error points.
func TestManifestErrorsNameTheFieldNotTheContent(t *testing.T) {
	const v12 = `"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json", "adapter_type": "duckdb"`
	node := func(key, body string) string {
		return `{"metadata": {` + v12 + `}, "sources": {}, "nodes": {"` + key + `": ` + body + `}}`
	}
	const versions = " (supported manifest schemas: v9, v10, v11, v12)"
	cases := []struct {
		name, doc, want string
		testsOnly       bool // only ReadDBTTests reads the field
	}{
		{"schema version not a URL", `{"metadata": {"dbt_schema_version": "SECRET_hunter2", "adapter_type": "duckdb"}, "nodes": {}, "sources": {}}`,
			"dbt manifest metadata.dbt_schema_version: expected a manifest schema URL like https://schemas.getdbt.com/dbt/manifest/v12.json, found a string of 14 characters (supported: v9, v10, v11, v12)", false},
		{"metadata field an object", `{"metadata": {"dbt_schema_version": "x", "adapter_type": {"password": "hunter2"}}}`,
			"dbt manifest metadata.adapter_type: expected a string, found an object" + versions, false},
		{"metadata field a number", `{"metadata": {"dbt_version": 2.0000000001, "password": "hunter2"}}`,
			"dbt manifest metadata.dbt_version: expected a string, found a number" + versions, false},
		{"metadata a string", `{"metadata": "hunter2"}`,
			"dbt manifest metadata: expected an object, found a string" + versions, false},
		{"top level an array", `["hunter2"]`,
			"dbt manifest (top level): expected an object, found an array" + versions, false},
		{"tags an object", node("model.p.a", `{"unique_id": "model.p.a", "resource_type": "model", "config": {"tags": {"token": "hunter2"}}}`),
			`dbt manifest nodes["model.p.a"].config.tags: expected a string or a list of strings, found an object`, false},
		{"tags a number", node("model.p.a", `{"unique_id": "model.p.a", "resource_type": "model", "tags": 7}`),
			`dbt manifest nodes["model.p.a"].tags: expected a string or a list of strings, found a number`, false},
		{"unique_id not its key", node("model.p.a", `{"unique_id": "password = hunter2", "resource_type": "model"}`),
			`dbt manifest nodes["model.p.a"].unique_id is "password"… (a name of 18 characters), not its key`, false},
		{"key that is not a name", node("aws key hunter2", `{"resource_type": "model", "depends_on": {"nodes": "hunter2"}}`),
			`dbt manifest nodes["aws"… (a name of 15 characters)].depends_on.nodes: expected an array, found a string` + versions, false},
		{"column name a number", node("model.p.a", `{"unique_id": "model.p.a", "resource_type": "model", "columns": {"hunter2 col": {"name": 12}}}`),
			`dbt manifest nodes["model.p.a"].columns.name: expected a string, found a number` + versions, false},
		{"quoting not a boolean", node("model.p.a", `{"unique_id": "model.p.a", "resource_type": "model", "quoting": {"identifier": "hunter2"}}`),
			`dbt manifest nodes["model.p.a"].quoting: expected true or false, found a string` + versions, false},
		{"parent_map values strings", `{"metadata": {` + v12 + `}, "sources": {}, "nodes": {}, "parent_map": {"model.p.a": "hunter2"}}`,
			"dbt manifest parent_map: expected an array, found a string" + versions, false},
		{"test metadata a string", node("test.p.t", `{"unique_id": "test.p.t", "resource_type": "test", "test_metadata": "hunter2"}`),
			`dbt manifest nodes["test.p.t"].test_metadata: expected an object, found a string` + versions, true},
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g, _ := newGraph(t, db)
		for _, c := range cases {
			var errs []error
			if !c.testsOnly {
				_, err := DBTManifest(context.Background(), g, strings.NewReader(c.doc), DBTOptions{})
				errs = append(errs, err)
			}
			_, _, err := ReadDBTTests(strings.NewReader(c.doc))
			errs = append(errs, err)
			for _, err := range errs {
				if err == nil {
					t.Errorf("%s: no error", c.name)
					continue
				}
				if err.Error() != c.want {
					t.Errorf("%s:\n got %s\nwant %s", c.name, err, c.want)
				}
				if strings.Contains(err.Error(), "hunter2") || goTypeRE.MatchString(err.Error()) {
					t.Errorf("%s: error quotes the file or names a Go type: %s", c.name, err)
				}
			}
		}
		if n := lineagetest.Count(t, db, "lineage_assets"); n != 0 {
			t.Errorf("refused manifests wrote %d assets", n)
		}
	})
}

func TestSafeName(t *testing.T) {
	for in, want := range map[string]string{
		"model.jaffle_shop.orders":  `"model.jaffle_shop.orders"`,
		"":                          "(empty)",
		"password = hunter2":        `"password"… (a name of 18 characters)`,
		"${json-unit.any-string}":   "(a name of 23 characters)",
		"ab cd":                     "(a name of 5 characters)",
		strings.Repeat("a", 64):     `"` + strings.Repeat("a", 64) + `"`,
		strings.Repeat("a", 65):     `"` + strings.Repeat("a", 32) + `"… (a name of 65 characters)`,
		"naïve":                     "(a name of 5 characters)",
		"\x00\x1b[31mred":           "(a name of 9 characters)",
		"kafka://broker:9092/topic": `"kafka://broker:9092/topic"`,
	} {
		if got := safeName(in); got != want {
			t.Errorf("safeName(%q) = %s, want %s", in, got, want)
		}
	}
}
