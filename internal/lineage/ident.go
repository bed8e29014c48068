package lineage

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// Identity: one physical table is named differently by each system that
// sees it. dbt gives database.schema.identifier plus the adapter type;
// OpenLineage gives a namespace (snowflake://org-account, bigquery,
// postgres://host:5432) and db.schema.table; a connector config gives a
// table name and a connector class. Each is folded here to one canonical id
// platform://database.schema.table following the platform's own case rules,
// so the store's alias table can join them into one asset.

// caseRule is how a platform matches identifiers.
type caseRule int

const (
	// ruleExact keeps names as given: platforms whose rules we don't know.
	ruleExact caseRule = iota
	// ruleUpper: unquoted identifiers are stored and resolved upper-case,
	// quoted ones keep their case (Snowflake).
	ruleUpper
	// ruleLower: unquoted identifiers fold to lower case, quoted ones keep
	// their case (PostgreSQL, Redshift).
	ruleLower
	// ruleInsensitive: identifiers match case-insensitively even when quoted
	// (DuckDB, MySQL on Linux is not, but Trino and Databricks are).
	ruleInsensitive
	// ruleBigQuery: project ids are lower-case only, so they compare
	// case-insensitively; dataset and table names are case-sensitive (the
	// default unless a dataset sets is_case_insensitive).
	ruleBigQuery
)

var warehousePlatforms = map[string]caseRule{
	"snowflake":  ruleUpper,
	"postgres":   ruleLower,
	"redshift":   ruleLower,
	"duckdb":     ruleInsensitive,
	"trino":      ruleInsensitive,
	"databricks": ruleInsensitive,
	"hive":       ruleInsensitive,
	"athena":     ruleInsensitive,
	"bigquery":   ruleBigQuery,
	"mysql":      ruleExact,
	"sqlserver":  ruleExact,
}

// platformAliases folds the spellings adapters and URLs use for a platform.
var platformAliases = map[string]string{
	"postgresql": "postgres",
	"pg":         "postgres",
	"bq":         "bigquery",
	"awsathena":  "athena",
	"mssql":      "sqlserver",
	// dbt Cloud jobs are dbt-cloud:// in the graph (lineage notes, the
	// demo's domains); dw.yaml and run specs call the system dbt_cloud.
	"dbt_cloud": "dbt-cloud",
	"dbtcloud":  "dbt-cloud",
}

// NormalizePlatform lower-cases a platform name and folds known spellings
// (postgresql -> postgres, bq -> bigquery).
func NormalizePlatform(p string) string {
	p = strings.ToLower(strings.TrimSpace(p))
	if a, ok := platformAliases[p]; ok {
		return a
	}
	return p
}

// IsWarehouse reports whether ids on this platform name tables and follow
// the platform's identifier case rules.
func IsWarehouse(platform string) bool {
	_, ok := warehousePlatforms[NormalizePlatform(platform)]
	return ok
}

// namePart is one dotted part of a table name and whether it was quoted.
type namePart struct {
	s      string
	quoted bool
}

// splitQualified splits a dotted name, honouring "double quotes" (with ""
// as an escaped quote) and `backticks` (whose content may itself hold dots,
// as BigQuery allows `project.dataset.table`).
func splitQualified(name string) ([]namePart, error) {
	if name == "" {
		return nil, fmt.Errorf("table name is empty")
	}
	var parts []namePart
	i := 0
	for {
		if i >= len(name) {
			return nil, fmt.Errorf("table name %q ends with a dot", name)
		}
		switch name[i] {
		case '"':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(name) {
					return nil, fmt.Errorf("table name %q has an unclosed double quote", name)
				}
				if name[j] == '"' {
					if j+1 < len(name) && name[j+1] == '"' {
						b.WriteByte('"')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(name[j])
				j++
			}
			parts = append(parts, namePart{b.String(), true})
			i = j + 1
		case '`':
			j := strings.IndexByte(name[i+1:], '`')
			if j < 0 {
				return nil, fmt.Errorf("table name %q has an unclosed backtick", name)
			}
			for _, p := range strings.Split(name[i+1:i+1+j], ".") {
				parts = append(parts, namePart{p, true})
			}
			i += j + 2
		default:
			j := strings.IndexByte(name[i:], '.')
			if j < 0 {
				j = len(name) - i
			}
			parts = append(parts, namePart{strings.TrimSpace(name[i : i+j]), false})
			i += j
		}
		if i == len(name) {
			break
		}
		if name[i] != '.' {
			return nil, fmt.Errorf("table name %q: expected a dot after part %d", name, len(parts))
		}
		i++
	}
	for _, p := range parts {
		if p.s == "" {
			return nil, fmt.Errorf("table name %q has an empty part", name)
		}
	}
	return parts, nil
}

var regularIdent = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*$`) })

// canonicalPart renders one part under a case rule. Parts that fold are
// rendered lower-case for readability; parts whose case matters are kept
// and double-quoted so they never collide with a folded name.
func canonicalPart(rule caseRule, p namePart, index, count int) string {
	quote := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
	switch rule {
	case ruleUpper:
		stored := p.s
		if !p.quoted {
			stored = strings.ToUpper(p.s)
		}
		if regularIdent().MatchString(stored) && stored == strings.ToUpper(stored) {
			return strings.ToLower(stored)
		}
		return quote(stored)
	case ruleLower:
		stored := p.s
		if !p.quoted {
			stored = strings.ToLower(p.s)
		}
		if regularIdent().MatchString(stored) && stored == strings.ToLower(stored) {
			return stored
		}
		return quote(stored)
	case ruleInsensitive:
		s := strings.ToLower(p.s)
		if strings.ContainsAny(s, `." `) {
			return quote(s)
		}
		return s
	case ruleBigQuery:
		if count == 3 && index == 0 {
			return strings.ToLower(p.s)
		}
		return p.s
	}
	if strings.Contains(p.s, ".") {
		return quote(p.s)
	}
	return p.s
}

// TableID is the canonical asset id of a warehouse relation named by a
// dotted, optionally quoted name (db.schema.table, "DB"."S"."T",
// `project.dataset.table`). weak is the schema.table suffix of a
// three-part name, which links it to a note that named the table without
// its database; it is "" for shorter names.
func TableID(platform, name string) (id, weak string, err error) {
	platform = NormalizePlatform(platform)
	if platform == "" {
		return "", "", fmt.Errorf("table %q: platform is required (e.g. snowflake, bigquery, duckdb, postgres)", name)
	}
	parts, err := splitQualified(strings.TrimSpace(name))
	if err != nil {
		return "", "", err
	}
	if len(parts) > 4 {
		return "", "", fmt.Errorf("table name %q has %d parts; at most database.schema.table (4 with a catalog) is valid", name, len(parts))
	}
	return tableIDFromParts(platform, parts)
}

func tableIDFromParts(platform string, parts []namePart) (id, weak string, err error) {
	rule := warehousePlatforms[platform]
	rendered := make([]string, len(parts))
	for i, p := range parts {
		rendered[i] = canonicalPart(rule, p, i, len(parts))
	}
	id = platform + "://" + strings.Join(rendered, ".")
	if len(parts) >= 3 {
		weak = platform + "://" + strings.Join(rendered[len(rendered)-2:], ".")
	}
	return id, weak, nil
}

// RelationID is TableID for a relation given as separate parts, as dbt
// gives database, schema and identifier. Empty parts are skipped; quoted
// marks parts the tool quotes (dbt's quoting config).
func RelationID(platform string, quoted bool, parts ...string) (id, weak string, err error) {
	platform = NormalizePlatform(platform)
	var ps []namePart
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			ps = append(ps, namePart{p, quoted})
		}
	}
	if len(ps) == 0 {
		return "", "", fmt.Errorf("relation on %s has no name", platform)
	}
	return tableIDFromParts(platform, ps)
}

// SplitID splits an asset id into its platform and path.
func SplitID(id string) (platform, path string, ok bool) {
	i := strings.Index(id, "://")
	if i <= 0 {
		return "", "", false
	}
	return id[:i], id[i+3:], true
}

// PlatformToken is what a platform name (the scheme of an asset id) may be,
// compiled on first use so that no agent compiles it at start-up.
var PlatformToken = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9+._-]*$`) })

// CanonicalID normalizes an asset id a person or tool typed: the platform is
// lower-cased and folded, warehouse table paths follow the platform's case
// rules, and other paths (Kafka topics, subjects, job names) keep their
// case, since those systems are case-sensitive.
func CanonicalID(id string) (string, error) {
	id = strings.TrimSpace(id)
	if err := CheckIDText("asset id", id); err != nil {
		return "", err
	}
	p, path, ok := SplitID(id)
	if !ok {
		return "", fmt.Errorf("asset id %q must look like platform://path (e.g. kafka://prod/api-usage, snowflake://usage.usage_hourly)", id)
	}
	p = NormalizePlatform(p)
	if !PlatformToken().MatchString(p) {
		return "", fmt.Errorf("asset id %q: platform %q must be lower-case letters, digits, '-', '_', '.' or '+'", id, p)
	}
	path = strings.TrimSpace(path)
	if path == "" {
		return "", fmt.Errorf("asset id %q has an empty path after %s://", id, p)
	}
	if IsWarehouse(p) {
		cid, _, err := TableID(p, path)
		if err != nil {
			return "", fmt.Errorf("asset id %q: %w", id, err)
		}
		return cid, nil
	}
	return p + "://" + path, nil
}

// weakOf returns the schema.table partial name of a canonical warehouse id,
// or "" when the id is not a three- or four-part table name.
func weakOf(id string) string {
	p, path, ok := SplitID(id)
	if !ok || !IsWarehouse(p) {
		return ""
	}
	_, weak, err := TableID(p, path)
	if err != nil {
		return ""
	}
	return weak
}

// shortName is the last part of an id's path: the name people say out loud
// (usage_hourly, fct_billable_egress, api-usage).
func shortName(id string) string {
	_, path, ok := SplitID(id)
	if !ok {
		path = id
	}
	path = strings.TrimRight(path, "/")
	if i := strings.LastIndexAny(path, "/"); i >= 0 {
		path = path[i+1:]
	}
	p, _, _ := SplitID(id)
	if p == "dbt" || IsWarehouse(p) {
		// dbt unique ids and table names are dotted; the last part is the name.
		if parts, err := splitQualified(path); err == nil && len(parts) > 0 {
			return parts[len(parts)-1].s
		}
		if i := strings.LastIndex(path, "."); i >= 0 {
			return path[i+1:]
		}
	}
	return path
}

// NamespaceAuthority splits an OpenLineage namespace into scheme and
// authority (kafka://broker:9092 -> kafka, broker:9092; bigquery -> bigquery, "").
func NamespaceAuthority(ns string) (scheme, authority string) {
	if i := strings.Index(ns, "://"); i > 0 {
		rest := ns[i+3:]
		if u, err := url.Parse(ns); err == nil && u.Host != "" {
			return strings.ToLower(ns[:i]), u.Host
		}
		return strings.ToLower(ns[:i]), strings.TrimRight(rest, "/")
	}
	if i := strings.Index(ns, ":"); i > 0 {
		return strings.ToLower(ns[:i]), ns[i+1:]
	}
	return strings.ToLower(ns), ""
}

// TopicID is the asset id of a Kafka topic on a named cluster.
func TopicID(cluster, topic string) (string, error) {
	cluster, topic = strings.TrimSpace(cluster), strings.TrimSpace(topic)
	if cluster == "" {
		return "", fmt.Errorf("topic %q: the Kafka cluster name is required (ids look like kafka://prod/%s)", topic, topic)
	}
	if topic == "" {
		return "", fmt.Errorf("topic name is empty")
	}
	return "kafka://" + cluster + "/" + topic, nil
}
