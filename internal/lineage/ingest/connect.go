package ingest

import (
	"context"
	"fmt"
	"github.com/dataworkers/dw/internal/lineage"
	"strings"
)

// ConnectorSpec is one topic <-> table hop of a Kafka Connect connector, as
// read from its config. A connector with several topics is given once per
// topic.
type ConnectorSpec struct {
	Name      string   `json:"name" jsonschema:"connector name"`
	Class     string   `json:"class" jsonschema:"connector.class, e.g. com.wepay.kafka.connect.bigquery.BigQuerySinkConnector"`
	Direction string   `json:"direction,omitempty" jsonschema:"sink (topic -> table) or source (table -> topic); taken from the class name when empty"`
	Cluster   string   `json:"cluster,omitempty" jsonschema:"Kafka cluster name used in topic ids; defaults to the import's cluster"`
	Topic     string   `json:"topic" jsonschema:"topic the connector reads (sink) or writes (source)"`
	Table     string   `json:"table" jsonschema:"table it writes (sink) or reads (source), qualified as the platform names it, e.g. loyalty.member_balances"`
	Platform  string   `json:"platform,omitempty" jsonschema:"platform of the table (bigquery, snowflake, postgres, ...); taken from the class name when empty"`
	Owner     string   `json:"owner,omitempty" jsonschema:"connector owner"`
	Domain    string   `json:"domain,omitempty" jsonschema:"domain"`
	Tags      []string `json:"tags,omitempty" jsonschema:"tags for the connector"`
}

// ConnectorOptions holds defaults for a connector import.
type ConnectorOptions struct {
	Cluster string `json:"cluster,omitempty" jsonschema:"Kafka cluster the Connect workers attach to, used in topic ids (kafka://<cluster>/<topic>)"`
}

// classPlatforms maps words in connector class names to table platforms.
var classPlatforms = []struct{ word, platform string }{
	{"bigquery", "bigquery"}, {"snowflake", "snowflake"}, {"redshift", "redshift"}, {"postgres", "postgres"},
	{"duckdb", "duckdb"}, {"databricks", "databricks"}, {"deltalake", "databricks"}, {"mysql", "mysql"},
	{"sqlserver", "sqlserver"}, {"s3", "s3"}, {"gcs", "gs"}, {"elasticsearch", "elasticsearch"},
	{"mongodb", "mongodb"}, {"clickhouse", "clickhouse"}, {"iceberg", "iceberg"},
}

func connectorPlatform(s ConnectorSpec) (string, error) {
	if s.Platform != "" {
		return lineage.NormalizePlatform(s.Platform), nil
	}
	c := strings.ToLower(s.Class)
	for _, cp := range classPlatforms {
		if strings.Contains(c, cp.word) {
			return cp.platform, nil
		}
	}
	return "", fmt.Errorf("cannot tell the table's platform from class %s; set platform (e.g. bigquery, snowflake, postgres)", safeName(s.Class))
}

func connectorDirection(s ConnectorSpec) (string, error) {
	d := strings.ToLower(strings.TrimSpace(s.Direction))
	if d == "" {
		c := strings.ToLower(s.Class)
		switch {
		case strings.Contains(c, "sink"):
			d = "sink"
		case strings.Contains(c, "source"):
			d = "source"
		}
	}
	if d != "sink" && d != "source" {
		return "", fmt.Errorf("direction %s: use sink (topic -> table) or source (table -> topic); the class name %s doesn't say", safeName(s.Direction), safeName(s.Class))
	}
	return d, nil
}

// Connectors records Kafka Connect connectors as edges between topics
// and tables through the connector: a sink as topic -> connector -> table,
// a source as table -> connector -> topic. Every spec is checked before
// anything is written.
func Connectors(ctx context.Context, g *lineage.Graph, specs []ConnectorSpec, opts ConnectorOptions) (*lineage.ImportStats, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("no connectors given")
	}
	if err := lineage.CheckIDText("cluster", strings.TrimSpace(opts.Cluster)); err != nil {
		return nil, err
	}
	type plan struct {
		conn, topic, table *lineage.AssetInput
		sink               bool
	}
	var plans []plan
	for i, s := range specs {
		where := fmt.Sprintf("connectors[%d]", i)
		if strings.TrimSpace(s.Name) == "" {
			return nil, fmt.Errorf("%s.name is empty", where)
		}
		// Name, cluster, topic and table become asset ids: the id text rule
		// applies, naming the field, never the value.
		for _, f := range []struct{ name, s string }{{"name", s.Name}, {"cluster", s.Cluster}, {"topic", s.Topic}, {"table", s.Table}} {
			if err := lineage.CheckIDText("", strings.TrimSpace(f.s)); err != nil {
				return nil, fmt.Errorf("%s.%s %s", where, f.name, err.(*lineage.IDTextError).Reason())
			}
		}
		// A connector's config is read from a Connect cluster or given by
		// the caller: its values appear in errors only as safeName shows them.
		where += " (" + safeName(s.Name) + ")"
		dir, err := connectorDirection(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		platform, err := connectorPlatform(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		cluster := s.Cluster
		if cluster == "" {
			cluster = opts.Cluster
		}
		switch {
		case strings.TrimSpace(cluster) == "":
			return nil, fmt.Errorf("%s: the Kafka cluster name is required (topic ids look like kafka://<cluster>/<topic>); set cluster", where)
		case strings.TrimSpace(s.Topic) == "":
			return nil, fmt.Errorf("%s.topic is empty", where)
		}
		topicID, err := lineage.TopicID(cluster, s.Topic)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, quotedNamesSafe(err, strings.TrimSpace(s.Topic)))
		}
		table := strings.TrimSpace(s.Table)
		if table == "" {
			return nil, fmt.Errorf("%s.table is empty", where)
		}
		tableIn := &lineage.AssetInput{Source: lineage.SourceConnect, Platform: platform, Kind: lineage.KindTable}
		if lineage.IsWarehouse(platform) {
			id, weak, err := lineage.TableID(platform, table)
			if err != nil {
				return nil, fmt.Errorf("%s.table: %w", where, quotedNamesSafe(err, table))
			}
			tableIn.ID, tableIn.Weak = id, []string{weak}
		} else {
			tableIn.ID, tableIn.Kind = platform+"://"+table, lineage.KindDataset
		}
		tableIn.Names = []string{tableIn.ID}
		connID := "connect://" + strings.TrimSpace(s.Name)
		plans = append(plans, plan{
			conn: &lineage.AssetInput{ID: connID, Names: []string{connID}, Kind: lineage.KindConnector, Platform: "kafka-connect", Source: lineage.SourceConnect,
				Owner: s.Owner, Domain: s.Domain, Tags: s.Tags, Description: s.Class},
			topic: &lineage.AssetInput{ID: topicID, Names: []string{topicID}, Kind: lineage.KindTopic, Platform: "kafka", Source: lineage.SourceConnect},
			table: tableIn,
			sink:  dir == "sink",
		})
	}
	stats, err := g.Write(ctx, func(w *lineage.Writer) error {
		for _, p := range plans {
			c, err := w.UpsertAsset(p.conn)
			if err != nil {
				return err
			}
			t, err := w.UpsertAsset(p.topic)
			if err != nil {
				return err
			}
			tb, err := w.UpsertAsset(p.table)
			if err != nil {
				return err
			}
			if p.sink {
				err = w.Link(t, c, lineage.EdgeConsumes, lineage.SourceConnect, nil, false)
				if err == nil {
					err = w.Link(c, tb, lineage.EdgeWrites, lineage.SourceConnect, nil, false)
				}
			} else {
				err = w.Link(tb, c, lineage.EdgeReads, lineage.SourceConnect, nil, false)
				if err == nil {
					err = w.Link(c, t, lineage.EdgeProduces, lineage.SourceConnect, nil, false)
				}
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &stats, nil
}
