package ingest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
)

// Supported dbt manifest schema versions: dbt 1.5 (v9) through dbt 1.8 and
// later (v12, still current).
const (
	minManifestVersion = 9
	maxManifestVersion = 12
)

// Compiled on first use, not at every agent's start (see warehouse.identRE).
var manifestVersionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`/manifest/v(\d+)\.json$`) })

// DBTOptions adjusts a manifest import.
type DBTOptions struct {
	Domain string `json:"domain,omitempty" jsonschema:"domain for nodes whose meta names none"`
	Owner  string `json:"owner,omitempty" jsonschema:"owner for nodes whose meta, group or exposure names none"`
	// InSwap, when set, runs inside the transaction that makes the import
	// visible (lineage.BulkOptions.InSwap), given the manifest's project:
	// what belongs with the graph (the project's tests, which checks
	// records) commits with it or not at all.
	InSwap func(tx *store.Tx, project string) error `json:"-"`
}

// DBTImportResult says what a manifest import found and changed.
type DBTImportResult struct {
	lineage.ImportStats
	Project       string         `json:"project" jsonschema:"dbt project name"`
	SchemaVersion string         `json:"schema_version" jsonschema:"manifest schema version, e.g. v12"`
	DBTVersion    string         `json:"dbt_version,omitempty" jsonschema:"dbt version that wrote the manifest"`
	Adapter       string         `json:"adapter" jsonschema:"warehouse adapter (platform of the relations)"`
	Counts        map[string]int `json:"counts" jsonschema:"nodes imported per dbt resource type"`
	Edges         int            `json:"edges" jsonschema:"dependency edges in the manifest between imported nodes"`
}

type dbtColumn struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	DataType    string `json:"data_type"`
}

type dbtOwner struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

// dbtNode holds the fields read from nodes, sources and exposures; the rest
// of the manifest is left alone, which is what lets one reader cover v9-v12.
type dbtNode struct {
	UniqueID     string               `json:"unique_id"`
	ResourceType string               `json:"resource_type"`
	Name         string               `json:"name"`
	Database     string               `json:"database"`
	Schema       string               `json:"schema"`
	Alias        string               `json:"alias"`
	Identifier   string               `json:"identifier"`
	RelationName string               `json:"relation_name"`
	Description  string               `json:"description"`
	SourceDesc   string               `json:"source_description"`
	Tags         json.RawMessage      `json:"tags"`
	Meta         map[string]any       `json:"meta"`
	SourceMeta   map[string]any       `json:"source_meta"`
	Columns      map[string]dbtColumn `json:"columns"`
	Group        string               `json:"group"`
	Type         string               `json:"type"`
	Owner        *dbtOwner            `json:"owner"`
	Label        string               `json:"label"`
	URL          string               `json:"url"`
	Quoting      map[string]*bool     `json:"quoting"`
	Config       struct {
		Tags         json.RawMessage `json:"tags"`
		Meta         map[string]any  `json:"meta"`
		Materialized string          `json:"materialized"`
		// Enabled and Where are a test's (see ReadDBTTests).
		Enabled *bool  `json:"enabled"`
		Where   string `json:"where"`
	} `json:"config"`
	DependsOn struct {
		Nodes []string `json:"nodes"`
	} `json:"depends_on"`
	// A test node's own fields, decoded in the same pass as every other
	// node's so the tests need no second parse of the manifest.
	ColumnName   string           `json:"column_name"`
	AttachedNode string           `json:"attached_node"`
	TestMetadata *dbtTestMetadata `json:"test_metadata"`
	// tags and configTags are Tags and Config.Tags read (checkNode).
	tags, configTags []string
}

type dbtGroup struct {
	Name  string   `json:"name"`
	Owner dbtOwner `json:"owner"`
}

// DBTManifest reads a dbt manifest.json (schema v9 to v12) into the
// graph: models, seeds, snapshots and sources as assets named both by
// their dbt id and by their warehouse relation, exposures as the
// dashboards and applications that read them, and the dependency edges.
// Owners, domains and tags come from meta, config.meta, groups and
// exposure owners. The import is atomic (one transaction, or staged and
// swapped in when large) and idempotent; a malformed or unsupported
// manifest names the JSON path that failed and changes nothing.
func DBTManifest(ctx context.Context, g *lineage.Graph, r io.Reader, opts DBTOptions) (*DBTImportResult, error) {
	pm, err := ReadDBTManifest(r)
	if err != nil {
		return nil, err
	}
	return pm.Import(ctx, g, opts)
}

// ParsedManifest is a dbt manifest read once, for both what it holds: the
// graph (Import) and the generic tests (Tests). A caller wanting both parses
// the document once instead of once for each.
type ParsedManifest struct{ m *manifest }

// maxManifestBytes bounds a manifest read from a reader.
const maxManifestBytes = 512 << 20

// ReadDBTManifest reads and parses a manifest from r (ParseDBTManifest).
func ReadDBTManifest(r io.Reader) (*ParsedManifest, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxManifestBytes))
	if err != nil {
		return nil, fmt.Errorf("read dbt manifest: %w", err)
	}
	return ParseDBTManifest(data)
}

// ParseDBTManifest parses a manifest (schema v9 to v12) in one streaming
// pass: its nodes, edges and test nodes. Nothing is written; a malformed or
// unsupported manifest is refused with the JSON path that failed. data is
// not kept.
func ParseDBTManifest(data []byte) (*ParsedManifest, error) {
	m, err := parseManifest(data)
	if err != nil {
		return nil, err
	}
	return &ParsedManifest{m: m}, nil
}

// Project is the manifest's dbt project name.
func (p *ParsedManifest) Project() string { return p.m.project }

// Import writes the manifest's graph (DBTManifest).
func (p *ParsedManifest) Import(ctx context.Context, g *lineage.Graph, opts DBTOptions) (*DBTImportResult, error) {
	m := p.m
	res := &DBTImportResult{Project: m.project, SchemaVersion: fmt.Sprintf("v%d", m.version), DBTVersion: m.dbtVersion,
		Adapter: m.adapter, Counts: map[string]int{}, Edges: len(m.edges)}
	for _, n := range m.nodes {
		res.Counts[n.ResourceType]++
	}
	var bulk lineage.BulkOptions
	if opts.InSwap != nil {
		bulk.InSwap = func(tx *store.Tx) error { return opts.InSwap(tx, m.project) }
	}
	// A whole project is staged and swapped in, or a re-import written in
	// place (WriteBulk): the write-ahead log stays about a batch long and
	// readers never see half of the import's changes (in place, the
	// restated rows' last-seen times follow the commit).
	stats, err := g.WriteBulk(ctx, len(m.nodes)+len(m.edges), func(w *lineage.Writer) error {
		ins := make([]*lineage.AssetInput, 0, len(m.nodes))
		for _, n := range m.nodes {
			in, err := m.assetInput(n, opts)
			if err != nil {
				return err
			}
			ins = append(ins, in)
		}
		seqs, err := w.UpsertAssets(ins)
		if err != nil {
			return err
		}
		w.ExpectLinks(len(m.edges))
		for _, e := range m.edges {
			if err := w.LinkLater(seqs[e[0]], seqs[e[1]], lineage.SourceDBT); err != nil {
				return fmt.Errorf("edge %s -> %s: %w", m.nodes[e[0]].UniqueID, m.nodes[e[1]].UniqueID, err)
			}
		}
		return nil
	}, bulk)
	if err != nil {
		return nil, err
	}
	res.ImportStats = stats
	res.AddWarnings(m.warnings...)
	return res, nil
}

type manifest struct {
	version    int
	dbtVersion string
	adapter    string
	project    string
	nodes      []*dbtNode
	groups     map[string]dbtGroup
	// edges are (parent, child) as positions in nodes, sorted: the import
	// finds each end's seq by position, where it built a map of 100k ids
	// to seqs for a 100k-model project, and sorting pairs of ints is
	// cheaper than pairs of ids (the parse 5% faster, about 25 ms).
	edges    [][2]int32
	warnings []string
	// tests are the test nodes of the nodes section, in key order
	// (ReadDBTTests maps them).
	tests []*dbtNode
}

func jsonPathError(path string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		p := path
		if te.Field != "" {
			p += "." + te.Field
		}
		return fmt.Errorf("dbt manifest %s: expected %s, found %s (supported manifest schemas: %s)", p, expectedKind(te.Type), foundKind(te.Value), supportedVersions())
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("dbt manifest %s: invalid JSON at byte %d: %v", path, se.Offset, err)
	}
	return fmt.Errorf("dbt manifest %s: %w (supported manifest schemas: %s)", path, err, supportedVersions())
}

func supportedVersions() string {
	var vs []string
	for v := minManifestVersion; v <= maxManifestVersion; v++ {
		vs = append(vs, fmt.Sprintf("v%d", v))
	}
	return strings.Join(vs, ", ")
}

// parseManifest reads a manifest in one pass (decodeManifest): the
// document is scanned and decoded once, straight into the nodes. Any
// document that pass does not take as plainly well-formed (a JSON error, a
// section of an unexpected kind, a key given twice) is read again by
// parseManifestChecked, whose errors name the field path that failed; the
// two agree on every document the first accepts (FuzzManifestOnePass).
func parseManifest(data []byte) (*manifest, error) {
	if d := decodeManifest(data); d != nil {
		return d.build()
	}
	return parseManifestChecked(data)
}

// manifestMeta is the manifest's metadata the import reads.
type manifestMeta struct {
	SchemaVersion string `json:"dbt_schema_version"`
	DBTVersion    string `json:"dbt_version"`
	Adapter       string `json:"adapter_type"`
	Project       string `json:"project_name"`
}

// keyedNode is a section entry: its key and its node.
type keyedNode struct {
	key  string
	node *dbtNode
}

// decodedManifest is a manifest decoded but not yet checked.
type decodedManifest struct {
	meta       manifestMeta
	hasMeta    bool
	groups     map[string]dbtGroup
	sections   [3][]keyedNode // nodes, sources, exposures, each sorted by key
	has        [3]bool
	parents    map[string][]string
	hasParents bool
}

var manifestSections = [3]string{"nodes", "sources", "exposures"}

// skipJSON skips a value the import does not read (macros, docs,
// child_map, ...) without keeping it.
type skipJSON struct{}

func (*skipJSON) UnmarshalJSON([]byte) error { return nil }

// decodeManifest decodes data with one streaming decoder: each byte is
// scanned once and each node decoded once, where reading the top level
// into raw sections and then each section into raw nodes scanned the
// document three times. It returns nil on anything but a plainly
// well-formed manifest, for parseManifestChecked to explain.
func decodeManifest(data []byte) *decodedManifest {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	d := &decodedManifest{}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := t.(string)
		if seen[key] {
			return nil // the last one counts: the checked reader's map does that
		}
		seen[key] = true
		switch key {
		case "metadata":
			d.hasMeta = true
			err = dec.Decode(&d.meta)
		case "groups":
			err = dec.Decode(&d.groups)
		case "parent_map":
			p := &d.parents
			if err = dec.Decode(&p); p != nil {
				d.hasParents = true
			}
		case "nodes", "sources", "exposures":
			i := slices.Index(manifestSections[:], key)
			d.has[i] = true
			d.sections[i], err = decodeSection(dec)
		default:
			err = dec.Decode(&skipJSON{})
		}
		if err != nil {
			return nil
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil // something after the document
	}
	return d
}

// decodeSection decodes one of nodes, sources or exposures: an object of
// nodes by unique_id, returned sorted by key. It fails on anything else
// and on a key given twice.
func decodeSection(dec *json.Decoder) ([]keyedNode, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if t != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	var out []keyedNode
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := t.(string)
		n := &dbtNode{}
		if err := dec.Decode(n); err != nil {
			return nil, err
		}
		out = append(out, keyedNode{key, n})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b keyedNode) int { return strings.Compare(a.key, b.key) })
	for i := 1; i < len(out); i++ {
		if out[i].key == out[i-1].key {
			return nil, errors.New("a key given twice")
		}
	}
	return out, nil
}

// build checks a decoded manifest, in the order parseManifestChecked
// does, and gathers its nodes and edges.
func (d *decodedManifest) build() (*manifest, error) {
	if !d.hasMeta {
		return nil, errNoMetadata()
	}
	m, err := newManifest(d.meta)
	if err != nil {
		return nil, err
	}
	if d.groups != nil {
		m.groups = d.groups
	}
	total := 0
	for _, s := range d.sections {
		total += len(s)
	}
	byID := make(map[string]int32, total)
	for i, section := range manifestSections {
		if !d.has[i] {
			if section == "exposures" {
				continue
			}
			return nil, errNoSection(section, m.version)
		}
		for _, e := range d.sections[i] {
			ok, err := checkNode(section, e.key, e.node)
			if err != nil {
				return nil, err
			}
			if ok {
				byID[e.node.UniqueID] = int32(len(m.nodes))
				m.nodes = append(m.nodes, e.node)
			} else if isTestNode(section, e.node) {
				m.tests = append(m.tests, e.node)
			}
		}
	}
	parents := d.parents
	if !d.hasParents {
		parents = dependsOn(m.nodes)
	}
	m.addEdges(byID, parents)
	return m, nil
}

func errNoMetadata() error {
	return fmt.Errorf("dbt manifest metadata: missing; is this a target/manifest.json? (supported schema versions: %s)", supportedVersions())
}

func errNoSection(section string, version int) error {
	return fmt.Errorf("dbt manifest %s: missing (a v%d manifest always has it)", section, version)
}

// newManifest checks the metadata: a supported schema version and an
// adapter.
func newManifest(meta manifestMeta) (*manifest, error) {
	mv := manifestVersionRE().FindStringSubmatch(meta.SchemaVersion)
	if mv == nil {
		// Only a dbt schema URL is shown (it tells a run_results.json or
		// catalog.json from a manifest); any other text stays unquoted.
		found := describeString(meta.SchemaVersion)
		if dbtSchemaURLRE().MatchString(meta.SchemaVersion) {
			found = strconv.Quote(meta.SchemaVersion)
		}
		return nil, fmt.Errorf("dbt manifest metadata.dbt_schema_version: expected a manifest schema URL like https://schemas.getdbt.com/dbt/manifest/v12.json, found %s (supported: %s)", found, supportedVersions())
	}
	version, _ := strconv.Atoi(mv[1])
	if version < minManifestVersion || version > maxManifestVersion {
		return nil, fmt.Errorf("dbt manifest metadata.dbt_schema_version is v%d, which is not supported; supported: %s (dbt 1.5 and later)", version, supportedVersions())
	}
	if strings.TrimSpace(meta.Adapter) == "" {
		return nil, fmt.Errorf("dbt manifest metadata.adapter_type: missing; it names the warehouse the relations live in")
	}
	return &manifest{version: version, dbtVersion: meta.DBTVersion, adapter: lineage.NormalizePlatform(meta.Adapter), project: meta.Project, groups: map[string]dbtGroup{}}, nil
}

// checkNode checks one decoded section entry and reads its tags. It
// reports whether the node is one the import takes (models, seeds,
// snapshots, sources, exposures; not tests, analyses, operations).
func checkNode(section, key string, n *dbtNode) (bool, error) {
	switch n.ResourceType {
	case "model", "seed", "snapshot", "source", "exposure":
	default:
		return false, nil
	}
	if n.UniqueID == "" {
		return false, fmt.Errorf("dbt manifest %s.unique_id: missing", nodePath(section, key))
	}
	if n.UniqueID != key {
		return false, fmt.Errorf("dbt manifest %s.unique_id is %s, not its key", nodePath(section, key), safeName(n.UniqueID))
	}
	// These become the node's asset ids (dbt://<unique_id>, the relation's
	// table id): the id text rule applies, naming the field, not the value.
	for _, f := range []struct{ name, s string }{{"unique_id", n.UniqueID}, {"name", n.Name}, {"database", n.Database},
		{"schema", n.Schema}, {"alias", n.Alias}, {"identifier", n.Identifier}, {"relation_name", n.RelationName}} {
		if err := lineage.CheckIDText("", f.s); err != nil {
			return false, fmt.Errorf("dbt manifest %s.%s %s", nodePath(section, key), f.name, err.(*lineage.IDTextError).Reason())
		}
	}
	var err error
	if n.tags, err = tagList(n.Tags); err != nil {
		return false, fmt.Errorf("dbt manifest %s.tags: %w", nodePath(section, key), err)
	}
	if n.configTags, err = tagList(n.Config.Tags); err != nil {
		return false, fmt.Errorf("dbt manifest %s.config.tags: %w", nodePath(section, key), err)
	}
	return true, nil
}

// isTestNode reports whether a section entry is a test ReadDBTTests
// reads: a node of the nodes section whose resource type is test.
func isTestNode(section string, n *dbtNode) bool {
	return section == "nodes" && n.ResourceType == "test"
}

func nodePath(section, key string) string {
	return fmt.Sprintf("%s[%s]", section, safeName(key))
}

// dependsOn is the parent map the nodes' depends_on give, for manifests
// without parent_map.
func dependsOn(nodes []*dbtNode) map[string][]string {
	parents := make(map[string][]string, len(nodes))
	for _, n := range nodes {
		parents[n.UniqueID] = n.DependsOn.Nodes
	}
	return parents
}

// addEdges adds the dependency edges between imported nodes (byID: a
// node's position in m.nodes by its unique_id, the last one's when two
// sections share one), sorted, and a warning for each dependency on a
// node the import does not take.
func (m *manifest) addEdges(byID map[string]int32, parents map[string][]string) {
	skipped := map[string]bool{}
	room := 0
	for _, n := range m.nodes {
		room += len(parents[n.UniqueID])
	}
	m.edges = slices.Grow(m.edges, room)
	for _, n := range m.nodes {
		// An edge into n comes only from n's own parent list, so a
		// repeat is looked for there, not in a map of every edge.
		first, ps, child := len(m.edges), parents[n.UniqueID], byID[n.UniqueID]
		var many map[int32]bool // for long lists, where a scan would be quadratic
		if len(ps) > 32 {
			many = make(map[int32]bool, len(ps))
		}
		for _, p := range ps {
			parent, ok := byID[p]
			if !ok {
				if !skipped[p] {
					skipped[p] = true
					m.warnings = append(m.warnings, fmt.Sprintf("%s depends on %s, which is not a model, seed, snapshot, source or exposure; that dependency is not in the graph", n.UniqueID, safeName(p)))
				}
				continue
			}
			switch {
			case many != nil && many[parent]:
			case many == nil && slices.ContainsFunc(m.edges[first:], func(e [2]int32) bool { return e[0] == parent }):
			default:
				if many != nil {
					many[parent] = true
				}
				m.edges = append(m.edges, [2]int32{parent, child})
			}
		}
	}
	slices.SortFunc(m.edges, func(a, b [2]int32) int {
		if c := cmp.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return cmp.Compare(a[1], b[1])
	})
}

// parseManifestChecked reads the manifest section by section and node by
// node, so a malformed one is refused with the JSON path that failed.
func parseManifestChecked(data []byte) (*manifest, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, jsonPathError("(top level)", err)
	}
	if top == nil {
		return nil, fmt.Errorf("dbt manifest: the document is not a JSON object (expected target/manifest.json)")
	}
	var meta manifestMeta
	raw, ok := top["metadata"]
	if !ok {
		return nil, errNoMetadata()
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, jsonPathError("metadata", err)
	}
	m, err := newManifest(meta)
	if err != nil {
		return nil, err
	}
	if raw, ok := top["groups"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &m.groups); err != nil {
			return nil, jsonPathError("groups", err)
		}
	}
	byID := map[string]int32{}
	for _, section := range manifestSections {
		raw, ok := top[section]
		if !ok {
			if section == "exposures" {
				continue
			}
			return nil, errNoSection(section, m.version)
		}
		var entries map[string]json.RawMessage
		if err := json.Unmarshal(raw, &entries); err != nil {
			return nil, jsonPathError(section, err)
		}
		keys := make([]string, 0, len(entries))
		for k := range entries {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			n := &dbtNode{}
			if err := json.Unmarshal(entries[k], n); err != nil {
				return nil, jsonPathError(nodePath(section, k), err)
			}
			ok, err := checkNode(section, k, n)
			if err != nil {
				return nil, err
			}
			if ok {
				byID[n.UniqueID] = int32(len(m.nodes))
				m.nodes = append(m.nodes, n)
			} else if isTestNode(section, n) {
				m.tests = append(m.tests, n)
			}
		}
	}
	// Edges come from parent_map when present (every version writes it),
	// else from each node's depends_on.
	parents := map[string][]string{}
	if raw, ok := top["parent_map"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &parents); err != nil {
			return nil, jsonPathError("parent_map", err)
		}
	} else {
		parents = dependsOn(m.nodes)
	}
	m.addEdges(byID, parents)
	return m, nil
}

// tagList reads dbt tags, which config may give as one string or a list.
func tagList(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	return nil, fmt.Errorf("expected a string or a list of strings, found %s", rawKind(raw))
}

// metaOwner reads an owner from dbt meta: owner as a string or as
// {name, email}, with email from owner_email, email or contact.email.
func metaOwner(metas ...map[string]any) (name, email string) {
	for _, m := range metas {
		if m == nil {
			continue
		}
		switch o := m["owner"].(type) {
		case string:
			if name == "" {
				name = o
			}
		case map[string]any:
			if s, ok := o["name"].(string); ok && name == "" {
				name = s
			}
			if s, ok := o["email"].(string); ok && email == "" {
				email = s
			}
		}
		for _, k := range []string{"owner_email", "email"} {
			if s, ok := m[k].(string); ok && email == "" {
				email = s
			}
		}
		if c, ok := m["contact"].(map[string]any); ok && email == "" {
			if s, ok := c["email"].(string); ok {
				email = s
			}
		}
	}
	return strings.TrimSpace(name), strings.TrimSpace(email)
}

func metaString(key string, metas ...map[string]any) string {
	for _, m := range metas {
		if s, ok := m[key].(string); ok && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// exposureKind maps a dbt exposure type to an asset kind.
func exposureKind(t string) lineage.Kind {
	switch strings.ToLower(t) {
	case "dashboard":
		return lineage.KindDashboard
	case "notebook", "analysis":
		return lineage.KindReport
	}
	return lineage.KindApplication // application, ml
}

// relation returns the canonical warehouse id of a node's relation, or ""
// for nodes without one (ephemeral models, exposures).
func (m *manifest) relation(n *dbtNode) (id, weak string) {
	if n.ResourceType == "model" && n.Config.Materialized == "ephemeral" {
		return "", ""
	}
	if n.RelationName != "" {
		if id, weak, err := lineage.TableID(m.adapter, n.RelationName); err == nil {
			return id, weak
		}
	}
	ident := n.Alias
	if n.ResourceType == "source" || ident == "" {
		ident = n.Identifier
	}
	if ident == "" {
		ident = n.Name
	}
	if n.Schema == "" || ident == "" {
		return "", ""
	}
	quoted := false
	if q := n.Quoting["identifier"]; q != nil {
		quoted = *q
	}
	id, weak, err := lineage.RelationID(m.adapter, quoted, n.Database, n.Schema, ident)
	if err != nil {
		return "", ""
	}
	return id, weak
}

func (m *manifest) assetInput(n *dbtNode, opts DBTOptions) (*lineage.AssetInput, error) {
	dbtID := "dbt://" + n.UniqueID
	in := &lineage.AssetInput{ID: dbtID, Names: []string{dbtID}, Platform: m.adapter, Source: lineage.SourceDBT, Description: strings.TrimSpace(n.Description)}
	in.Tags = slices.Concat(n.tags, n.configTags)
	in.Owner, in.OwnerEmail = metaOwner(n.Config.Meta, n.Meta, n.SourceMeta)
	in.Domain = metaString("domain", n.Config.Meta, n.Meta, n.SourceMeta)
	if grp, ok := m.groups["group."+m.project+"."+n.Group]; ok && in.Owner == "" && n.Group != "" {
		in.Owner, in.OwnerEmail = grp.Owner.Name, grp.Owner.Email
	} else if in.Owner == "" && n.Group != "" {
		for _, grp := range m.groups {
			if grp.Name == n.Group {
				in.Owner, in.OwnerEmail = grp.Owner.Name, grp.Owner.Email
			}
		}
	}
	names := make([]string, 0, len(n.Columns))
	for k := range n.Columns {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		c := n.Columns[k]
		name := c.Name
		if name == "" {
			name = k
		}
		in.Columns = append(in.Columns, lineage.Column{Name: name, Type: c.DataType, Description: strings.TrimSpace(c.Description)})
	}
	switch n.ResourceType {
	case "model":
		in.Kind = lineage.KindDBTModel
	case "seed":
		in.Kind = lineage.KindSeed
	case "snapshot":
		in.Kind = lineage.KindSnapshot
	case "source":
		in.Kind = lineage.KindSource
		if in.Description == "" {
			in.Description = strings.TrimSpace(n.SourceDesc)
		}
	case "exposure":
		in.Kind = exposureKind(n.Type)
		in.Platform = "dbt"
		in.Title = n.Label
		if in.Title == "" {
			in.Title = n.Name
		}
		in.URL = n.URL
		if n.Owner != nil {
			if in.Owner == "" {
				in.Owner = n.Owner.Name
			}
			if in.OwnerEmail == "" {
				in.OwnerEmail = n.Owner.Email
			}
			if in.Owner == "" {
				in.Owner = n.Owner.Email
			}
		}
	}
	if id, weak := m.relation(n); id != "" {
		in.Names = append(in.Names, id)
		if weak != "" {
			in.Weak = []string{weak}
		}
		if n.ResourceType == "source" {
			// A source is a table dbt reads; the table's name is its id.
			in.ID = id
		}
	}
	if in.Owner == "" {
		in.Owner = opts.Owner
	}
	if in.Domain == "" {
		in.Domain = opts.Domain
	}
	return in, nil
}

// Errors about an input document (a dbt manifest, OpenLineage events, a
// connector's config) name the field, what was expected and the kind of
// JSON value found. They never quote the document's values: the document
// may be any file the caller pointed at (a credentials file, say). Names
// that locate a problem (a node key, a dataset) are shown only while short
// and identifier-like. Go type names never appear.

var (
	safeNameRE     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:/@$#+-]*`) })
	dbtSchemaURLRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^https://schemas\.getdbt\.com/dbt/[a-z_-]+/v[0-9]+\.json$`)
	})
)

// safeNameMax bounds the part of a name an error shows.
const safeNameMax = 64

// safeName shows a name read from a document: quoted whole when short and
// identifier-like, else its identifier-like start (if any) and its length.
func safeName(s string) string {
	n := utf8.RuneCountInString(s)
	if n == 0 {
		return "(empty)"
	}
	prefix := safeNameRE().FindString(s)
	if prefix == s && len(s) <= safeNameMax {
		return strconv.Quote(s)
	}
	if len(prefix) > safeNameMax/2 {
		prefix = prefix[:safeNameMax/2]
	}
	if len(prefix) >= 3 {
		return fmt.Sprintf("%q… (a name of %d characters)", prefix, n)
	}
	return fmt.Sprintf("(a name of %d characters)", n)
}

// describeString words a string value without showing it.
func describeString(s string) string {
	if strings.TrimSpace(s) == "" {
		return "an empty string"
	}
	return fmt.Sprintf("a string of %d characters", utf8.RuneCountInString(s))
}

// jsonKind words the JSON kind of a value decoded into any.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "another kind of value"
}

// rawKind is jsonKind for undecoded JSON.
func rawKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch c := raw[0]; {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	}
	return "text that is not JSON"
}

// expectedKind words the JSON kind a Go destination type takes.
func expectedKind(t reflect.Type) string {
	if t == nil {
		return "another kind of value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "another kind of value"
}

// foundKind words json.UnmarshalTypeError.Value ("number 1.5" is a number;
// the digits are the document's and are not shown).
func foundKind(value string) string {
	kind, _, _ := strings.Cut(value, " ")
	switch kind {
	case "object", "array":
		return "an " + kind
	case "string", "number":
		return "a " + kind
	case "bool":
		return "a boolean"
	case "null":
		return "null"
	}
	return "another kind of value"
}

// quotedNamesSafe rewords an error from a name parser (TableID and its
// kin quote the whole name) so that the name appears only as safeName
// shows it.
func quotedNamesSafe(err error, names ...string) error {
	msg := err.Error()
	for _, n := range names {
		if q := strconv.Quote(n); strings.Contains(msg, q) {
			msg = strings.ReplaceAll(msg, q, safeName(n))
		}
	}
	return errors.New(msg)
}
