package connect

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode/utf16"
)

// Directions of a Flow.
const (
	// TopicToTable: a sink connector reads the topic and writes the table.
	TopicToTable = "topic_to_table"
	// TableToTopic: a source connector reads the table and writes the topic.
	TableToTopic = "table_to_topic"
)

// Flow is one topic-table pair a connector moves data along.
type Flow struct {
	Topic string `json:"topic" jsonschema:"Kafka topic, or a regular expression when topic_pattern is true"`
	// TopicPattern marks a Topic that is a regular expression the config
	// gives and no known topic matched.
	TopicPattern bool   `json:"topic_pattern,omitempty"`
	Table        string `json:"table,omitempty" jsonschema:"table as the connector names it (project.dataset.table, database.schema.table, schema.table); empty when the connector has no table"`
	Direction    string `json:"direction" jsonschema:"topic_to_table for sinks, table_to_topic for sources"`
}

// Kind says whether a connector is a sink or a source: from the type
// Connect reports, else from the class name.
func Kind(info Info) string {
	switch strings.ToLower(info.Type) {
	case "sink", "source":
		return strings.ToLower(info.Type)
	}
	class := info.Config["connector.class"]
	switch {
	case strings.Contains(class, "Sink"):
		return "sink"
	case strings.Contains(class, "Source") || strings.HasPrefix(class, "io.debezium.connector."):
		return "source"
	case info.Config["topics"] != "" || info.Config["topics.regex"] != "":
		return "sink"
	}
	return "source"
}

// Flows derives the topics and tables a connector moves from its config.
// knownTopics, when given, expands a sink's topics.regex into the topics it
// matches. It reads the keys of the common connectors: for sinks topics or
// topics.regex with the BigQuery sink (project, defaultDataset or datasets,
// topic2TableMap, sanitizeTopics), the Snowflake sink
// (snowflake.database.name, snowflake.schema.name, snowflake.topic2table.map)
// and JDBC-style sinks (table.name.format with ${topic}); for sources
// Debezium (topic.prefix or database.server.name with table.include.list or
// table.whitelist), the JDBC source (topic.prefix with table.whitelist or
// table.include.list, or a query) and single-topic sources (kafka.topic,
// topic).
func Flows(info Info, knownTopics []string) []Flow {
	cfg := info.Config
	var out []Flow
	if Kind(info) == "sink" {
		for _, t := range sinkTopics(cfg, knownTopics) {
			if t.pattern {
				out = append(out, Flow{Topic: t.name, TopicPattern: true, Direction: TopicToTable})
				continue
			}
			for _, table := range sinkTables(cfg, t.name) {
				out = append(out, Flow{Topic: t.name, Table: table, Direction: TopicToTable})
			}
		}
	} else {
		out = sourceFlows(cfg)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Table < out[j].Table
	})
	return dedupe(out)
}

func dedupe(fs []Flow) []Flow {
	var out []Flow
	for i, f := range fs {
		if i > 0 && f == fs[i-1] {
			continue
		}
		out = append(out, f)
	}
	return out
}

// list splits a Connect LIST value: comma separated, trimmed.
func list(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

type sinkTopic struct {
	name    string
	pattern bool
}

func sinkTopics(cfg map[string]string, known []string) []sinkTopic {
	var out []sinkTopic
	for _, t := range list(cfg["topics"]) {
		out = append(out, sinkTopic{name: t})
	}
	if re := strings.TrimSpace(cfg["topics.regex"]); re != "" {
		// Connect matches the whole topic name (Java's Pattern.matches).
		rx, err := regexp.Compile("^(?:" + re + ")$")
		matched := false
		if err == nil {
			for _, t := range known {
				if rx.MatchString(t) {
					out = append(out, sinkTopic{name: t})
					matched = true
				}
			}
		}
		if !matched {
			out = append(out, sinkTopic{name: re, pattern: true})
		}
	}
	return out
}

// sinkTables names the table(s) a sink writes a topic to; nil when the
// connector is not one whose tables can be read from its config.
func sinkTables(cfg map[string]string, topic string) []string {
	class := cfg["connector.class"]
	switch {
	case strings.Contains(class, "BigQuerySinkConnector"):
		return []string{bigQueryTable(cfg, topic)}
	case strings.Contains(strings.ToLower(class), "snowflake"):
		return []string{snowflakeTable(cfg, topic)}
	case cfg["iceberg.tables"] != "":
		return list(cfg["iceberg.tables"])
	}
	for _, key := range []string{"table.name.format", "collection.name.format"} {
		if f := cfg[key]; f != "" {
			return []string{strings.ReplaceAll(f, "${topic}", topic)}
		}
	}
	if strings.Contains(class, "JdbcSinkConnector") {
		return []string{topic} // table.name.format defaults to ${topic}
	}
	return []string{""}
}

// pairs parses "k1:v1,k2:v2" maps such as topic2TableMap.
func pairs(v string) map[string]string {
	m := map[string]string{}
	for _, p := range list(v) {
		k, val, ok := strings.Cut(p, ":")
		if ok && strings.TrimSpace(k) != "" {
			m[strings.TrimSpace(k)] = strings.TrimSpace(val)
		}
	}
	return m
}

// The patterns here are compiled on first use, not at package init: every
// dw-connectors start links this package and few calls need them.
var bigQueryInvalid = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-zA-Z0-9_]`) })

func bigQueryTable(cfg map[string]string, topic string) string {
	table, mapped := pairs(cfg["topic2TableMap"])[topic]
	if !mapped {
		table = topic
		if strings.EqualFold(cfg["sanitizeTopics"], "true") {
			table = bigQueryInvalid().ReplaceAllString(table, "_")
			if table != "" && table[0] >= '0' && table[0] <= '9' {
				table = "_" + table
			}
		}
	}
	dataset := cfg["defaultDataset"]
	if dataset == "" {
		// The older connector maps topics to datasets with
		// "regex=dataset" entries, first match wins.
		for _, e := range list(cfg["datasets"]) {
			re, ds, ok := strings.Cut(e, "=")
			if !ok {
				continue
			}
			if rx, err := regexp.Compile("^(?:" + re + ")$"); err == nil && rx.MatchString(topic) {
				dataset = ds
				break
			}
		}
	}
	return join(cfg["project"], dataset, table)
}

var (
	snowflakeIdent     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[_a-zA-Z][_$a-zA-Z0-9]+$`) })
	snowflakeFirstChar = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[_a-zA-Z]$`) })
	snowflakeChar      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[_$a-zA-Z0-9]$`) })
)

const snowflakeRegexPrefix = "REGEX_MATCHER>"

func snowflakeTable(cfg map[string]string, topic string) string {
	m := pairs(cfg["snowflake.topic2table.map"])
	table := snowflakeName(topic, m)
	if strings.Contains(table, ".") {
		return table // the map may give a qualified name
	}
	return join(cfg["snowflake.database.name"], cfg["snowflake.schema.name"], table)
}

// snowflakeName follows the Snowflake connector's own rule for naming a
// table after a topic: the mapped name, else the topic when it is a valid
// identifier, else the first matching REGEX_MATCHER> rule, else the topic
// with invalid characters replaced by "_" (and "_" put in front when it
// cannot start a name), followed by "_" and the absolute value of Java's
// String.hashCode of the topic.
func snowflakeName(topic string, m map[string]string) string {
	if topic == "" {
		return ""
	}
	if t, ok := m[topic]; ok {
		return t
	}
	if snowflakeIdent().MatchString(topic) {
		return topic
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !strings.HasPrefix(k, snowflakeRegexPrefix) {
			continue
		}
		rx, err := regexp.Compile(strings.TrimPrefix(k, snowflakeRegexPrefix))
		if err != nil {
			continue
		}
		if name := rx.ReplaceAllString(topic, m[k]); snowflakeIdent().MatchString(name) {
			return name
		}
	}
	var b strings.Builder
	rs := []rune(topic)
	i := 0
	// A valid first character is kept; an invalid one gets "_" put in
	// front and is then judged again as an ordinary character.
	if snowflakeFirstChar().MatchString(string(rs[0])) {
		b.WriteRune(rs[0])
		i = 1
	} else {
		b.WriteByte('_')
	}
	for _, r := range rs[i:] {
		if snowflakeChar().MatchString(string(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	h := javaHashCode(topic)
	if h < 0 && h != math.MinInt32 {
		h = -h // Math.abs leaves MIN_VALUE negative, and so do we
	}
	fmt.Fprintf(&b, "_%d", h)
	return b.String()
}

// javaHashCode is java.lang.String.hashCode over UTF-16 code units.
func javaHashCode(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

func join(parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, ".")
}

var regexMeta = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[\\*+?()\[\]{}|^$]`) })

func sourceFlows(cfg map[string]string) []Flow {
	class := cfg["connector.class"]
	var out []Flow
	switch {
	case strings.HasPrefix(class, "io.debezium.connector."):
		prefix := first(cfg, "topic.prefix", "database.server.name")
		tables := list(first(cfg, "table.include.list", "table.whitelist", "collection.include.list", "collection.whitelist"))
		if len(tables) == 0 {
			return []Flow{{Topic: regexp.QuoteMeta(prefix) + `\..+`, TopicPattern: true, Direction: TableToTopic}}
		}
		for _, t := range tables {
			f := Flow{Topic: join(prefix, t), Table: t, Direction: TableToTopic}
			if regexMeta().MatchString(t) {
				// Include lists are regular expressions over
				// qualified names; a literal dot matches itself.
				f.Topic, f.TopicPattern = regexp.QuoteMeta(prefix)+`\.`+t, true
			}
			out = append(out, f)
		}
	case strings.Contains(class, "JdbcSourceConnector"):
		prefix := cfg["topic.prefix"]
		if cfg["query"] != "" {
			return []Flow{{Topic: prefix, Direction: TableToTopic}}
		}
		for _, t := range list(first(cfg, "table.whitelist", "table.include.list")) {
			out = append(out, Flow{Topic: prefix + t, Table: t, Direction: TableToTopic})
		}
	default:
		for _, key := range []string{"kafka.topic", "topic", "topics"} {
			for _, t := range list(cfg[key]) {
				out = append(out, Flow{Topic: t, Direction: TableToTopic})
			}
		}
	}
	return out
}

func first(cfg map[string]string, keys ...string) string {
	for _, k := range keys {
		if v := strings.TrimSpace(cfg[k]); v != "" {
			return v
		}
	}
	return ""
}
