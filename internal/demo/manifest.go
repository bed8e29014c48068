package demo

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"
)

// A small dbt project rendered as a real-shaped manifest.json (schema v12,
// the keys dbt 1.9 writes), so the pack exercises the same importer a
// team's own target/manifest.json would.

type dbtProject struct {
	name        string
	database    string
	generatedAt time.Time
	sources     []dbtSource
	models      []dbtModel
	tests       []dbtTest
	exposures   []dbtExposure
	selectors   map[string]string // selector name -> tag it selects
}

type dbtColumn struct {
	name, dataType, description string
}

type dbtSource struct {
	sourceName, name, schema, description, loadedAtField, owner, domain string
	columns                                                             []dbtColumn
	warnAfterHours, errorAfterHours                                     int
}

type dbtModel struct {
	name, schema, dir, materialized, description, rawCode, owner, domain string
	columns                                                              []dbtColumn
	tags                                                                 []string
	refs                                                                 []string    // model names
	sources                                                              [][2]string // source name, table
	uniqueKey                                                            string
}

// dbtTest is a generic test on a column of a model or source table.
type dbtTest struct {
	kind   string // not_null, unique
	model  string // model name, or "source:<source>.<table>"
	column string
}

type dbtExposure struct {
	name, label, kind, url, ownerName, ownerEmail, description, maturity string
	tags                                                                 []string
	meta                                                                 map[string]any
	refs                                                                 []string
}

func (p *dbtProject) sourceID(src, table string) string {
	return "source." + p.name + "." + src + "." + table
}

func (p *dbtProject) modelID(name string) string { return "model." + p.name + "." + name }

func (p *dbtProject) relation(schema, name string) string {
	return fmt.Sprintf("%q.%q.%q", p.database, schema, name)
}

func (p *dbtProject) source(src, table string) *dbtSource {
	for i := range p.sources {
		if p.sources[i].sourceName == src && p.sources[i].name == table {
			return &p.sources[i]
		}
	}
	return nil
}

func (p *dbtProject) model(name string) *dbtModel {
	for i := range p.models {
		if p.models[i].name == name {
			return &p.models[i]
		}
	}
	return nil
}

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func columnsJSON(cols []dbtColumn) map[string]any {
	out := map[string]any{}
	for _, c := range cols {
		var dt any
		if c.dataType != "" {
			dt = c.dataType
		}
		out[c.name] = map[string]any{
			"name": c.name, "description": c.description, "meta": map[string]any{}, "data_type": dt,
			"constraints": []any{}, "quote": nil, "tags": []any{},
		}
	}
	return out
}

func strs(s []string) []any {
	out := make([]any, 0, len(s))
	for _, v := range s {
		out = append(out, v)
	}
	return out
}

// compile replaces ref() and source() calls with relation names, as dbt
// does when it writes compiled_code.
func (p *dbtProject) compile(raw string) string {
	out := raw
	for _, m := range p.models {
		out = strings.ReplaceAll(out, fmt.Sprintf("{{ ref('%s') }}", m.name), p.relation(m.schema, m.name))
	}
	for _, s := range p.sources {
		out = strings.ReplaceAll(out, fmt.Sprintf("{{ source('%s', '%s') }}", s.sourceName, s.name), p.relation(s.schema, s.name))
	}
	return out
}

// manifest renders the project.
func (p *dbtProject) manifest() map[string]any {
	created := float64(p.generatedAt.Add(-2*time.Minute).UnixMilli()) / 1000
	projectID := md5.Sum([]byte(p.name))
	nodes := map[string]any{}
	sources := map[string]any{}
	exposures := map[string]any{}
	parents := map[string][]string{}
	children := map[string][]string{}
	link := func(child string, parentIDs ...string) {
		if _, ok := parents[child]; !ok {
			parents[child] = []string{}
		}
		for _, par := range parentIDs {
			parents[child] = append(parents[child], par)
			children[par] = append(children[par], child)
		}
	}

	for _, s := range p.sources {
		id := p.sourceID(s.sourceName, s.name)
		children[id] = children[id][:0:0]
		sources[id] = map[string]any{
			"database": p.database, "schema": s.schema, "name": s.name, "resource_type": "source",
			"package_name": p.name, "path": "models/sources.yml", "original_file_path": "models/sources.yml",
			"unique_id": id, "fqn": strs([]string{p.name, s.sourceName, s.name}),
			"source_name": s.sourceName, "source_description": "", "loader": "", "identifier": s.name,
			"quoting":         map[string]any{"database": nil, "schema": nil, "identifier": nil, "column": nil},
			"loaded_at_field": s.loadedAtField,
			"freshness": map[string]any{
				"warn_after":  map[string]any{"count": s.warnAfterHours, "period": "hour"},
				"error_after": map[string]any{"count": s.errorAfterHours, "period": "hour"},
				"filter":      nil,
			},
			"external": nil, "description": s.description, "columns": columnsJSON(s.columns),
			"meta": map[string]any{"owner": s.owner, "domain": s.domain}, "source_meta": map[string]any{},
			"tags": []any{}, "config": map[string]any{"enabled": true}, "patch_path": nil,
			"unrendered_config": map[string]any{}, "relation_name": p.relation(s.schema, s.name), "created_at": created,
		}
	}

	for _, m := range p.models {
		id := p.modelID(m.name)
		var deps []string
		var refs []any
		for _, r := range m.refs {
			deps = append(deps, p.modelID(r))
			refs = append(refs, map[string]any{"name": r, "package": nil, "version": nil})
		}
		var srcs []any
		for _, s := range m.sources {
			deps = append(deps, p.sourceID(s[0], s[1]))
			srcs = append(srcs, strs([]string{s[0], s[1]}))
		}
		sort.Strings(deps)
		link(id, deps...)
		meta := map[string]any{"owner": m.owner, "domain": m.domain}
		var uniqueKey any
		if m.uniqueKey != "" {
			uniqueKey = m.uniqueKey
		}
		var incremental any
		if m.materialized == "incremental" {
			incremental = "delete+insert"
		}
		path := m.dir + "/" + m.name + ".sql"
		nodes[id] = map[string]any{
			"database": p.database, "schema": m.schema, "name": m.name, "resource_type": "model",
			"package_name": p.name, "path": path, "original_file_path": "models/" + path,
			"unique_id": id, "fqn": strs(append([]string{p.name}, append(strings.Split(m.dir, "/"), m.name)...)),
			"alias":    m.name,
			"checksum": map[string]any{"name": "sha256", "checksum": hashHex(m.rawCode)},
			"config": map[string]any{
				"enabled": true, "alias": nil, "schema": m.schema, "database": nil, "tags": strs(m.tags),
				"meta": meta, "group": nil, "materialized": m.materialized, "incremental_strategy": incremental,
				"persist_docs": map[string]any{}, "post-hook": []any{}, "pre-hook": []any{}, "quoting": map[string]any{},
				"column_types": map[string]any{}, "full_refresh": nil, "unique_key": uniqueKey,
				"on_schema_change": "ignore", "on_configuration_change": "apply", "grants": map[string]any{},
				"packages": []any{}, "docs": map[string]any{"show": true, "node_color": nil},
				"contract": map[string]any{"enforced": false, "alias_types": true}, "access": "protected",
			},
			"tags": strs(m.tags), "description": m.description, "columns": columnsJSON(m.columns),
			"meta": meta, "group": nil, "docs": map[string]any{"show": true, "node_color": nil},
			"patch_path": p.name + "://models/" + m.dir + "/schema.yml", "build_path": nil,
			"unrendered_config": map[string]any{"materialized": m.materialized, "schema": m.schema},
			"created_at":        created, "relation_name": p.relation(m.schema, m.name),
			"raw_code": m.rawCode, "language": "sql", "refs": nonNil(refs), "sources": nonNil(srcs), "metrics": []any{},
			"depends_on":    map[string]any{"macros": []any{}, "nodes": strs(deps)},
			"compiled_path": "target/compiled/" + p.name + "/models/" + path, "compiled": true,
			"compiled_code": p.compile(m.rawCode), "extra_ctes_injected": true, "extra_ctes": []any{},
			"contract": map[string]any{"enforced": false, "alias_types": true, "checksum": nil},
			"access":   "protected", "constraints": []any{}, "version": nil, "latest_version": nil, "deprecation_date": nil,
		}
	}

	for _, t := range p.tests {
		var parent, target, relation, fileKey string
		var refs, srcs []any
		if strings.HasPrefix(t.model, "source:") {
			srcName, table, _ := strings.Cut(strings.TrimPrefix(t.model, "source:"), ".")
			parent = p.sourceID(srcName, table)
			target = srcName + "_" + table
			relation = p.relation(p.source(srcName, table).schema, table)
			fileKey = "sources." + srcName
			srcs = []any{strs([]string{srcName, table})}
		} else {
			parent = p.modelID(t.model)
			target = t.model
			relation = p.relation(p.model(t.model).schema, t.model)
			fileKey = "models." + t.model
			refs = []any{map[string]any{"name": t.model, "package": nil, "version": nil}}
		}
		name := t.kind + "_" + target + "_" + t.column
		id := "test." + p.name + "." + name + "." + hashHex(name)[:10]
		link(id, parent)
		compiled := fmt.Sprintf("\n\nselect %s\nfrom %s\nwhere %s is null\n\n", t.column, relation, t.column)
		if t.kind == "unique" {
			compiled = fmt.Sprintf("\n\nselect\n    %s as unique_field,\n    count(*) as n_records\n\nfrom %s\nwhere %s is not null\ngroup by %s\nhaving count(*) > 1\n\n",
				t.column, relation, t.column, t.column)
		}
		modelArg := "{{ get_where_subquery(ref('" + t.model + "')) }}"
		if len(srcs) > 0 {
			s := srcs[0].([]any)
			modelArg = fmt.Sprintf("{{ get_where_subquery(source('%s', '%s')) }}", s[0], s[1])
		}
		nodes[id] = map[string]any{
			"database": p.database, "schema": "dbt_test__audit", "name": name, "resource_type": "test",
			"package_name": p.name, "path": name + ".sql", "original_file_path": "models/schema.yml",
			"unique_id": id, "fqn": strs([]string{p.name, name}), "alias": name,
			"checksum": map[string]any{"name": "none", "checksum": ""},
			"config": map[string]any{
				"enabled": true, "alias": nil, "schema": "dbt_test__audit", "database": nil, "tags": []any{},
				"meta": map[string]any{}, "group": nil, "materialized": "test", "severity": "ERROR",
				"store_failures": nil, "store_failures_as": nil, "where": nil, "limit": nil,
				"fail_calc": "count(*)", "warn_if": "!= 0", "error_if": "!= 0",
			},
			"tags": []any{}, "description": "", "columns": map[string]any{}, "meta": map[string]any{}, "group": nil,
			"docs": map[string]any{"show": true, "node_color": nil}, "patch_path": nil, "build_path": nil,
			"unrendered_config": map[string]any{}, "created_at": created, "relation_name": nil,
			"raw_code": "{{ test_" + t.kind + "(**_dbt_generic_test_kwargs) }}", "language": "sql",
			"refs": nonNil(refs), "sources": nonNil(srcs), "metrics": []any{},
			"depends_on": map[string]any{
				"macros": strs([]string{"macro.dbt.test_" + t.kind, "macro.dbt.get_where_subquery"}),
				"nodes":  strs([]string{parent}),
			},
			"compiled_path": "target/compiled/" + p.name + "/models/schema.yml/" + name + ".sql", "compiled": true,
			"compiled_code": compiled, "extra_ctes_injected": true, "extra_ctes": []any{},
			"contract":    map[string]any{"enforced": false, "alias_types": true, "checksum": nil},
			"column_name": t.column, "file_key_name": fileKey, "attached_node": attached(parent),
			"test_metadata": map[string]any{
				"name": t.kind, "kwargs": map[string]any{"column_name": t.column, "model": modelArg}, "namespace": nil,
			},
		}
	}

	for _, e := range p.exposures {
		id := "exposure." + p.name + "." + e.name
		var deps []string
		var refs []any
		for _, r := range e.refs {
			deps = append(deps, p.modelID(r))
			refs = append(refs, map[string]any{"name": r, "package": nil, "version": nil})
		}
		link(id, deps...)
		exposures[id] = map[string]any{
			"name": e.name, "resource_type": "exposure", "package_name": p.name, "path": "exposures.yml",
			"original_file_path": "models/exposures.yml", "unique_id": id, "fqn": strs([]string{p.name, e.name}),
			"type": e.kind, "owner": map[string]any{"email": e.ownerEmail, "name": e.ownerName},
			"description": e.description, "label": e.label, "maturity": e.maturity, "meta": e.meta,
			"tags": strs(e.tags), "config": map[string]any{"enabled": true}, "unrendered_config": map[string]any{},
			"url": e.url, "depends_on": map[string]any{"macros": []any{}, "nodes": strs(deps)},
			"refs": nonNil(refs), "sources": []any{}, "metrics": []any{}, "created_at": created,
		}
	}

	selectors := map[string]any{}
	for name, tag := range p.selectors {
		selectors[name] = map[string]any{
			"name": name, "description": "Models tagged " + tag + ", built by the " + name + " job",
			"definition": map[string]any{"method": "tag", "value": tag},
		}
	}
	parentMap, childMap := map[string]any{}, map[string]any{}
	for id, ps := range parents {
		sort.Strings(ps)
		parentMap[id] = strs(ps)
	}
	for id := range sources {
		if _, ok := parentMap[id]; !ok {
			parentMap[id] = []any{}
		}
	}
	for id := range nodes {
		if _, ok := children[id]; !ok {
			children[id] = nil
		}
	}
	for id := range exposures {
		if _, ok := children[id]; !ok {
			children[id] = nil
		}
	}
	for id, cs := range children {
		sort.Strings(cs)
		childMap[id] = strs(cs)
	}
	return map[string]any{
		"metadata": map[string]any{
			"dbt_schema_version":         "https://schemas.getdbt.com/dbt/manifest/v12.json",
			"dbt_version":                "1.9.4",
			"generated_at":               p.generatedAt.Format("2006-01-02T15:04:05.000000Z"),
			"invocation_id":              uuidFor("dbt-invocation/" + p.name + "/" + p.generatedAt.Format(time.RFC3339)),
			"env":                        map[string]any{},
			"project_name":               p.name,
			"project_id":                 hex.EncodeToString(projectID[:]),
			"user_id":                    nil,
			"send_anonymous_usage_stats": false,
			"adapter_type":               "duckdb",
		},
		"nodes": nodes, "sources": sources, "macros": map[string]any{}, "docs": map[string]any{},
		"exposures": exposures, "metrics": map[string]any{}, "groups": map[string]any{}, "selectors": selectors,
		"disabled": map[string]any{}, "parent_map": parentMap, "child_map": childMap, "group_map": map[string]any{},
		"saved_queries": map[string]any{}, "semantic_models": map[string]any{}, "unit_tests": map[string]any{},
	}
}

func nonNil(v []any) []any {
	if v == nil {
		return []any{}
	}
	return v
}

// attached is the node a generic test is attached to (dbt leaves it null
// for source tests).
func attached(parent string) any {
	if strings.HasPrefix(parent, "source.") {
		return nil
	}
	return parent
}
