package ingest

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// DBTTest is one of dbt's generic data tests declared on a model, seed,
// snapshot or source: the four that say what a table must hold (unique,
// not_null, accepted_values, relationships). dw-quality turns them into
// expectations, so a key dbt declares unique is checked without repeating
// it.
type DBTTest struct {
	ID string `json:"id" jsonschema:"the test's dbt unique_id"`
	// Name is unique, not_null, accepted_values or relationships.
	Name string `json:"name" jsonschema:"unique, not_null, accepted_values or relationships"`
	// Asset is the tested table's warehouse id; Node its dbt id.
	Asset  string   `json:"asset" jsonschema:"warehouse id of the tested table"`
	Node   string   `json:"node" jsonschema:"dbt unique_id of the tested model, seed, snapshot or source"`
	Column string   `json:"column" jsonschema:"the tested column"`
	Values []string `json:"values,omitempty" jsonschema:"accepted_values: the accepted values"`
	// To and Field name the referenced table and column (relationships).
	To    string `json:"to,omitempty" jsonschema:"relationships: warehouse id of the referenced table"`
	Field string `json:"field,omitempty" jsonschema:"relationships: the referenced column"`
}

// dbtTestMetadata is a generic test's test_metadata (dbtNode.TestMetadata).
type dbtTestMetadata struct {
	Name      string         `json:"name"`
	Namespace *string        `json:"namespace"`
	Kwargs    map[string]any `json:"kwargs"`
}

// ReadDBTTests reads the generic tests of a dbt manifest (v9 to v12) that
// an expectation can express. Tests of other kinds (dbt_utils, custom
// SQL), disabled ones, tests with a where filter (they judge only some
// rows) and tests on nodes without a warehouse relation are skipped; the
// second result says which, so nothing is dropped silently.
func ReadDBTTests(r io.Reader) ([]DBTTest, []string, error) {
	pm, err := ReadDBTManifest(r)
	if err != nil {
		return nil, nil, err
	}
	tests, notes := pm.Tests()
	return tests, notes, nil
}

// Tests are the manifest's generic tests an expectation can express, and
// notes counting those skipped (ReadDBTTests), from the one parse.
func (p *ParsedManifest) Tests() ([]DBTTest, []string) {
	m := p.m
	byID := make(map[string]*dbtNode, len(m.nodes))
	for _, n := range m.nodes {
		byID[n.UniqueID] = n
	}
	var out []DBTTest
	skipped := map[string]int{}
	for _, n := range m.tests {
		if n.TestMetadata == nil {
			continue // singular (SQL) tests have no metadata to map
		}
		md := n.TestMetadata
		if md.Namespace != nil && *md.Namespace != "" && *md.Namespace != "dbt" {
			skipped[*md.Namespace+"."+md.Name]++
			continue
		}
		switch md.Name {
		case "unique", "not_null", "accepted_values", "relationships":
		default:
			skipped[md.Name]++
			continue
		}
		if (n.Config.Enabled != nil && !*n.Config.Enabled) || strings.TrimSpace(n.Config.Where) != "" {
			skipped[md.Name+" (disabled or filtered by where)"]++
			continue
		}
		t := DBTTest{ID: n.UniqueID, Name: md.Name, Node: n.AttachedNode, Column: n.ColumnName}
		if t.Column == "" {
			t.Column, _ = md.Kwargs["column_name"].(string)
		}
		if t.Node == "" && len(n.DependsOn.Nodes) > 0 {
			t.Node = n.DependsOn.Nodes[len(n.DependsOn.Nodes)-1]
		}
		node := byID[t.Node]
		if node == nil || t.Column == "" {
			skipped[md.Name+" (no tested table or column)"]++
			continue
		}
		if t.Asset, _ = m.relation(node); t.Asset == "" {
			skipped[md.Name+" (tested node has no warehouse relation)"]++
			continue
		}
		switch md.Name {
		case "accepted_values":
			vals, _ := md.Kwargs["values"].([]any)
			for _, v := range vals {
				t.Values = append(t.Values, fmt.Sprint(v))
			}
			if len(t.Values) == 0 {
				skipped["accepted_values (no values)"]++
				continue
			}
		case "relationships":
			t.Field, _ = md.Kwargs["field"].(string)
			// The referenced node is the dependency that is not the
			// tested one.
			for _, d := range n.DependsOn.Nodes {
				if d != t.Node && byID[d] != nil {
					t.To, _ = m.relation(byID[d])
				}
			}
		}
		out = append(out, t)
	}
	var notes []string
	for name, n := range skipped {
		notes = append(notes, fmt.Sprintf("%d %s test(s) not mapped to expectations", n, name))
	}
	sort.Strings(notes)
	return out, notes
}
