package demo

import (
	"strconv"
	"time"
)

// Asset ids of the loyalty story.
const (
	assetPOS             = "kafka://prod/pos-transactions"
	assetPointsBalance   = "flink://points-balance"
	assetMemberBalancesT = "kafka://prod/member-balances"
	assetBQSink          = "connect://prod/loyalty-bq-sink"
	assetMemberBalances  = "duckdb://loyalty.member_balances"
	assetFctMemberTier   = "dbt://model.loyalty.fct_member_tier"
	assetTierChanges     = "dbt://model.loyalty.tier_changes_daily"
	assetActivityHourly  = "dbt://model.loyalty.member_activity_hourly"
	assetNightlyTiers    = "dbt-cloud://job/nightly_tiers"
	assetBrazeSync       = "hightouch://sync/braze-tier-changes"
	kafkaNamespace       = "kafka://kafka-prod.example.internal:9092"
	flinkNamespace       = "flink://loyalty-prod"
	olProducer           = "https://github.com/OpenLineage/OpenLineage/tree/1.31.0/integration/flink"
	olRunEventSchema     = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
	savepointDir         = "s3://acme-loyalty-flink/savepoints/points-balance"
)

// pointsBalanceSQL is the job's query per release.
var pointsBalanceSQL = map[string]string{
	"v4.1": "INSERT INTO `member-balances`\n" +
		"SELECT\n  member_id,\n  SUM(points) AS balance,\n  MAX(event_time) AS last_activity_at\n" +
		"FROM `pos-transactions`\nGROUP BY member_id;",
	"v4.2": "INSERT INTO `member-balances`\n" +
		"SELECT\n  member_id,\n  SUM(points) AS balance,\n  LAST_VALUE(store_id) AS last_store_id,\n  MAX(event_time) AS last_activity_at\n" +
		"FROM `pos-transactions`\nWHERE store_id NOT LIKE 'test-%'\nGROUP BY member_id;",
}

const fctMemberTierSQL = `{{ config(materialized='table', tags=['nightly_tiers']) }}

with previous as (
    select member_id, tier as previous_tier from {{ this }}
)

select
    b.member_id,
    case
        when b.balance >= 10000 then 'platinum'
        when b.balance >= 5000 then 'gold'
        when b.balance >= 2000 then 'silver'
        else 'bronze'
    end as tier,
    coalesce(p.previous_tier, 'bronze') as previous_tier,
    b.balance,
    current_timestamp as evaluated_at
from {{ source('loyalty', 'member_balances') }} as b
left join previous as p using (member_id)
`

const tierChangesSQL = `{{ config(materialized='incremental', unique_key='run_date', tags=['nightly_tiers']) }}

{% set rank %}case {col} when 'bronze' then 0 when 'silver' then 1 when 'gold' then 2 else 3 end{% endset %}

select
    current_date as run_date,
    max(evaluated_at) as evaluated_at,
    count(*) as members_evaluated,
    count(*) filter (where {{ rank | replace('{col}', 'tier') }} > {{ rank | replace('{col}', 'previous_tier') }}) as upgrades,
    count(*) filter (where {{ rank | replace('{col}', 'tier') }} < {{ rank | replace('{col}', 'previous_tier') }}) as downgrades,
    count(*) filter (where tier = 'platinum') as platinum,
    count(*) filter (where tier = 'gold') as gold,
    count(*) filter (where tier = 'silver') as silver,
    count(*) filter (where tier = 'bronze') as bronze
from {{ ref('fct_member_tier') }}
`

const activityHourlySQL = `{{ config(materialized='incremental', unique_key='hour_start', tags=['hourly']) }}

-- runs at :04 past each hour for the hour that just ended
select
    date_trunc('hour', last_activity_at) as hour_start,
    count(*) as active_members,
    sum(balance) as balance_sum,
    current_timestamp as computed_at
from {{ source('loyalty', 'member_balances') }}
where last_activity_at >= date_trunc('hour', current_timestamp) - interval 1 hour
  and last_activity_at < date_trunc('hour', current_timestamp)
group by 1
`

// metricAvgBalanceSQL computes the team metric per hour bucket.
const metricAvgBalanceSQL = `SELECT hour_start AS bucket,
       CAST(SUM(balance_sum) AS DOUBLE) / SUM(active_members) AS value
FROM loyalty.member_activity_hourly
GROUP BY hour_start
ORDER BY hour_start`

const metricDowngradesSQL = `SELECT CAST(run_date AS TIMESTAMP) AS bucket, downgrades AS value
FROM loyalty.tier_changes_daily
ORDER BY run_date`

func loyaltyFiles(tl Instants) (map[string][]byte, error) {
	files := map[string][]byte{}
	add := func(name string, v any) error {
		data, err := jsonFile(v)
		if err != nil {
			return err
		}
		files[name] = data
		return nil
	}
	job41, job42 := hexID("points-balance/v4.1"), hexID("points-balance/v4.2")
	savepoint14 := savepointDir + "/savepoint-" + job41[:6] + "-" + hexID("savepoint-1400")[:12]

	notes := Notes{
		Assets: []NoteAsset{
			{ID: assetPOS, Kind: "topic", Platform: "kafka", Name: "pos-transactions", Owner: "priya", Domain: "loyalty-stream",
				Description: "Point-of-sale purchases with the points each earned (and the nightly expiry of old points).",
				Properties:  map[string]string{"cluster": "prod", "partitions": "32", "value_subject": "pos-transactions-value", "cleanup.policy": "delete"}},
			{ID: assetPointsBalance, Kind: "flink_job", Platform: "flink", Name: "points-balance", Owner: "priya", Domain: "loyalty-stream",
				Description: "Keeps every member's points balance in keyed state and emits each change.",
				SQL:         pointsBalanceSQL["v4.2"],
				Properties: map[string]string{"version": "v4.2", "state_backend": "rocksdb", "parallelism": "8",
					"savepoint_dir": savepointDir, "stateful_operator": "points-sum"}},
			{ID: assetMemberBalancesT, Kind: "topic", Platform: "kafka", Name: "member-balances", Owner: "priya", Domain: "loyalty-stream",
				Description: "Latest balance per member (compacted, keyed by member_id).",
				Properties:  map[string]string{"cluster": "prod", "partitions": "16", "value_subject": "member-balances-value", "cleanup.policy": "compact"}},
			{ID: assetBQSink, Kind: "connector", Platform: "kafka-connect", Name: "loyalty-bq-sink", Owner: "priya", Domain: "loyalty-stream",
				Description: "BigQuery sink merging member-balances into loyalty.member_balances (upsert on member_id)."},
			{ID: assetMemberBalances, Kind: "table", Platform: "duckdb", Name: "loyalty.member_balances", Owner: "tomas", Domain: "loyalty",
				Description: "Current points balance per member.",
				Aliases:     []string{"dbt://source.loyalty.loyalty.member_balances"}},
			{ID: assetNightlyTiers, Kind: "dbt_job", Platform: "dbt-cloud", Name: "nightly_tiers", Owner: "tomas", Domain: "loyalty",
				Description: "Evaluates member tiers from balances (dbt build --selector nightly_tiers).", Schedule: "30 21 * * *",
				Properties: map[string]string{"selector": "nightly_tiers"}},
			{ID: assetBrazeSync, Kind: "sync", Platform: "hightouch", Name: "braze-tier-changes", Owner: "lena", Domain: "crm",
				Description: "Sends tier changes to Braze, which emails members about their new tier.",
				Tags:        []string{"outbound", "customer-facing"}, Schedule: "0 22 * * *",
				Aliases: []string{"dbt://exposure.loyalty.braze_tier_changes"}},
		},
		Edges: []NoteEdge{
			{From: assetPOS, To: assetPointsBalance, Kind: "reads", Fields: []string{"member_id", "points", "store_id", "event_time"}},
			{From: assetPointsBalance, To: assetMemberBalancesT, Kind: "writes", ColumnMap: map[string][]string{
				"member_id": {"member_id"}, "balance": {"points"}, "last_store_id": {"store_id"}, "last_activity_at": {"event_time"},
			}},
			{From: assetMemberBalancesT, To: assetBQSink, Kind: "reads"},
			{From: assetBQSink, To: assetMemberBalances, Kind: "writes", Via: "kafka-connect", Note: "upsert merge every 60 s"},
			{From: assetNightlyTiers, To: assetFctMemberTier, Kind: "writes"},
			{From: assetNightlyTiers, To: assetTierChanges, Kind: "writes"},
			{From: assetFctMemberTier, To: assetBrazeSync, Kind: "reads", Fields: []string{"member_id", "tier", "previous_tier"}},
		},
		Metrics: []MetricDef{
			{Name: "avg_balance_active_last_hour", Asset: assetMemberBalances, Grain: "1h", Owner: "tomas", SQL: metricAvgBalanceSQL,
				Description: "Average balance of members active in the last hour (hourly model member_activity_hourly)."},
			{Name: "tier_downgrades", Asset: assetFctMemberTier, Grain: "1d", Owner: "tomas", SQL: metricDowngradesSQL,
				Description: "Members whose tier dropped at a nightly_tiers evaluation."},
		},
	}
	if err := add(fileNotes, notes); err != nil {
		return nil, err
	}

	people := []personYAML{
		person("priya", "Priya Raman", "U07PRIYARA5"),
		person("tomas", "Tomás Ferreira", "U07TOMASFE6"),
		person("lena", "Lena Hoffmann", "U07LENAHOF7"),
	}
	domains := []domainYAML{
		{Name: "loyalty-stream", Assets: []string{"kafka://prod/pos-transactions", "kafka://prod/member-balances", "flink://points-balance", "connect://prod/*"},
			Autonomy: "L2", Owners: []string{"priya"}, ApprovalExpiry: "2h"},
		{Name: "loyalty", Assets: []string{"duckdb://loyalty.*", "dbt://*.loyalty.*", "dbt-cloud://job/*"},
			Autonomy: "L2", Owners: []string{"tomas"}, ApprovalExpiry: "4h"},
		{Name: "crm", Assets: []string{"hightouch://sync/*"}, Autonomy: "L1", Owners: []string{"lena"}, Copy: []string{"tomas"}, ApprovalExpiry: "4h"},
	}
	data, err := peopleFile(`dw.yaml fragment for the loyalty scenario pack: people and domains.
Priya owns the points-balance job and its topics and connector; Tomás
owns loyalty data (tables, dbt, nightly_tiers); Lena runs CRM (the
Hightouch sync to Braze).`, people, domains)
	if err != nil {
		return nil, err
	}
	files[filePeople] = data

	changes := []Change{
		{ID: "loyalty-chg-1", At: tl.Day.AddDate(0, 0, -2).Add(11 * time.Hour), Kind: "connector", System: "kafka-connect",
			Assets: []string{assetBQSink}, Actor: "priya", Source: "kafka-connect",
			Summary: "loyalty-bq-sink: mergeIntervalMs 30000 -> 60000",
			Details: map[string]any{"config": "mergeIntervalMs", "old": "30000", "new": "60000"}},
		{ID: "loyalty-chg-2", At: tl.Day.AddDate(0, 0, -1).Add(17*time.Hour + 45*time.Minute), Kind: "deploy", System: "dbt",
			Assets: []string{assetTierChanges}, Fields: []FieldChange{{Name: "platinum", Change: "added"}, {Name: "gold", Change: "added"},
				{Name: "silver", Change: "added"}, {Name: "bronze", Change: "added"}},
			Actor: "tomas", Source: "dbt-cloud", Summary: "loyalty project: tier_changes_daily counts members per tier",
			Details: map[string]any{"project": "loyalty", "git_sha": hexID("loyalty-dbt-deploy")[:12], "models": []string{"tier_changes_daily"}}},
		{ID: "loyalty-chg-3", At: tl.Day.Add(9*time.Hour + 30*time.Minute), Kind: "config", System: "hightouch",
			Assets: []string{assetBrazeSync}, Actor: "lena", Source: "hightouch",
			Summary: "braze-tier-changes: previous_tier mapped to the Braze attribute last_tier"},
		{ID: "loyalty-chg-4", At: tl.ReleaseV42, Kind: "deploy", System: "flink",
			Assets: []string{assetPointsBalance, assetMemberBalancesT}, Fields: []FieldChange{{Name: "last_store_id", Change: "added"}},
			Actor: "priya", Source: "flink",
			Summary: "points-balance v4.2: filters test stores, adds last_store_id; v4.1 stopped with a savepoint",
			Details: map[string]any{"version": "v4.2", "previous_version": "v4.1", "stopped_job_id": job41,
				"savepoint": savepoint14, "savepoint_at": tl.Savepoint.Format(time.RFC3339),
				"sql_before": pointsBalanceSQL["v4.1"], "sql_after": pointsBalanceSQL["v4.2"]}},
		{ID: "loyalty-chg-5", At: tl.Restore, Kind: "restore", System: "flink",
			Assets: []string{assetPointsBalance}, Actor: "priya", Source: "flink",
			Summary: "points-balance v4.2 restored from the 14:00 savepoint with allowNonRestoredState; the aggregate's state was skipped",
			Details: map[string]any{"job_id": job42, "savepoint": savepoint14, "allowNonRestoredState": true, "state_skipped": true,
				"skipped_operators": []map[string]any{{"uid": "points-sum",
					"name": "GroupAggregate(groupBy=[member_id], select=[member_id, SUM(points) AS balance])"}},
				"restored_operators": []string{"pos-transactions-source"}, "job_state": "RUNNING", "checkpoints": "COMPLETED"}},
	}
	data, err = changesFile(changes)
	if err != nil {
		return nil, err
	}
	files[fileChanges] = data

	sinkConfig := map[string]string{
		"name":                                 "loyalty-bq-sink",
		"connector.class":                      "com.wepay.kafka.connect.bigquery.BigQuerySinkConnector",
		"tasks.max":                            "3",
		"topics":                               "member-balances",
		"project":                              "acme-loyalty-prod",
		"defaultDataset":                       "loyalty",
		"topic2TableMap":                       "member-balances:member_balances",
		"keySource":                            "APPLICATION_DEFAULT",
		"upsertEnabled":                        "true",
		"deleteEnabled":                        "true",
		"kafkaKeyFieldName":                    "kafka_key",
		"intermediateTableSuffix":              "tmp",
		"mergeIntervalMs":                      "60000",
		"allowNewBigQueryFields":               "true",
		"allowBigQueryRequiredFieldRelaxation": "true",
		"autoCreateTables":                     "false",
		"sanitizeTopics":                       "true",
		"key.converter":                        "io.confluent.connect.avro.AvroConverter",
		"key.converter.schema.registry.url":    "http://schema-registry.example.internal:8081",
		"value.converter":                      "io.confluent.connect.avro.AvroConverter",
		"value.converter.schema.registry.url":  "http://schema-registry.example.internal:8081",
		"errors.tolerance":                     "none",
	}
	conn := Connector{Info: ConnectorInfo{Name: "loyalty-bq-sink", Config: sinkConfig, Type: "sink"}}
	conn.Status.Name = "loyalty-bq-sink"
	conn.Status.Connector.State, conn.Status.Connector.WorkerID = "RUNNING", "connect-1.example.internal:8083"
	conn.Status.Type = "sink"
	for i := 0; i < 3; i++ {
		conn.Info.Tasks = append(conn.Info.Tasks, ConnectorTaskID{Connector: "loyalty-bq-sink", Task: i})
		conn.Status.Tasks = append(conn.Status.Tasks, ConnectorTaskStatus{ID: i, State: "RUNNING",
			WorkerID: "connect-" + strconv.Itoa(i+1) + ".example.internal:8083"})
	}
	if err := add(fileConnectors, map[string]Connector{"loyalty-bq-sink": conn}); err != nil {
		return nil, err
	}

	v41Start := tl.Day.AddDate(0, 0, -6).Add(9*time.Hour + 12*time.Minute)
	events := []map[string]any{
		olEvent("START", v41Start, "points-balance/v4.1", job41, "v4.1", false),
		olEvent("COMPLETE", tl.Savepoint.Add(5*time.Second), "points-balance/v4.1", job41, "v4.1", false),
		olEvent("START", tl.Restore.Add(10*time.Second), "points-balance/v4.2", job42, "v4.2", true),
	}
	if err := add(fileLineage, events); err != nil {
		return nil, err
	}

	proj := &dbtProject{
		name: "loyalty", database: "demo", generatedAt: tl.Day.Add(offNightlyTiers - 24*time.Hour + 95*time.Second),
		sources: []dbtSource{{sourceName: "loyalty", name: "member_balances", schema: "loyalty", loadedAtField: "ingested_at",
			owner: "tomas", domain: "loyalty", warnAfterHours: 1, errorAfterHours: 3,
			description: "Current balance per member, merged from the member-balances topic by the BigQuery sink connector.",
			columns: []dbtColumn{{"member_id", "VARCHAR", "unique"}, {"balance", "BIGINT", "Points balance."},
				{"last_store_id", "VARCHAR", "Store of the last purchase (from v4.2)."}, {"last_activity_at", "TIMESTAMP", ""},
				{"updated_at", "TIMESTAMP", ""}, {"ingested_at", "TIMESTAMP", ""}}}},
		models: []dbtModel{
			{name: "fct_member_tier", schema: "loyalty", dir: "marts", materialized: "table", owner: "tomas", domain: "loyalty",
				description: "Each member's tier from their balance, with last evaluation's tier.", rawCode: fctMemberTierSQL,
				sources: [][2]string{{"loyalty", "member_balances"}}, tags: []string{"nightly_tiers"},
				columns: []dbtColumn{{"member_id", "VARCHAR", ""}, {"tier", "VARCHAR", ""}, {"previous_tier", "VARCHAR", ""},
					{"balance", "BIGINT", ""}, {"evaluated_at", "TIMESTAMP", ""}}},
			{name: "tier_changes_daily", schema: "loyalty", dir: "marts", materialized: "incremental", owner: "tomas", domain: "loyalty",
				description: "Tier upgrades and downgrades per nightly evaluation.", rawCode: tierChangesSQL, uniqueKey: "run_date",
				refs: []string{"fct_member_tier"}, tags: []string{"nightly_tiers"},
				columns: []dbtColumn{{"run_date", "DATE", ""}, {"evaluated_at", "TIMESTAMP", ""}, {"members_evaluated", "BIGINT", ""},
					{"upgrades", "BIGINT", ""}, {"downgrades", "BIGINT", ""}, {"platinum", "BIGINT", ""}, {"gold", "BIGINT", ""},
					{"silver", "BIGINT", ""}, {"bronze", "BIGINT", ""}}},
			{name: "member_activity_hourly", schema: "loyalty", dir: "metrics", materialized: "incremental", owner: "tomas", domain: "loyalty",
				description: "Members active in each hour and their total balance: the team metric's history.", rawCode: activityHourlySQL,
				uniqueKey: "hour_start", sources: [][2]string{{"loyalty", "member_balances"}}, tags: []string{"hourly"},
				columns: []dbtColumn{{"hour_start", "TIMESTAMP", ""}, {"active_members", "BIGINT", ""}, {"balance_sum", "BIGINT", ""},
					{"computed_at", "TIMESTAMP", ""}}},
		},
		tests: []dbtTest{
			{"unique", "source:loyalty.member_balances", "member_id"},
			{"not_null", "source:loyalty.member_balances", "member_id"},
			{"not_null", "source:loyalty.member_balances", "balance"},
			{"unique", "fct_member_tier", "member_id"},
			{"not_null", "fct_member_tier", "tier"},
		},
		exposures: []dbtExposure{
			{name: "braze_tier_changes", label: "Tier changes to Braze", kind: "application", maturity: "high",
				url: "https://app.hightouch.com/acme/syncs/braze-tier-changes", ownerName: "Lena Hoffmann", ownerEmail: "lena.hoffmann@example.com",
				description: "Hightouch sync sending tier changes to Braze, which emails members.", refs: []string{"fct_member_tier"},
				tags: []string{"outbound", "customer-facing"},
				meta: map[string]any{"platform": "hightouch", "asset": assetBrazeSync, "schedule": "0 22 * * *"}},
			{name: "loyalty_health", label: "Loyalty health", kind: "dashboard", maturity: "medium",
				url: "https://bi.example.com/dashboards/loyalty-health", ownerName: "Tomás Ferreira", ownerEmail: "tomas.ferreira@example.com",
				description: "Hourly loyalty metrics for the team.", refs: []string{"member_activity_hourly", "tier_changes_daily"},
				meta: map[string]any{"platform": "metabase"}},
		},
		selectors: map[string]string{"nightly_tiers": "nightly_tiers"},
	}
	if err := add(fileManifest, proj.manifest()); err != nil {
		return nil, err
	}
	return files, nil
}

// olEvent is an OpenLineage RunEvent of the points-balance job.
func olEvent(eventType string, at time.Time, run, jobID, version string, withStore bool) map[string]any {
	facet := func(schema string, body map[string]any) map[string]any {
		body["_producer"] = olProducer
		body["_schemaURL"] = schema
		return body
	}
	field := func(name, typ string) map[string]any { return map[string]any{"name": name, "type": typ} }
	outFields := []any{field("member_id", "STRING"), field("balance", "BIGINT")}
	if withStore {
		outFields = append(outFields, field("last_store_id", "STRING"))
	}
	outFields = append(outFields, field("last_activity_at", "TIMESTAMP(3)"))
	schemaFacet := "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"
	return map[string]any{
		"eventType": eventType,
		"eventTime": at.UTC().Format("2006-01-02T15:04:05.000Z"),
		"producer":  olProducer,
		"schemaURL": olRunEventSchema,
		"run": map[string]any{
			"runId": uuidFor("openlineage-run/" + run),
			"facets": map[string]any{
				"processing_engine": facet("https://openlineage.io/spec/facets/1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet",
					map[string]any{"name": "flink", "version": "1.20.1", "openlineageAdapterVersion": "1.31.0"}),
				"flink_job": facet("https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet",
					map[string]any{"jobId": jobID, "version": version}),
			},
		},
		"job": map[string]any{
			"namespace": flinkNamespace,
			"name":      "points-balance",
			"facets": map[string]any{
				"jobType": facet("https://openlineage.io/spec/facets/2-0-3/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
					map[string]any{"processingType": "STREAMING", "integration": "FLINK", "jobType": "JOB"}),
				"sql": facet("https://openlineage.io/spec/facets/1-1-0/SQLJobFacet.json#/$defs/SQLJobFacet",
					map[string]any{"query": pointsBalanceSQL[version], "dialect": "flink"}),
			},
		},
		"inputs": []any{map[string]any{
			"namespace": kafkaNamespace,
			"name":      "pos-transactions",
			"facets": map[string]any{"schema": facet(schemaFacet, map[string]any{"fields": []any{
				field("member_id", "STRING"), field("points", "BIGINT"), field("store_id", "STRING"), field("event_time", "TIMESTAMP(3)"),
			}})},
		}},
		"outputs": []any{map[string]any{
			"namespace": kafkaNamespace,
			"name":      "member-balances",
			"facets":    map[string]any{"schema": facet(schemaFacet, map[string]any{"fields": outFields})},
		}},
	}
}
