package ingest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/lineage"

	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestConnectors(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		_, err := Connectors(ctx, g, []ConnectorSpec{
			{Name: "member-balances-bq", Class: "com.wepay.kafka.connect.bigquery.BigQuerySinkConnector", Topic: "member-balances", Table: "acme-loyalty.loyalty.member_balances", Owner: "loyalty"},
			{Name: "pg-orders", Class: "io.debezium.connector.postgresql.PostgresConnector", Direction: "source", Topic: "shop.public.orders", Table: "shop.public.Orders"},
		}, ConnectorOptions{Cluster: "prod"})
		if err != nil {
			t.Fatal(err)
		}
		sink := mustLineage(t, g, "connect://member-balances-bq")
		if sink.Asset.Kind != lineage.KindConnector || sink.Asset.Owner != "loyalty" {
			t.Errorf("sink %+v", sink.Asset)
		}
		if !slices.Equal(neighborIDs(sink.Upstream), []string{"kafka://prod/member-balances"}) ||
			!slices.Equal(neighborIDs(sink.Downstream), []string{"bigquery://acme-loyalty.loyalty.member_balances"}) {
			t.Errorf("sink edges %v -> %v", neighborIDs(sink.Upstream), neighborIDs(sink.Downstream))
		}
		src := mustLineage(t, g, "connect://pg-orders")
		if !slices.Equal(neighborIDs(src.Upstream), []string{"postgres://shop.public.orders"}) ||
			!slices.Equal(neighborIDs(src.Downstream), []string{"kafka://prod/shop.public.orders"}) {
			t.Errorf("source edges %v -> %v", neighborIDs(src.Upstream), neighborIDs(src.Downstream))
		}
		before := lineagetest.Count(t, db, "lineage_assets")
		for _, c := range []struct {
			spec ConnectorSpec
			want string
		}{
			{ConnectorSpec{Name: "x", Class: "com.acme.Mirror", Topic: "t", Table: "a.b", Platform: "postgres"}, "direction"},
			{ConnectorSpec{Name: "x", Class: "io.confluent.connect.jdbc.JdbcSinkConnector", Topic: "t", Table: "a.b"}, "set platform"},
			{ConnectorSpec{Name: "", Class: "BigQuerySinkConnector", Topic: "t", Table: "a.b"}, "name is empty"},
			{ConnectorSpec{Name: "x", Class: "BigQuerySinkConnector", Topic: "t"}, "table is empty"},
			{ConnectorSpec{Name: "x", Class: "BigQuerySinkConnector", Topic: "t", Table: "a..b"}, "empty part"},
		} {
			if _, err := Connectors(ctx, g, []ConnectorSpec{c.spec}, ConnectorOptions{Cluster: "prod"}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
			}
		}
		if _, err := Connectors(ctx, g, []ConnectorSpec{{Name: "x", Class: "BigQuerySinkConnector", Topic: "t", Table: "a.b"}}, ConnectorOptions{}); err == nil || !strings.Contains(err.Error(), "cluster") {
			t.Errorf("missing cluster: %v", err)
		}
		if lineagetest.Count(t, db, "lineage_assets") != before {
			t.Error("rejected connectors wrote assets")
		}
	})
}

// A connector's config comes from a Connect cluster: its errors show names
// only while short and identifier-like, never whole values.
func TestConnectorErrorsDoNotQuoteTheConfig(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g, _ := newGraph(t, db)
		for _, c := range []struct {
			spec ConnectorSpec
			want string
		}{
			{ConnectorSpec{Name: "orders sink hunter2", Class: "com.acme.Mirror hunter2", Topic: "t", Table: "a.b", Platform: "postgres"},
				`connectors[0] ("orders"… (a name of 19 characters)): direction (empty): use sink (topic -> table) or source (table -> topic); the class name "com.acme.Mirror"… (a name of 23 characters) doesn't say`},
			{ConnectorSpec{Name: "x", Class: "JdbcSinkConnector", Topic: "t", Table: "a.b hunter2"},
				`connectors[0] ("x"): cannot tell the table's platform from class "JdbcSinkConnector"; set platform (e.g. bigquery, snowflake, postgres)`},
			{ConnectorSpec{Name: "x", Class: "BigQuerySinkConnector", Topic: "t", Table: "sales..orders"},
				`connectors[0] ("x").table: table name "sales..orders" has an empty part`},
			{ConnectorSpec{Name: "x", Class: "BigQuerySinkConnector", Topic: "t", Table: "a . .hunter2 password"},
				`connectors[0] ("x").table: table name (a name of 21 characters) has an empty part`},
		} {
			_, err := Connectors(context.Background(), g, []ConnectorSpec{c.spec}, ConnectorOptions{Cluster: "prod"})
			if err == nil || err.Error() != c.want {
				t.Errorf("%+v:\n got %v\nwant %s", c.spec, err, c.want)
			}
		}
		if n := lineagetest.Count(t, db, "lineage_assets"); n != 0 {
			t.Errorf("refused connectors wrote %d assets", n)
		}
	})
}
