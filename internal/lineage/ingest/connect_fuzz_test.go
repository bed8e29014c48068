package ingest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/textrule"
)

// FuzzConnectors: a connector spec comes from a Connect cluster or a
// caller. Recording it either refuses, writing nothing, with one short
// printable line that shows no value unless it is short and identifier-
// like; or records exactly the connector between its topic and its table,
// in the direction it moves data.
func FuzzConnectors(f *testing.F) {
	for _, s := range [][7]string{
		{"member-balances-bq", "com.wepay.kafka.connect.bigquery.BigQuerySinkConnector", "", "", "member-balances", "acme-loyalty.loyalty.member_balances", ""},
		{"pg-orders", "io.debezium.connector.postgresql.PostgresConnector", "source", "", "shop.public.orders", "shop.public.Orders", ""},
		{"x", "com.acme.Mirror", "", "", "t", "a.b", "postgres"},
		{"orders sink hunter2", "com.acme.Mirror hunter2", "", "other", "t", "a . .hunter2 password", "postgres"},
		{"x", "S3SinkConnector", "SINK", "c2", "logs", "bucket/path/to", ""},
		{"x", "BigQuerySinkConnector", "", "", "t", "sales..orders", ""},
		{"x\n", "BigQuerySinkConnector", "", "", "t\x00", "a.b", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6])
	}
	db := storetest.SQLite(f)
	g := lineage.New(db, clock.NewFake(lineagetest.StoryTime))
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, name, class, direction, cluster, topic, table, platform string) {
		ctx := context.Background()
		// Each input records its own connector, so its edges are its own.
		name = fmt.Sprintf("f%d-%s", n.Add(1), name)
		spec := ConnectorSpec{Name: name, Class: class, Direction: direction, Cluster: cluster, Topic: topic, Table: table, Platform: platform}
		before := lineagetest.Count(t, db, "lineage_assets")
		_, err := Connectors(ctx, g, []ConnectorSpec{spec}, ConnectorOptions{Cluster: "prod"})
		if err != nil {
			msg := err.Error()
			if _, _, bad := textrule.First(msg, false); bad || msg == "" || len(msg) > 1000 {
				t.Fatalf("error is not one short printable line (%d bytes): %q", len(msg), msg)
			}
			// A long value never appears whole; one that is not
			// identifier-like is never quoted whole.
			for _, v := range []string{name, class, direction, cluster, topic, table, platform} {
				if len(v) > safeNameMax && strings.Contains(msg, v) || safeNameRE().FindString(v) != v && strings.Contains(msg, strconv.Quote(v)) {
					t.Fatalf("error shows the value %q: %s", v, msg)
				}
			}
			if after := lineagetest.Count(t, db, "lineage_assets"); after != before {
				t.Fatalf("a refused connector wrote %d assets", after-before)
			}
			return
		}
		if cluster == "" {
			cluster = "prod"
		}
		topicID, err := lineage.TopicID(cluster, topic)
		if err != nil {
			t.Fatalf("recorded, but the topic id is refused: %v", err)
		}
		res, err := g.GetLineage(ctx, lineage.LineageParams{Asset: "connect://" + strings.TrimSpace(name)})
		if err != nil {
			t.Fatalf("recorded connector not found: %v", err)
		}
		if len(res.Upstream) != 1 || len(res.Downstream) != 1 {
			t.Fatalf("connector has %d upstream and %d downstream, want one each", len(res.Upstream), len(res.Downstream))
		}
		up, down := res.Upstream[0].Asset, res.Downstream[0].Asset
		sink := strings.EqualFold(strings.TrimSpace(direction), "sink") ||
			strings.TrimSpace(direction) == "" && strings.Contains(strings.ToLower(class), "sink")
		topicAsset, tableAsset := up, down
		if !sink {
			topicAsset, tableAsset = down, up
		}
		if topicAsset.ID != topicID || topicAsset.Kind != lineage.KindTopic {
			t.Fatalf("sink=%v: topic side is %s (%s), want %s", sink, topicAsset.ID, topicAsset.Kind, topicID)
		}
		if tableAsset.Kind != lineage.KindTable && tableAsset.Kind != lineage.KindDataset {
			t.Fatalf("sink=%v: table side is %s (%s)", sink, tableAsset.ID, tableAsset.Kind)
		}
	})
}
