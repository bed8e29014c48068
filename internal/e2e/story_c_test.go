package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dataworkers/dw/agents/connectors"
	schemaagent "github.com/dataworkers/dw/agents/schema"
	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/connect"
	"github.com/dataworkers/dw/internal/connect/connecttest"
	"github.com/dataworkers/dw/internal/kafka"
	"github.com/dataworkers/dw/internal/registry/registrytest"
	"github.com/dataworkers/dw/internal/store"
)

// Story C's estate: one orders topic read by a BigQuery sink connector, a
// Flink fraud scorer and an enrichment service; the orders-value subject
// under BACKWARD.
const (
	scBQSink = "com.wepay.kafka.connect.bigquery.BigQuerySinkConnector"

	scOrdersV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"order_id","type":"string"},
		{"name":"amount_cents","type":"long"},
		{"name":"card_country","type":["null","string"],"default":null}]}`
	scOrdersV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"order_id","type":"string"},
		{"name":"amount_cents","type":"long"},
		{"name":"card_country","type":["null","string"],"default":null},
		{"name":"channel","type":["null","string"],"default":null}]}`
	// The producer's change: card_country becomes card_region. BACKWARD
	// accepts it (an optional field removed, an optional one added), but
	// the fraud scorer reads card_country.
	scOrdersV3 = `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"order_id","type":"string"},
		{"name":"amount_cents","type":"long"},
		{"name":"channel","type":["null","string"],"default":null},
		{"name":"card_region","type":["null","string"],"default":null}]}`
	// Another schema than the one approved: also keeps card_country.
	scOrdersV3b = `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"order_id","type":"string"},
		{"name":"amount_cents","type":"long"},
		{"name":"card_country","type":["null","string"],"default":null},
		{"name":"channel","type":["null","string"],"default":null},
		{"name":"card_region","type":["null","string"],"default":null}]}`

	scTrace = "org.apache.kafka.connect.errors.ConnectException: Exiting WorkerSinkTask due to unrecoverable exception.\n" +
		"\tat org.apache.kafka.connect.runtime.WorkerSinkTask.deliverMessages(WorkerSinkTask.java:618)\n" +
		"Caused by: com.wepay.kafka.connect.bigquery.exception.BigQueryConnectException: table acme-shop.sales.orders: Access Denied"
)

// TestStoryStreamingOps drives story C (streaming operations, every day)
// through the real dw-connectors binary, with dw-context-catalog recording
// the owners and dw-schema checking the producer's change, against an
// in-process Kafka (kfake), Kafka Connect worker and Schema Registry. Every
// finding is asserted from the tools' structured output.
func TestStoryStreamingOps(t *testing.T) {
	if testing.Short() {
		t.Skip("story C spawns a dozen agent processes; skipped with -short")
	}
	t0 := time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)

	kc := scNewCluster(t)
	kc.createTopic(t, "orders", 2, 3, map[string]string{"min.insync.replicas": "2", "retention.ms": "604800000"})
	kc.createTopic(t, "customer-balances", 3, 3, map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "2"})
	// A topic whose min.insync.replicas its replication factor can never
	// meet: every acks=all write is refused although all replicas are in sync.
	kc.createTopic(t, "payments-audit", 1, 3, map[string]string{"min.insync.replicas": "4"})

	worker := connecttest.NewServer()
	t.Cleanup(worker.Close)
	worker.AddPlugin(scBQSink, "sink", "2.5.0")
	for _, c := range []struct {
		name   string
		config map[string]string
		tasks  int
	}{
		{"bq-orders", map[string]string{"connector.class": scBQSink, "topics": "orders", "project": "acme-shop",
			"defaultDataset": "sales", "topic2TableMap": "orders:orders"}, 2},
		{"bq-customer-balances", map[string]string{"connector.class": scBQSink, "topics": "customer-balances", "project": "acme-shop",
			"defaultDataset": "crm", "topic2TableMap": "customer-balances:customer_balances"}, 1},
	} {
		if err := worker.AddConnector(c.name, c.config, c.tasks); err != nil {
			t.Fatal(err)
		}
	}
	if err := worker.SetTaskState("bq-orders", 1, connect.StateFailed, scTrace); err != nil {
		t.Fatal(err)
	}

	reg := registrytest.New(t)
	reg.Seed("orders-value", compat.Backward, scOrdersV1, scOrdersV2)

	env, cfg := scWriteConfig(t, kc.addrs, worker.URL(), reg.URL())

	// The team records once who owns the jobs that consume orders, and
	// which fields the fraud scorer reads.
	cat := scSpawnAt(t, "dw-context-catalog", env, t0.Add(-time.Hour))
	res := cat.call(t, "record_lineage", map[string]any{
		"path": []string{"schema://orders-value", "kafka://prod/orders"},
		"edges": []map[string]any{{"from": "kafka://prod/orders", "to": "flink://fraud-scorer",
			"reads_fields": []string{"order_id", "amount_cents", "card_country"}}},
		"assets": []map[string]any{
			{"id": "flink://fraud-scorer", "kind": "stream_job", "owner": "erin",
				"sql": "INSERT INTO `order-risk` SELECT order_id, amount_cents, card_country <> 'US' AS foreign_card FROM `orders`"},
			{"id": "connect://bq-orders", "kind": "connector", "owner": "dana"},
		},
	})
	if res.IsError {
		t.Fatalf("record_lineage: %s", text(res))
	}
	cat.session.Close()

	t.Run("consumer lag judged over a window, with owners", func(t *testing.T) {
		scLagRounds(t, kc, env, t0)
	})

	// One process, started a minute after the last lag round, answers the
	// rest of the day's questions.
	final := t0.Add(15 * time.Minute)
	proposals := scPropose(t, cfg, final.Add(-time.Minute))
	p := scSpawnAt(t, "dw-connectors", env, final)

	t.Run("topic health", func(t *testing.T) { scTopicHealth(t, p, kc) })
	t.Run("kafka connect", func(t *testing.T) { scConnect(t, p, worker) })
	t.Run("schema change checked before it is registered", func(t *testing.T) {
		scSchemaChange(t, p, env, reg, final, proposals)
	})
}

// scLagRounds runs one dw-connectors process per minute (DW_CLOCK moved on
// each time, samples kept in the shared store) while a producer writes ten
// records per partition per round and three groups commit: one keeps up,
// one commits once and stops (a sink whose task failed), one rewinds
// partition 0 and replays. The last round comes eleven minutes after the
// previous one, so the stall outlasts the ten-minute window.
func scLagRounds(t *testing.T, kc *scCluster, env map[string]string, t0 time.Time) {
	const healthy, stalled, rewound = "orders-enricher", "connect-bq-orders", "fraud-scorer"
	rounds := []struct {
		at          time.Duration
		rewoundP0   int64 // fraud-scorer's commit on orders/0
		stalled     kafka.Status
		rewound     kafka.Status
		stalledSamp int // samples of the stalled group inside the window
	}{
		{0, 10, kafka.StatusUnknown, kafka.StatusOK, 1},
		{1 * time.Minute, 20, kafka.StatusStalled, kafka.StatusOK, 2},
		{2 * time.Minute, 5, kafka.StatusStalled, kafka.StatusRewound, 3},
		{3 * time.Minute, 15, kafka.StatusStalled, kafka.StatusRewound, 4},
		{14 * time.Minute, 50, kafka.StatusStopped, kafka.StatusOK, 1},
	}
	for i, r := range rounds {
		end := int64(10 * (i + 1))
		kc.produce(t, "orders", 10, 0, 1)
		kc.commit(t, healthy, "orders", map[int32]int64{0: end, 1: end})
		kc.commit(t, rewound, "orders", map[int32]int64{0: r.rewoundP0, 1: end})
		if i == 0 {
			kc.commit(t, stalled, "orders", map[int32]int64{0: 5, 1: 5})
		}

		at := t0.Add(r.at)
		p := scSpawnAt(t, "dw-connectors", env, at)
		res := p.call(t, "get_consumer_lag", map[string]any{})
		out := scDecode[connectors.ConsumerLagOut](t, res, "get_consumer_lag")
		round := fmt.Sprintf("round %d (%s)", i, at.Format("15:04"))

		if out.Cluster != "prod" || out.Window != "10m0s" || len(out.Groups) != 3 {
			t.Fatalf("%s: cluster %q window %q, %d groups:\n%s", round, out.Cluster, out.Window, len(out.Groups), text(res))
		}
		if out.At.Before(at) || out.At.After(at.Add(30*time.Second)) {
			t.Errorf("%s: read at %s, want the DW_CLOCK instant %s", round, out.At, at)
		}

		// The group that keeps up: lag zero everywhere, ok.
		h := scGroup(t, out, healthy)
		if h.Status != kafka.StatusOK || h.TotalLag != 0 {
			t.Errorf("%s: %s is %s with lag %d, want ok and 0", round, healthy, h.Status, h.TotalLag)
		}
		scPartitions(t, round, h, map[int32][2]int64{0: {end, end}, 1: {end, end}})

		// The group whose commits stopped while the producer continued.
		s := scGroup(t, out, stalled)
		if s.Status != r.stalled || s.TotalLag != 2*(end-5) {
			t.Errorf("%s: %s is %s with lag %d, want %s and %d (%s)", round, stalled, s.Status, s.TotalLag, r.stalled, 2*(end-5), scReason(s))
		}
		scPartitions(t, round, s, map[int32][2]int64{0: {5, end}, 1: {5, end}})
		for _, pr := range s.Partitions {
			if pr.Samples != r.stalledSamp {
				t.Errorf("%s: %s %s/%d judged over %d samples, want %d", round, stalled, pr.Topic, pr.Partition, pr.Samples, r.stalledSamp)
			}
		}
		if s.Status != kafka.StatusUnknown && !slices.Equal(s.Worst, []string{"orders/0", "orders/1"}) {
			t.Errorf("%s: %s worst %v, want both partitions", round, stalled, s.Worst)
		}

		// The group that rewound partition 0 and is replaying.
		w := scGroup(t, out, rewound)
		if w.Status != r.rewound || w.TotalLag != end-r.rewoundP0 {
			t.Errorf("%s: %s is %s with lag %d, want %s and %d (%s)", round, rewound, w.Status, w.TotalLag, r.rewound, end-r.rewoundP0, scReason(w))
		}
		scPartitions(t, round, w, map[int32][2]int64{0: {r.rewoundP0, end}, 1: {end, end}})
		if r.rewound == kafka.StatusRewound {
			if !slices.Equal(w.Worst, []string{"orders/0"}) {
				t.Errorf("%s: %s worst %v, want [orders/0]", round, rewound, w.Worst)
			}
			want := fmt.Sprintf("still %d short of where it was", 20-r.rewoundP0)
			if reason := w.Partitions[0].Reason; !strings.Contains(reason, "went back from 20") || !strings.Contains(reason, want) {
				t.Errorf("%s: rewound reason %q", round, reason)
			}
		}

		switch r.stalled {
		case kafka.StatusStalled:
			if reason := s.Partitions[0].Reason; !strings.Contains(reason, "committed offset 5 did not move across "+strconv.Itoa(r.stalledSamp)+" samples") {
				t.Errorf("%s: stalled reason %q", round, reason)
			}
		case kafka.StatusStopped:
			if reason := s.Partitions[0].Reason; !strings.Contains(reason, "no new commit since "+t0.Format("2006-01-02T15:04")) || !strings.Contains(reason, "longer than the 10m0s window") {
				t.Errorf("%s: stopped reason %q", round, reason)
			}
		}

		// The consuming jobs' owners, from the context graph.
		if o := s.Owner; o.Asset != "connect://bq-orders" || o.Owner != "dana" || o.OwnerFrom != "context graph" || !strings.Contains(o.MatchedBy, "Kafka Connect sink group") {
			t.Errorf("%s: owner of %s: %+v", round, stalled, o)
		}
		if o := w.Owner; o.Asset != "flink://fraud-scorer" || o.Kind != "stream_job" || o.Owner != "erin" || !strings.HasPrefix(o.MatchedBy, "group id") {
			t.Errorf("%s: owner of %s: %+v", round, rewound, o)
		}
		if o := h.Owner; o.Owner != "" || !strings.Contains(o.Note, "no owner recorded") || !strings.Contains(o.Note, "record_lineage") {
			t.Errorf("%s: %s has no recorded job, want a note saying how to record one: %+v", round, healthy, o)
		}

		if i == len(rounds)-1 {
			summary := text(res)
			for _, want := range []string{"connect-bq-orders: stopped, lag 90", "consumed by connect://bq-orders, owner dana"} {
				if !strings.Contains(summary, want) {
					t.Errorf("summary lacks %q:\n%s", want, summary)
				}
			}
			// Narrowed to one group and topic, and a misspelt group.
			one := scDecode[connectors.ConsumerLagOut](t, p.call(t, "get_consumer_lag", map[string]any{"group": stalled, "topic": "orders"}), "get_consumer_lag")
			if len(one.Groups) != 1 || one.Groups[0].Group != stalled || one.Groups[0].Status != kafka.StatusStopped {
				t.Errorf("narrowed read: %+v", one.Groups)
			}
			bad := p.call(t, "get_consumer_lag", map[string]any{"group": "connect-bq-order"})
			if !bad.IsError || !strings.Contains(text(bad), `unknown consumer group "connect-bq-order"`) || !strings.Contains(text(bad), "closest: connect-bq-orders") {
				t.Errorf("misspelt group: %v %q", bad.IsError, text(bad))
			}
		}
		p.session.Close()
	}
}

// scTopicHealth: kfake keeps every replica in sync, so the healthy topics
// report their configs and no issue; a min.insync.replicas above the
// replication factor is found from the metadata and configs alone.
func scTopicHealth(t *testing.T, p *agentProc, kc *scCluster) {
	res := p.call(t, "get_topic_health", map[string]any{})
	out := scDecode[connectors.TopicHealthOut](t, res, "get_topic_health")
	if out.Cluster != "prod" || !slices.Equal(slices.Sorted(slices.Values(out.Brokers)), slices.Sorted(slices.Values(kc.addrs))) {
		t.Errorf("cluster %q brokers %v, want prod and %v", out.Cluster, out.Brokers, kc.addrs)
	}
	topics := map[string]kafka.TopicHealth{}
	for _, th := range out.Topics {
		topics[th.Topic] = th
	}
	orders, ok := topics["orders"]
	if !ok {
		t.Fatalf("orders not reported:\n%s", text(res))
	}
	if orders.Health != kafka.HealthOK || len(orders.Issues) != 0 || orders.Partitions != 2 || orders.ReplicationFactor != 3 ||
		orders.MinInsyncReplicas != 2 || orders.Retention != "7d" || orders.CleanupPolicy != "delete" {
		t.Errorf("orders: %+v", orders)
	}
	balances := topics["customer-balances"]
	if balances.Health != kafka.HealthOK || len(balances.Issues) != 0 || balances.Partitions != 3 || balances.ReplicationFactor != 3 ||
		balances.MinInsyncReplicas != 2 || balances.CleanupPolicy != "compact" {
		t.Errorf("customer-balances: %+v", balances)
	}
	audit := topics["payments-audit"]
	kinds := map[string][]int32{}
	for _, is := range audit.Issues {
		kinds[is.Kind] = is.Partitions
	}
	if audit.Health != kafka.HealthCritical || audit.MinInsyncReplicas != 4 || audit.ReplicationFactor != 3 ||
		!slices.Equal(kinds[kafka.IssueBelowMinISR], []int32{0}) || len(kinds) != 2 {
		t.Errorf("payments-audit: %+v", audit)
	}
	if _, ok := kinds[kafka.IssueMinISRAboveReplica]; !ok {
		t.Errorf("payments-audit: no %s issue: %+v", kafka.IssueMinISRAboveReplica, audit.Issues)
	}
	if _, ok := kinds[kafka.IssueUnderReplicated]; ok {
		t.Errorf("payments-audit reported under-replicated although every replica is in sync: %+v", audit.Issues)
	}
	if s := text(res); !strings.Contains(s, "1 with problems") || !strings.Contains(s, "acks=all") {
		t.Errorf("summary: %s", s)
	}

	one := scDecode[connectors.TopicHealthOut](t, p.call(t, "get_topic_health", map[string]any{"topic": "orders"}), "get_topic_health")
	if len(one.Topics) != 1 || one.Topics[0].Topic != "orders" {
		t.Errorf("one topic: %+v", one.Topics)
	}
	bad := p.call(t, "get_topic_health", map[string]any{"topic": "payment-audit"})
	if !bad.IsError || !strings.Contains(text(bad), `unknown topic "payment-audit"`) || !strings.Contains(text(bad), "closest: payments-audit") {
		t.Errorf("misspelt topic: %v %q", bad.IsError, text(bad))
	}
}

// scConnect: connector and task states with the failing task's trace and
// what each connector moves; a new config validated against the installed
// plugin, with nothing created.
func scConnect(t *testing.T, p *agentProc, worker *connecttest.Server) {
	res := p.call(t, "get_connector_status", map[string]any{})
	out := scDecode[connectors.ConnectorStatusOut](t, res, "get_connector_status")
	if len(out.Connectors) != 2 || out.Cluster != "prod" {
		t.Fatalf("cluster %q, %d connectors:\n%s", out.Cluster, len(out.Connectors), text(res))
	}
	byName := map[string]connect.ConnectorReport{}
	for _, c := range out.Connectors {
		byName[c.Name] = c
	}
	orders := byName["bq-orders"]
	if orders.Health != connect.HealthDegraded || orders.State != connect.StateRunning || orders.Type != "sink" || orders.Class != scBQSink ||
		orders.FailedTasks != 1 || len(orders.Tasks) != 2 {
		t.Errorf("bq-orders: %+v", orders)
	} else {
		if orders.Tasks[0].State != connect.StateRunning || orders.Tasks[0].Trace != "" {
			t.Errorf("bq-orders task 0: %+v", orders.Tasks[0])
		}
		if orders.Tasks[1].ID != 1 || orders.Tasks[1].State != connect.StateFailed || orders.Tasks[1].Trace != scTrace {
			t.Errorf("bq-orders task 1 should be FAILED with its trace: %+v", orders.Tasks[1])
		}
	}
	wantFlow := []connect.Flow{{Topic: "orders", Table: "acme-shop.sales.orders", Direction: "topic_to_table"}}
	if !slices.Equal(orders.Flows, wantFlow) {
		t.Errorf("bq-orders flows %+v, want %+v", orders.Flows, wantFlow)
	}
	balances := byName["bq-customer-balances"]
	if balances.Health != connect.HealthOK || balances.State != connect.StateRunning || balances.FailedTasks != 0 || len(balances.Tasks) != 1 ||
		balances.Tasks[0].State != connect.StateRunning {
		t.Errorf("bq-customer-balances: %+v", balances)
	}
	wantFlow = []connect.Flow{{Topic: "customer-balances", Table: "acme-shop.crm.customer_balances", Direction: "topic_to_table"}}
	if !slices.Equal(balances.Flows, wantFlow) {
		t.Errorf("bq-customer-balances flows %+v, want %+v", balances.Flows, wantFlow)
	}
	if got := slices.Sorted(slices.Values(out.Lineage.Recorded)); !slices.Equal(got, []string{"bq-customer-balances", "bq-orders"}) || len(out.Lineage.Skipped) != 0 {
		t.Errorf("lineage: %+v", out.Lineage)
	}
	if s := text(res); !strings.Contains(s, "bq-orders: degraded (connector RUNNING, 1 of 2 tasks failed)") ||
		!strings.Contains(s, "task 1: org.apache.kafka.connect.errors.ConnectException: Exiting WorkerSinkTask") {
		t.Errorf("summary does not carry the failing task's trace:\n%s", s)
	}

	// A new sink config, validated by the worker before a person applies it.
	res = p.call(t, "validate_connector_config", map[string]any{"plugin": scBQSink, "config": map[string]string{
		"name": "bq-refunds", "tasks.max": "two", "project": "acme-shop", "defaultDataset": "sales",
	}})
	v := scDecode[connect.Validation](t, res, "validate_connector_config")
	errs := map[string]string{}
	for _, fe := range v.Errors {
		errs[fe.Field] = strings.Join(fe.Errors, "; ")
	}
	if v.Valid || v.Plugin != scBQSink || v.ErrorCount != 3 || len(errs) != 3 {
		t.Errorf("validation: valid %v plugin %q, %d errors: %v", v.Valid, v.Plugin, v.ErrorCount, errs)
	}
	if !strings.Contains(errs["tasks.max"], "Invalid value two for configuration tasks.max") {
		t.Errorf("tasks.max error %q", errs["tasks.max"])
	}
	for _, f := range []string{"topics", "topics.regex"} {
		if !strings.Contains(errs[f], "Must configure one of topics or topics.regex") {
			t.Errorf("%s error %q", f, errs[f])
		}
	}
	if !strings.Contains(text(res), "Nothing was created or changed") {
		t.Errorf("validation summary: %s", text(res))
	}
	// Validating created nothing on the worker.
	again := scDecode[connectors.ConnectorStatusOut](t, p.call(t, "get_connector_status", map[string]any{}), "get_connector_status")
	if len(again.Connectors) != 2 || again.Lineage.EdgesCreated != 0 || again.Lineage.AssetsCreated != 0 {
		t.Errorf("after validation: %d connectors, lineage %+v", len(again.Connectors), again.Lineage)
	}
	if n := worker.WorkerID(); !strings.Contains(out.Worker, n) {
		t.Errorf("worker %q, want %s", out.Worker, n)
	}
}

// scProposals are the approvals set up for the schema change.
type scProposals struct {
	pending, approved string // both bind scOrdersV3's hash; approved was approved by sam
	sha               string
}

// scPropose records, as dw-incidents would, two schema_version proposals
// for scOrdersV3 in the shared store: one left pending, one approved by
// sam (the OS user running the test is mapped to sam).
func scPropose(t *testing.T, cfg *config.Config, at time.Time) scProposals {
	t.Helper()
	ctx := context.Background()
	c, err := compat.Canonicalize(compat.Avro, compat.Schema{Text: scOrdersV3})
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.OpenSQLite(ctx, cfg.Store.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Story C replays a past day (the agents run under DW_CLOCK), so its
	// store is one made for replay: there the replayed time dates the
	// approvals too, and the proposals made here at that time are live.
	if err := approvals.MarkReplayStore(ctx, db, cfg.Home, at); err != nil {
		t.Fatal(err)
	}
	svc := approvals.New(db, cfg, clock.NewFake(at), nil)
	// The approval binds the registration: this registry, subject and schema.
	bound, err := approvals.SchemaVersionAction(cfg.SchemaRegistry.URL, "orders-value", "AVRO", c.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	propose := func() *approvals.Proposal {
		p, err := svc.Propose(ctx, approvals.NewProposal{
			Kind:     approvals.KindSchemaVersion,
			What:     "Register orders-value version 3: card_region replaces card_country",
			Why:      "the checkout service reports regions instead of countries",
			Targets:  []string{"schema://orders-value"},
			Undo:     "soft-delete version 3 (DELETE /subjects/orders-value/versions/3)",
			Details:  map[string]any{connectors.DetailSubject: "orders-value", connectors.DetailSchemaSHA: c.SHA256, connectors.DetailSchemaType: "AVRO"},
			Action:   bound,
			Proposer: "dw-incidents",
		})
		if err != nil {
			t.Fatalf("propose: %v", err)
		}
		return p
	}
	pending, approved := propose(), propose()
	by, err := approvals.OSUserDecider(cfg, approvals.ChannelTerminal, config.CurrentOSUser())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Decide(ctx, approved.ID, by, approvals.VerdictApprove, "region is enough for the scorer once it is migrated"); err != nil {
		t.Fatalf("approve: %v", err)
	}
	return scProposals{pending: pending.ID, approved: approved.ID, sha: c.SHA256}
}

// scSchemaChange: the subject's latest version, the producer's change
// checked against the rule and the readers of the fields it touches, and
// registration refused without an approval for exactly that schema.
func scSchemaChange(t *testing.T, p *agentProc, env map[string]string, reg *registrytest.Server, at time.Time, pr scProposals) {
	subjects := scDecode[connectors.ListSubjectsOut](t, p.call(t, "list_subjects", map[string]any{"prefix": "orders"}), "list_subjects")
	if !slices.Equal(subjects.Subjects, []string{"orders-value"}) || subjects.Registry != reg.URL() {
		t.Errorf("list_subjects: %+v", subjects)
	}

	res := p.call(t, "get_latest_schema", map[string]any{"subject": "orders-value"})
	latest := scDecode[connectors.LatestSchemaOut](t, res, "get_latest_schema")
	if latest.Subject != "orders-value" || latest.Version != 2 || !slices.Equal(latest.Versions, []int{1, 2}) || latest.Previous != 1 ||
		latest.SchemaType != "AVRO" || latest.Compatibility != string(compat.Backward) || latest.LevelSource != "subject" || len(latest.SHA256) != 64 {
		t.Errorf("latest: %+v", latest)
	}
	if len(latest.Changes) != 1 || latest.Changes[0].Kind != "added" || latest.Changes[0].Path != "channel" {
		t.Errorf("changes from version 1: %+v", latest.Changes)
	}
	if ch := latest.Change; ch == nil || !ch.Created || ch.Key != "schema-registry:orders-value:2" {
		t.Errorf("change log entry: %+v", latest.Change)
	}

	// The producer's change, checked by dw-schema against the subject's
	// rule and every recorded reader of the fields it touches.
	sch := scSpawnAt(t, "dw-schema", env, at)
	res = sch.call(t, "check_compatibility", map[string]any{"subject": "orders-value", "schema": scOrdersV3})
	check := scDecode[schemaagent.CheckOut](t, res, "check_compatibility")
	if !check.Compatible || check.Level != string(compat.Backward) || !check.Registry.Reached || !check.Registry.Compatible {
		t.Errorf("BACKWARD should accept the change, locally and in the registry: %+v", check)
	}
	if check.Safe {
		t.Errorf("the change is called safe although the fraud scorer reads card_country:\n%s", text(res))
	}
	if check.SHA256 != pr.sha || check.Against != 2 {
		t.Errorf("sha %s against %d, want %s against 2", check.SHA256, check.Against, pr.sha)
	}
	var removed bool
	for _, c := range check.Changes {
		if c.Kind == "removed" && c.Path == "card_country" {
			removed = true
		}
	}
	if !removed {
		t.Errorf("changes do not show card_country removed: %+v", check.Changes)
	}
	var scorer *schemaagent.Reader
	for i := range check.Readers {
		if check.Readers[i].Asset == "flink://fraud-scorer" {
			scorer = &check.Readers[i]
		}
	}
	if scorer == nil || !slices.Equal(scorer.Fields, []string{"card_country"}) || scorer.Owner != "erin" {
		t.Errorf("readers: %+v, want flink://fraud-scorer reading card_country, owner erin", check.Readers)
	}
	sch.session.Close()

	// Registration: pending, approved for another schema, unknown.
	res = p.call(t, "register_stream_schema", map[string]any{"subject": "orders-value", "schema": scOrdersV3, "proposal_id": pr.pending})
	msg := text(res)
	if !res.IsError {
		t.Errorf("registered under a pending proposal: %s", msg)
	}
	for _, want := range []string{"is pending", "sam", "dw approve " + pr.pending, "Nothing was registered"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal under a pending proposal lacks %q: %s", want, msg)
		}
	}
	res = p.call(t, "register_stream_schema", map[string]any{"subject": "orders-value", "schema": scOrdersV3b, "proposal_id": pr.approved})
	if msg := text(res); !res.IsError || !strings.Contains(msg, "approved for a different schema") || !strings.Contains(msg, "nothing was registered") {
		t.Errorf("registered a schema other than the approved one: %v %s", res.IsError, msg)
	}
	res = p.call(t, "register_stream_schema", map[string]any{"subject": "orders-value", "schema": scOrdersV3, "proposal_id": "P-NOSUCH00"})
	if !res.IsError || !strings.Contains(text(res), `no proposal "P-NOSUCH00"`) {
		t.Errorf("unknown proposal: %v %s", res.IsError, text(res))
	}

	if got := reg.Versions("orders-value"); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("registry versions %v after refusals, want [1 2]", got)
	}
	if n := reg.Hits("POST /subjects/orders-value/versions"); n != 0 {
		t.Errorf("%d registration requests reached the registry", n)
	}
	after := scDecode[connectors.LatestSchemaOut](t, p.call(t, "get_latest_schema", map[string]any{"subject": "orders-value"}), "get_latest_schema")
	if after.Version != 2 || after.Change == nil || after.Change.Created {
		t.Errorf("after refusals: version %d, change %+v (want version 2, already recorded)", after.Version, after.Change)
	}
}

// scWriteConfig writes the dw.yaml every process of the story shares and
// returns the agents' environment and the parsed configuration.
func scWriteConfig(t *testing.T, brokers []string, connectURL, registryURL string) (map[string]string, *config.Config) {
	t.Helper()
	home := t.TempDir()
	path := filepath.Join(home, "dw.yaml")
	yaml := fmt.Sprintf(`home: %s
kafka:
  name: prod
  brokers: [%s]
  timeout: 5s
kafka_connect:
  url: %s
  timeout: 5s
schema_registry:
  url: %s
people:
  - {id: sam, name: Sam Streams, os_users: [%q]}
  - {id: dana, name: Dana Sink}
  - {id: erin, name: Erin Fraud}
domains:
  - name: streaming
    assets: ["schema://*", "kafka://*", "connect://*", "flink://*"]
    owners: [sam]
    copy: [dana]
`, home, strings.Join(brokers, ", "), connectURL, registryURL, config.CurrentOSUser())
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(path, []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"DW_CONFIG": path, "DW_HOME": home}, cfg
}

// scSpawnAt starts an agent whose clock starts at at (DW_CLOCK).
func scSpawnAt(t *testing.T, name string, env map[string]string, at time.Time) *agentProc {
	t.Helper()
	e := maps.Clone(env)
	e["DW_CLOCK"] = at.UTC().Format(time.RFC3339)
	return spawn(t, name, e)
}

// scDecode reads a successful result's structured content into T.
func scDecode[T any](t *testing.T, res *mcp.CallToolResult, tool string) T {
	t.Helper()
	var out T
	if res.IsError {
		t.Fatalf("%s: %s", tool, text(res))
	}
	if res.StructuredContent == nil {
		t.Fatalf("%s: no structured content: %s", tool, text(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: structured content does not decode into %T: %v\n%s", tool, out, err, raw)
	}
	return out
}

func scGroup(t *testing.T, out connectors.ConsumerLagOut, name string) connectors.GroupLag {
	t.Helper()
	for _, g := range out.Groups {
		if g.Group == name {
			return g
		}
	}
	t.Fatalf("group %s not in the report", name)
	return connectors.GroupLag{}
}

// scPartitions checks a group's committed and end offsets and lag on each
// orders partition: want maps partition -> {committed, end}.
func scPartitions(t *testing.T, round string, g connectors.GroupLag, want map[int32][2]int64) {
	t.Helper()
	if len(g.Partitions) != len(want) {
		t.Errorf("%s: %s has %d partitions, want %d", round, g.Group, len(g.Partitions), len(want))
		return
	}
	for _, p := range g.Partitions {
		w, ok := want[p.Partition]
		if p.Topic != "orders" || !ok || p.Committed != w[0] || p.End != w[1] || p.Lag != w[1]-w[0] || p.Error != "" {
			t.Errorf("%s: %s %s/%d committed %d end %d lag %d, want committed %d end %d lag %d (%s)",
				round, g.Group, p.Topic, p.Partition, p.Committed, p.End, p.Lag, w[0], w[1], w[1]-w[0], p.Error)
		}
	}
}

func scReason(g connectors.GroupLag) string {
	var rs []string
	for _, p := range g.Partitions {
		rs = append(rs, fmt.Sprintf("%s/%d: %s", p.Topic, p.Partition, p.Reason))
	}
	return strings.Join(rs, "; ")
}

// scCluster is an in-process three-broker Kafka with a producer and an
// admin client to act as producers and consumers would.
type scCluster struct {
	addrs []string
	adm   *kadm.Client
	prod  *kgo.Client
}

func scNewCluster(t *testing.T) *scCluster {
	t.Helper()
	kf, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	prod, err := kgo.NewClient(kgo.SeedBrokers(kf.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	return &scCluster{addrs: kf.ListenAddrs(), adm: kadm.NewClient(prod), prod: prod}
}

func (c *scCluster) createTopic(t *testing.T, name string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := c.adm.CreateTopic(context.Background(), partitions, rf, cfg, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// produce writes n records to each listed partition of topic.
func (c *scCluster) produce(t *testing.T, topic string, n int, partitions ...int32) {
	t.Helper()
	var recs []*kgo.Record
	for _, p := range partitions {
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.Itoa(i))})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// commit sets a group's committed offsets as its consumer would.
func (c *scCluster) commit(t *testing.T, group, topic string, offsets map[int32]int64) {
	t.Helper()
	offs := kadm.Offsets{}
	for p, at := range offsets {
		offs.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
	}
	if err := c.adm.CommitAllOffsets(context.Background(), group, offs); err != nil {
		t.Fatalf("commit %s: %v", group, err)
	}
}
