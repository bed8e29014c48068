package connect

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzConfigValues: a Connect LIST value and a "k:v,k:v" map read back
// what they would write: list gives trimmed, non-empty items without
// commas, and joining them reads the same list again; pairs gives trimmed
// keys without ':' or ',' and writing the map out reads the same map.
func FuzzConfigValues(f *testing.F) {
	for _, s := range []string{"a, b ,,c", " member-balances:member_balances , orders:ORD", "a:b:c,:x,y:", "k:v,k:w", "\t\n", "REGEX_MATCHER>^usage\\.(.*)$:usage_$1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		items := list(v)
		for _, it := range items {
			if it == "" || it != strings.TrimSpace(it) || strings.Contains(it, ",") {
				t.Fatalf("list(%q) has item %q", v, it)
			}
		}
		if again := list(strings.Join(items, ",")); !slices.Equal(again, items) {
			t.Fatalf("list(%q) = %q, read back as %q", v, items, again)
		}
		m := pairs(v)
		var written []string
		for k, val := range m {
			if k == "" || k != strings.TrimSpace(k) || strings.ContainsAny(k, ":,") || val != strings.TrimSpace(val) || strings.Contains(val, ",") {
				t.Fatalf("pairs(%q) has %q:%q", v, k, val)
			}
			written = append(written, k+":"+val)
		}
		if again := pairs(strings.Join(written, ",")); !maps.Equal(again, m) {
			t.Fatalf("pairs(%q) = %v, read back as %v", v, m, again)
		}
	})
}

// FuzzSnowflakeName: the table the Snowflake sink names after a topic is
// the topic itself when that is a valid name, else (without a map entry or
// a rule) the topic with every invalid character replaced, a "_" in front
// when the first cannot start a name, then "_" and |String.hashCode|
// computed over UTF-16 as Java does.
func FuzzSnowflakeName(f *testing.F) {
	for _, s := range []string{"orders", "usage-hourly", "1abc", "a", "member.balances", "é", "😀x", "\xff", "$x"} {
		f.Add(s)
	}
	valid := regexp.MustCompile(`^[_a-zA-Z][_$a-zA-Z0-9]+$`)
	f.Fuzz(func(t *testing.T, topic string) {
		got := snowflakeName(topic, nil)
		switch {
		case topic == "":
			if got != "" {
				t.Fatalf("empty topic named %q", got)
			}
			return
		case valid.MatchString(topic):
			if got != topic {
				t.Fatalf("valid name %q became %q", topic, got)
			}
			return
		}
		rs := []rune(topic)
		var want strings.Builder
		if c := rs[0]; !(c == '_' || c < utf8.RuneSelf && (c|0x20 >= 'a' && c|0x20 <= 'z')) {
			want.WriteByte('_')
		}
		for _, r := range rs {
			if r == '_' || r == '$' || r < utf8.RuneSelf && (r|0x20 >= 'a' && r|0x20 <= 'z' || r >= '0' && r <= '9') {
				want.WriteRune(r)
			} else {
				want.WriteByte('_')
			}
		}
		// Java hashes UTF-16 code units: a rune above U+FFFF is two.
		var h int32
		for _, r := range rs {
			if r >= 0x10000 {
				r -= 0x10000
				h = 31*h + int32(0xD800+(r>>10))
				h = 31*h + int32(0xDC00+(r&0x3FF))
				continue
			}
			h = 31*h + int32(r)
		}
		if h < 0 && h != -1<<31 {
			h = -h
		}
		if w := fmt.Sprintf("%s_%d", want.String(), h); got != w {
			t.Fatalf("snowflakeName(%q) = %q, want %q", topic, got, w)
		}
	})
}

// FuzzFlows: whatever a connector's config holds, reading its flows ends
// quickly and gives sorted, distinct flows in a known direction; a sink's
// topics are its own (listed, or known topics its regex matches whole, or
// the regex itself marked as one), and a table.name.format is the format
// with ${topic} replaced by the topic.
func FuzzFlows(f *testing.F) {
	for _, c := range []string{
		"connector.class=com.wepay.kafka.connect.bigquery.BigQuerySinkConnector\ntopics=member-balances, orders\nproject=acme-prod\ndefaultDataset=loyalty\ntopic2TableMap=member-balances:member_balances",
		"connector.class=com.wepay.kafka.connect.bigquery.BigQuerySinkConnector\ntopics=usage-hourly,9lives\nproject=p\ndefaultDataset=d\nsanitizeTopics=true",
		"connector.class=com.wepay.kafka.connect.bigquery.BigQuerySinkConnector\ntopics=orders\nproject=p\ndatasets=member-.*=loyalty,(=x,.*=sales",
		"connector.class=com.snowflake.kafka.connector.SnowflakeSinkConnector\ntopics=usage.hourly,billing,1abc\nsnowflake.database.name=DB\nsnowflake.topic2table.map=REGEX_MATCHER>^usage\\.(.*)$:usage_$1,billing:FIN.CORE.BILLING",
		"connector.class=io.confluent.connect.jdbc.JdbcSinkConnector\ntopics.regex=member-.*\ntable.name.format=kafka_${topic}",
		"connector.class=io.confluent.connect.jdbc.JdbcSinkConnector\ntopics.regex=(unclosed",
		"connector.class=io.debezium.connector.postgresql.PostgresConnector\ntopic.prefix=pg\ntable.include.list=public.orders,public.member_.*",
		"connector.class=io.confluent.connect.jdbc.JdbcSourceConnector\ntopic.prefix=jdbc-\ntable.whitelist=orders, users",
		"connector.class=io.confluent.connect.jdbc.JdbcSourceConnector\ntopic.prefix=q\nquery=SELECT 1",
		"connector.class=org.example.FileStreamSource\ntopic=files",
		"connector.class=io.tabular.iceberg.connect.IcebergSinkConnector\ntopics=t\niceberg.tables=db.a, db.b",
	} {
		f.Add(c, "member-balances,member-tiers,orders", "")
		f.Add(c, "", "sink")
	}
	f.Fuzz(func(t *testing.T, config, known, typ string) {
		defer time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("flows took over 5s: %q", config)) }).Stop()
		cfg := map[string]string{}
		for _, line := range strings.Split(config, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				cfg[k] = v
			}
		}
		knownTopics := strings.Split(known, ",")
		info := Info{Name: "c", Type: typ, Config: cfg}
		flows := Flows(info, knownTopics)
		for i := 1; i < len(flows); i++ {
			prev, fl := flows[i-1], flows[i]
			if c := cmp.Or(strings.Compare(prev.Topic, fl.Topic), strings.Compare(prev.Table, fl.Table)); c > 0 || prev == fl {
				t.Fatalf("flows out of order or repeated: %+v then %+v", prev, fl)
			}
		}
		if Kind(info) != "sink" {
			for _, fl := range flows {
				if fl.Direction != TableToTopic {
					t.Fatalf("source flow %+v", fl)
				}
			}
			return
		}
		mine := map[string]bool{}
		for _, tp := range list(cfg["topics"]) {
			mine[tp] = true
		}
		re := strings.TrimSpace(cfg["topics.regex"])
		rx, rxErr := regexp.Compile("^(?:" + re + ")$")
		format := cfg["table.name.format"]
		plainFormat := format != "" && !strings.Contains(cfg["connector.class"], "BigQuerySinkConnector") &&
			!strings.Contains(strings.ToLower(cfg["connector.class"]), "snowflake") && cfg["iceberg.tables"] == ""
		for _, fl := range flows {
			switch {
			case fl.Direction != TopicToTable:
				t.Fatalf("sink flow %+v", fl)
			case fl.TopicPattern:
				if fl.Topic != re || fl.Table != "" {
					t.Fatalf("pattern flow %+v, want the regex %q", fl, re)
				}
				continue
			case !mine[fl.Topic] && !(re != "" && rxErr == nil && rx.MatchString(fl.Topic) && slices.Contains(knownTopics, fl.Topic)):
				t.Fatalf("flow %+v: topic is neither listed nor a known topic the regex matches", fl)
			}
			if plainFormat && fl.Table != strings.ReplaceAll(format, "${topic}", fl.Topic) {
				t.Fatalf("flow %+v: table.name.format %q gives %q", fl, format, strings.ReplaceAll(format, "${topic}", fl.Topic))
			}
			if strings.Contains(cfg["connector.class"], "BigQuerySinkConnector") && strings.EqualFold(cfg["sanitizeTopics"], "true") {
				if _, mapped := pairs(cfg["topic2TableMap"])[fl.Topic]; !mapped {
					parts := strings.Split(fl.Table, ".")
					if last := parts[len(parts)-1]; !regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)?$`).MatchString(last) {
						t.Fatalf("flow %+v: sanitized table name %q", fl, last)
					}
				}
			}
		}
	})
}
