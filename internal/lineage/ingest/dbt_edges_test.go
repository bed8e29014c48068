package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestImportedEdgesAreTheManifestsDependencies holds the stored edges to
// the manifest's dependencies read the plainest way (a generic JSON
// decode, parent_map or else each node's depends_on, both ends taken
// nodes, no self edge, each pair once), on the two real projects and on
// seeded manifests the import was not written against: models, sources
// and exposures in sections whose key order is not their ids' order,
// parent lists with repeats, with more than 32 entries, and naming tests
// and nodes nobody defines.
func TestImportedEdgesAreTheManifestsDependencies(t *testing.T) {
	docs := map[string][]byte{
		"dbt-bouncer": fixture(t, "dbt/dbt-bouncer__dbt_16__manifest.json"),
		"whyline":     fixture(t, "dbt/whyline-denver__manifest.json"),
	}
	for seed := uint64(1); seed <= 4; seed++ {
		docs[fmt.Sprintf("seeded %d, depends_on", seed)] = seededManifest(seed, false)
		docs[fmt.Sprintf("seeded %d, parent_map", seed)] = seededManifest(seed, true)
	}
	for name, data := range docs {
		want, listed, missing := manifestDependencies(t, data)
		if len(want) == 0 {
			t.Fatalf("%s: the manifest has no dependencies to compare", name)
		}
		storetest.Each(t, func(t *testing.T, db *store.DB) {
			g, _ := newGraph(t, db)
			res, err := DBTManifest(context.Background(), g, bytes.NewReader(data), DBTOptions{})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got := storedEdges(t, db)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: stored %d edges, the manifest has %d dependencies\nstored:   %.600v\nmanifest: %.600v", name, len(got), len(want), got, want)
			}
			if res.EdgesCreated != len(want) {
				t.Errorf("%s: edges created %d, want %d", name, res.EdgesCreated, len(want))
			}
			// The manifest's own count: each node's taken parents once,
			// a self-dependency included (it is listed, not stored).
			if res.Edges != listed {
				t.Errorf("%s: the result lists %d edges, the manifest %d", name, res.Edges, listed)
			}
			if res.WarningsTotal != missing {
				t.Errorf("%s: %d warnings, want one per parent the import does not take: %d", name, res.WarningsTotal, missing)
			}
		})
	}
}

// manifestDependencies is the sorted, distinct "dbt://parent -> dbt://child"
// pairs between the nodes an import takes (no self edge); listed counts
// each taken node's distinct taken parents, itself included, and missing
// the distinct parents taken nodes name that the import does not take.
func manifestDependencies(t *testing.T, data []byte) (pairs []string, listed, missing int) {
	t.Helper()
	var doc struct {
		Nodes, Sources, Exposures map[string]struct {
			UniqueID     string `json:"unique_id"`
			ResourceType string `json:"resource_type"`
			DependsOn    struct {
				Nodes []string `json:"nodes"`
			} `json:"depends_on"`
		}
		ParentMap map[string][]string `json:"parent_map"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	taken := map[string]bool{}
	parents := doc.ParentMap
	fromNodes := parents == nil
	if fromNodes {
		parents = map[string][]string{}
	}
	for _, section := range []map[string]struct {
		UniqueID     string `json:"unique_id"`
		ResourceType string `json:"resource_type"`
		DependsOn    struct {
			Nodes []string `json:"nodes"`
		} `json:"depends_on"`
	}{doc.Nodes, doc.Sources, doc.Exposures} {
		for _, n := range section {
			switch n.ResourceType {
			case "model", "seed", "snapshot", "source", "exposure":
				taken[n.UniqueID] = true
				if fromNodes {
					parents[n.UniqueID] = n.DependsOn.Nodes
				}
			}
		}
	}
	seen, absent := map[string]bool{}, map[string]bool{}
	for child, ps := range parents {
		if !taken[child] {
			continue
		}
		mine := map[string]bool{}
		for _, p := range ps {
			if !taken[p] {
				absent[p] = true
				continue
			}
			if !mine[p] {
				mine[p] = true
				listed++
			}
			e := "dbt://" + p + " -> dbt://" + child
			if p != child && !seen[e] {
				seen[e] = true
				pairs = append(pairs, e)
			}
		}
	}
	slices.Sort(pairs)
	return pairs, listed, len(absent)
}

// storedEdges is the graph's edges as sorted "from -> to", each asset
// named by its dbt id (a source's asset id is its table's; its dbt id is
// one of its names).
func storedEdges(t *testing.T, db *store.DB) []string {
	t.Helper()
	rows, err := db.SQL().QueryContext(context.Background(), `SELECT a.alias, b.alias FROM lineage_edges e
		JOIN lineage_aliases a ON a.asset_seq = e.from_seq AND a.alias LIKE 'dbt://%'
		JOIN lineage_aliases b ON b.asset_seq = e.to_seq AND b.alias LIKE 'dbt://%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var from, to string
		if err := rows.Scan(&from, &to); err != nil {
			t.Fatal(err)
		}
		out = append(out, from+" -> "+to)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// seededManifest is a v12 manifest drawn from seed: models named so their
// keys sort apart from their positions, sources and exposures, tests,
// and parent lists that repeat, run long, point at tests, at undefined
// nodes and at the node itself.
func seededManifest(seed uint64, parentMap bool) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var ids []string // every node a dependency may name
	models := 40 + rng.IntN(60)
	for i := 0; i < models; i++ {
		ids = append(ids, fmt.Sprintf("model.p.m%d", rng.IntN(1000)*1000+i))
	}
	for i := 0; i < 5+rng.IntN(10); i++ {
		ids = append(ids, fmt.Sprintf("source.p.raw.s%d", i))
	}
	tests := []string{"test.p.not_null_x.1", "test.p.unique_y.2"}
	exposures := []string{"exposure.p.dash_a", "exposure.p.app_b"}
	pick := func(self string) []string {
		var ps []string
		k := rng.IntN(4)
		if rng.IntN(10) == 0 {
			k = 33 + rng.IntN(20) // past the scan's 32
		}
		for j := 0; j < k; j++ {
			switch rng.IntN(12) {
			case 0:
				ps = append(ps, tests[rng.IntN(len(tests))])
			case 1:
				ps = append(ps, "model.p.nobody")
			case 2:
				ps = append(ps, self)
			case 3:
				if len(ps) > 0 {
					ps = append(ps, ps[rng.IntN(len(ps))]) // a repeat
					continue
				}
				fallthrough
			default:
				ps = append(ps, ids[rng.IntN(len(ids))])
			}
		}
		return ps
	}
	node := func(id, typ string, deps []string) map[string]any {
		n := map[string]any{"unique_id": id, "resource_type": typ, "name": id[len(id)-4:], "depends_on": map[string]any{"nodes": deps}}
		if typ != "exposure" {
			n["database"], n["schema"], n["alias"] = "db", "s", fmt.Sprintf("t_%x", []byte(id))
		}
		return n
	}
	nodes, sources, exps := map[string]any{}, map[string]any{}, map[string]any{}
	parents := map[string][]string{}
	for _, id := range ids {
		var deps []string
		if id[:6] == "model." {
			deps = pick(id)
			nodes[id] = node(id, "model", deps)
		} else {
			sources[id] = node(id, "source", nil)
		}
		parents[id] = deps
	}
	for _, id := range tests {
		deps := []string{ids[rng.IntN(len(ids))]}
		nodes[id] = node(id, "test", deps)
		parents[id] = deps
	}
	for _, id := range exposures {
		deps := pick(id)
		exps[id] = node(id, "exposure", deps)
		parents[id] = deps
	}
	doc := map[string]any{
		"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json", "adapter_type": "duckdb", "project_name": "p"},
		"nodes":    nodes, "sources": sources, "exposures": exps,
	}
	if parentMap {
		// parent_map is what the import reads when present: depends_on
		// is left to say something else, so a reader of the wrong one
		// fails.
		for _, n := range nodes {
			n.(map[string]any)["depends_on"] = map[string]any{"nodes": []string{ids[0]}}
		}
		doc["parent_map"] = parents
	}
	data, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return data
}

// TestImportWhenAMergeTakesAnUpsertedAsset: a later node's names can
// merge an asset an earlier node was already given (a model moved to the
// table another model's new name also gives; a unique_id both a source
// and an exposure, each with its table); the edges, linked after every
// node, then go to the asset it was merged into. Both imports used to fail
// with "sql: no rows in result set".
func TestImportWhenAMergeTakesAnUpsertedAsset(t *testing.T) {
	const meta = `"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json","adapter_type":"postgres","project_name":"p"}`
	cases := []struct {
		name  string
		docs  []string
		edges [][2]string // dbt ids: the first's asset is upstream of the second's
	}{
		{"re-import: models trade tables", []string{
			`{` + meta + `,"sources":{},"nodes":{
  "model.p.d":{"unique_id":"model.p.d","resource_type":"model","name":"d","schema":"s","alias":"t4"}}}`,
			`{` + meta + `,"sources":{},"nodes":{
  "model.p.b":{"unique_id":"model.p.b","resource_type":"model","name":"b","schema":"s","alias":"t1"},
  "model.p.c":{"unique_id":"model.p.c","resource_type":"model","name":"c","schema":"s","alias":"t4"},
  "model.p.d":{"unique_id":"model.p.d","resource_type":"model","name":"d","schema":"s","alias":"t1"},
  "model.p.e":{"unique_id":"model.p.e","resource_type":"model","name":"e","depends_on":{"nodes":["model.p.b"]}}}}`,
		}, [][2]string{{"model.p.b", "model.p.e"}}},
		{"one import: an id both a source and an exposure", []string{
			`{` + meta + `,"nodes":{"zz":{"resource_type":"model","unique_id":"zz"}},
"sources":{"x":{"identifier":"t1","resource_type":"source","schema":"s","unique_id":"x"}},
"exposures":{"m":{"identifier":"t1","resource_type":"model","schema":"s","unique_id":"m"},
  "p":{"resource_type":"exposure","unique_id":"p"},
  "q":{"alias":"t3","depends_on":{"nodes":["p","zz"]},"resource_type":"exposure","schema":"s","unique_id":"q"},
  "x":{"identifier":"t3","resource_type":"exposure","schema":"s","unique_id":"x"}}}`,
		}, [][2]string{{"p", "q"}, {"zz", "q"}}},
	}
	for _, c := range cases {
		storetest.Each(t, func(t *testing.T, db *store.DB) {
			g, _ := newGraph(t, db)
			for i, doc := range c.docs {
				if _, err := DBTManifest(context.Background(), g, bytes.NewReader([]byte(doc)), DBTOptions{}); err != nil {
					t.Fatalf("%s: import %d: %v", c.name, i+1, err)
				}
			}
			for _, e := range c.edges {
				from, err := g.Resolve(context.Background(), "dbt://"+e[0])
				if err != nil {
					t.Fatalf("%s: %s: %v", c.name, e[0], err)
				}
				var up []string
				for _, n := range mustLineage(t, g, "dbt://"+e[1]).Upstream {
					up = append(up, n.Asset.ID)
				}
				if !slices.Contains(up, from) {
					t.Errorf("%s: %s (asset %s) is not upstream of %s: upstream %v", c.name, e[0], from, e[1], up)
				}
			}
			var orphans int
			if err := db.SQL().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM lineage_edges e WHERE NOT EXISTS
				(SELECT 1 FROM lineage_assets a WHERE a.seq = e.from_seq) OR NOT EXISTS (SELECT 1 FROM lineage_assets a WHERE a.seq = e.to_seq)`).Scan(&orphans); err != nil || orphans != 0 {
				t.Errorf("%s: %d edges name a missing asset (%v)", c.name, orphans, err)
			}
		})
	}
}
