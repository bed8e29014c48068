package connect

import (
	"fmt"
	"strings"
	"testing"
)

func flowsString(fs []Flow) string {
	var out []string
	for _, f := range fs {
		s := fmt.Sprintf("%s>%s", f.Topic, f.Table)
		if f.Direction == TableToTopic {
			s = fmt.Sprintf("%s>%s", f.Table, f.Topic)
		}
		if f.TopicPattern {
			s += "(pattern)"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestFlows(t *testing.T) {
	known := []string{"member-balances", "member-tiers", "orders", "usage-hourly"}
	cases := []struct {
		name string
		typ  string
		cfg  map[string]string
		want string
	}{
		{"bigquery sink with a topic map", "sink", map[string]string{
			"connector.class": "com.wepay.kafka.connect.bigquery.BigQuerySinkConnector",
			"topics":          "member-balances, orders", "project": "acme-prod", "defaultDataset": "loyalty",
			"topic2TableMap": "member-balances:member_balances",
		}, "member-balances>acme-prod.loyalty.member_balances orders>acme-prod.loyalty.orders"},
		{"bigquery sink sanitizing topic names", "sink", map[string]string{
			"connector.class": "com.wepay.kafka.connect.bigquery.BigQuerySinkConnector",
			"topics":          "usage-hourly,9lives", "project": "p", "defaultDataset": "d", "sanitizeTopics": "true",
		}, "9lives>p.d._9lives usage-hourly>p.d.usage_hourly"},
		{"bigquery sink with the older datasets map", "sink", map[string]string{
			"connector.class": "com.wepay.kafka.connect.bigquery.BigQuerySinkConnector",
			"topics":          "orders,member-tiers", "project": "p", "datasets": "member-.*=loyalty,.*=sales",
		}, "member-tiers>p.loyalty.member-tiers orders>p.sales.orders"},
		{"snowflake sink: map, valid name and generated names", "sink", map[string]string{
			"connector.class":           "com.snowflake.kafka.connector.SnowflakeSinkConnector",
			"topics":                    "usage-hourly,member-balances,orders,1abc,a",
			"snowflake.database.name":   "USAGE",
			"snowflake.schema.name":     "PUBLIC",
			"snowflake.topic2table.map": "usage-hourly:usage_hourly",
		}, "1abc>USAGE.PUBLIC._1abc_1556113 a>USAGE.PUBLIC.a_97 member-balances>USAGE.PUBLIC.member_balances_49525482 orders>USAGE.PUBLIC.orders usage-hourly>USAGE.PUBLIC.usage_hourly"},
		{"snowflake sink with a regex rule and a qualified map entry", "sink", map[string]string{
			"connector.class":           "com.snowflake.kafka.connector.SnowflakeSinkConnector",
			"topics":                    "usage.hourly,billing",
			"snowflake.database.name":   "DB",
			"snowflake.schema.name":     "S",
			"snowflake.topic2table.map": "REGEX_MATCHER>^usage\\.(.*)$:usage_$1,billing:FIN.CORE.BILLING",
		}, "billing>FIN.CORE.BILLING usage.hourly>DB.S.usage_hourly"},
		{"snowflake topic with no rule gets the hashed name", "sink", map[string]string{
			"connector.class": "com.snowflake.kafka.connector.SnowflakeSinkConnector",
			"topics":          "usage.hourly", "snowflake.database.name": "DB", "snowflake.schema.name": "S",
		}, "usage.hourly>DB.S.usage_hourly_750134434"},
		{"jdbc sink with table.name.format", "sink", map[string]string{
			"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
			"topics":          "orders", "table.name.format": "kafka_${topic}",
		}, "orders>kafka_orders"},
		{"jdbc sink default format is the topic", "sink", map[string]string{
			"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": "orders",
		}, "orders>orders"},
		{"topics.regex expanded over known topics", "sink", map[string]string{
			"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics.regex": "member-.*",
		}, "member-balances>member-balances member-tiers>member-tiers"},
		{"topics.regex matches whole names only", "sink", map[string]string{
			"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics.regex": "member",
		}, "member>(pattern)"},
		{"sink without a table (S3)", "sink", map[string]string{
			"connector.class": "io.confluent.connect.s3.S3SinkConnector", "topics": "orders",
		}, "orders>"},
		{"iceberg sink fans a topic into its tables", "sink", map[string]string{
			"connector.class": "io.tabular.iceberg.connect.IcebergSinkConnector", "topics": "orders",
			"iceberg.tables": "db.orders, db.orders_audit",
		}, "orders>db.orders orders>db.orders_audit"},
		{"debezium postgres source", "source", map[string]string{
			"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
			"topic.prefix":    "pg", "table.include.list": "public.orders,public.members",
		}, "public.members>pg.public.members public.orders>pg.public.orders"},
		{"debezium 1.x keys and a regex entry", "source", map[string]string{
			"connector.class":      "io.debezium.connector.mysql.MySqlConnector",
			"database.server.name": "shop", "table.whitelist": "inventory.customers,inventory.order_.*",
		}, "inventory.customers>shop.inventory.customers inventory.order_.*>shop\\.inventory.order_.*(pattern)"},
		{"debezium with no include list captures every table", "", map[string]string{
			"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "pg",
		}, ">pg\\..+(pattern)"},
		{"jdbc source", "source", map[string]string{
			"connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
			"topic.prefix":    "mysql-", "table.whitelist": "users, orders",
		}, "orders>mysql-orders users>mysql-users"},
		{"jdbc source in query mode", "source", map[string]string{
			"connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector", "topic.prefix": "daily-totals",
			"query": "SELECT 1",
		}, ">daily-totals"},
		{"single-topic source", "source", map[string]string{
			"connector.class": "io.confluent.connect.activemq.ActiveMQSourceConnector", "kafka.topic": "jms-events",
		}, ">jms-events"},
		{"type guessed from the class", "", map[string]string{
			"connector.class": "com.wepay.kafka.connect.bigquery.BigQuerySinkConnector", "topics": "orders", "defaultDataset": "d",
		}, "orders>d.orders"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := flowsString(Flows(Info{Name: "c", Type: c.typ, Config: c.cfg}, known))
			if got != c.want {
				t.Fatalf("flows\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestJavaHashCode(t *testing.T) {
	// "hello" is Java's well-known value; the others were computed apart
	// from this code by the same rule over UTF-16 code units, the last one
	// crossing a surrogate pair.
	for s, want := range map[string]int32{"": 0, "a": 97, "hello": 99162322, "usage.hourly": -750134434, "Ω≈ç": 1172744, "😀x": 54959989} {
		if got := javaHashCode(s); got != want {
			t.Errorf("hashCode(%q) = %d, want %d", s, got, want)
		}
	}
}
