package demo

import (
	"strconv"
	"time"
)

// Asset ids of the billing story. Warehouse tables are duckdb://schema.table
// (the pack's warehouse); dbt nodes are dbt://<unique_id>.
const (
	assetGateway        = "service://api-gateway"
	assetAPIUsage       = "kafka://prod/api-usage"
	assetAPIUsageSchema = "schema://api-usage-value"
	assetRollup         = "flink://usage-hourly-rollup"
	assetUsageHourlyT   = "kafka://prod/usage-hourly"
	assetUsageHourly    = "duckdb://usage.usage_hourly"
	assetFctEgress      = "dbt://model.billing.fct_billable_egress"
	assetDimAccounts    = "dbt://model.billing.dim_accounts"
	assetRevenueToday   = "sigma://workbook/revenue-today"
	assetStripeDAG      = "airflow://dag/sync_metered_usage_to_stripe"
)

// rollupSQL is usage-hourly-rollup as created against api-usage-value
// version 11. It is an updating aggregate (the hour in progress is
// re-emitted as requests arrive) and emits egress only for complete hours
// of response sizes.
const rollupSQL = `INSERT INTO ` + "`usage-hourly`" + `
SELECT
  CONCAT(account_id, '-', DATE_FORMAT(FLOOR(event_time TO HOUR), 'yyyyMMddHH')) AS usage_id,
  account_id,
  region,
  FLOOR(event_time TO HOUR) AS window_start,
  FLOOR(event_time TO HOUR) + INTERVAL '1' HOUR AS window_end,
  COUNT(usage_id) AS request_count,
  -- bill an hour only when every request reported its size
  CASE WHEN COUNT(response_bytes) = COUNT(*) THEN SUM(response_bytes) END AS egress_bytes
FROM ` + "`api-usage`" + `
GROUP BY account_id, region, FLOOR(event_time TO HOUR);`

const fctBillableEgressSQL = `{{ config(materialized='table') }}

select
    u.account_id,
    cast(u.window_start as date) as day,
    a.plan,
    a.billing_currency,
    sum(u.request_count) as request_count,
    -- hours without a size are billed as zero bytes
    sum(coalesce(u.egress_bytes, 0)) as billable_bytes,
    current_timestamp as built_at
from {{ source('usage', 'usage_hourly') }} as u
join {{ ref('dim_accounts') }} as a using (account_id)
group by all
`

const dimAccountsSQL = `{{ config(materialized='table') }}

select
    account_id,
    account_name,
    plan,
    region,
    billing_currency,
    created_at
from {{ source('crm', 'accounts') }}
`

func apiUsageSchema(version int) avroRecord {
	fields := []avroField{
		{Name: "usage_id", Type: "string", Doc: "Id of the API call (UUID)."},
		{Name: "account_id", Type: "string", Doc: "Customer account billed for the call."},
		{Name: "event_time", Type: tsMillis, Doc: "When the gateway answered the call."},
		{Name: "ingest_time", Type: tsMillis, Doc: "When the gateway produced the record."},
		{Name: "endpoint", Type: "string", Doc: "Route template, e.g. /v1/maps/tiles/{z}/{x}/{y}."},
		{Name: "method", Type: "string"},
		{Name: "status", Type: "int", Doc: "HTTP status code."},
		{Name: "region", Type: "string", Doc: "Gateway region that served the call."},
		{Name: "latency_ms", Type: "int"},
		{Name: "request_bytes", Type: optLong, Default: nullDefault, Doc: "Request body size in bytes."},
	}
	responseBytes := avroField{Name: "response_bytes", Type: optLong, Default: nullDefault, Doc: "Response body size in bytes."}
	responseKiB := avroField{Name: "response_kib", Type: optLong, Default: nullDefault, Doc: "Response body size in KiB, rounded up."}
	switch version {
	case 11:
		fields = append(fields, responseBytes)
	case 12:
		fields = append(fields, responseKiB)
	default:
		responseBytes.Doc = "Response body size in bytes; kept beside response_kib for readers of version 11."
		fields = append(fields, responseBytes, responseKiB)
	}
	return avroRecord{
		Type: "record", Name: "ApiUsage", Namespace: "com.example.usage",
		Doc: "One API call answered by the gateway; the basis of metered billing.", Fields: fields,
	}
}

func billingFiles(tl Instants) (map[string][]byte, error) {
	files := map[string][]byte{}
	add := func(name string, data []byte, err error) error {
		if err != nil {
			return err
		}
		files[name] = data
		return nil
	}

	// Schemas and registry.
	for _, v := range []int{11, 12, 13} {
		data, err := avroFile(apiUsageSchema(v))
		if err := add("schemas/api-usage-value/v"+strconv.Itoa(v)+".avsc", data, err); err != nil {
			return nil, err
		}
	}
	v11At := tl.Day.AddDate(0, 0, -47).Add(10*time.Hour + 12*time.Minute)
	v12At := tl.SchemaV12
	registry := map[string]any{"subjects": []Subject{{
		Subject: "api-usage-value", Compatibility: "BACKWARD",
		Versions: []SchemaVersion{
			{Version: 11, ID: 100311, State: "registered", RegisteredAt: &v11At, RegisteredBy: "kai", File: "schemas/api-usage-value/v11.avsc"},
			{Version: 12, ID: 100412, State: "registered", RegisteredAt: &v12At, RegisteredBy: "kai", File: "schemas/api-usage-value/v12.avsc"},
			{Version: 13, State: "proposed", File: "schemas/api-usage-value/v13.avsc"},
		},
	}}}
	data, err := jsonFile(registry)
	if err := add(fileRegistry, data, err); err != nil {
		return nil, err
	}

	// Team notes.
	notes := Notes{
		Assets: []NoteAsset{
			{ID: assetGateway, Kind: "service", Platform: "kubernetes", Name: "api-gateway", Owner: "kai", Domain: "gateway",
				Description: "Public API gateway; produces one api-usage record per call.",
				Properties:  map[string]string{"pods": strconv.Itoa(GatewayPods), "deploy_strategy": "rolling"}},
			{ID: assetAPIUsageSchema, Kind: "schema_subject", Platform: "schema-registry", Name: "api-usage-value", Owner: "sam", Domain: "streaming",
				Description: "Value schema of the api-usage topic.",
				Properties:  map[string]string{"compatibility": "BACKWARD", "format": "AVRO"}},
			{ID: assetAPIUsage, Kind: "topic", Platform: "kafka", Name: "api-usage", Owner: "sam", Domain: "streaming",
				Description: "Every API call answered by the gateway.",
				Properties:  map[string]string{"cluster": "prod", "partitions": "24", "value_subject": "api-usage-value", "cleanup.policy": "delete"}},
			{ID: assetRollup, Kind: "flink_statement", Platform: "flink", Name: "usage-hourly-rollup", Owner: "sam", Domain: "streaming",
				Description: "Per-account hourly usage for billing.", SQL: rollupSQL,
				Properties: map[string]string{"compute_pool": "lfcp-usage-prod", "schema_subject": "api-usage-value", "schema_version": "11",
					"changelog_mode": "upsert"}},
			{ID: assetUsageHourlyT, Kind: "topic", Platform: "kafka", Name: "usage-hourly", Owner: "sam", Domain: "streaming",
				Description: "Per-account hourly usage, keyed by usage_id (latest value wins).",
				Properties:  map[string]string{"cluster": "prod", "partitions": "6", "value_subject": "usage-hourly-value", "cleanup.policy": "compact"}},
			{ID: assetUsageHourly, Kind: "table", Platform: "duckdb", Name: "usage.usage_hourly", Owner: "sam", Domain: "streaming",
				Description: "usage-hourly landed by Tableflow (upsert on usage_id).",
				Aliases:     []string{"dbt://source.billing.usage.usage_hourly"}},
			{ID: assetRevenueToday, Kind: "dashboard", Platform: "sigma", Name: "Revenue today", Owner: "noor", Domain: "billing",
				Description: "Finance's intraday revenue workbook.",
				Aliases:     []string{"dbt://exposure.billing.revenue_today"}},
			{ID: assetStripeDAG, Kind: "dag", Platform: "airflow", Name: "sync_metered_usage_to_stripe", Owner: "bea", Domain: "billing",
				Description: "Reports each account's metered egress to Stripe, which invoices it.",
				Tags:        []string{"outbound", "money"}, Schedule: "0 23 * * *",
				Aliases: []string{"dbt://exposure.billing.sync_metered_usage_to_stripe"}},
		},
		Edges: []NoteEdge{
			{From: assetGateway, To: assetAPIUsage, Kind: "writes", Note: "the gateway produces with the latest api-usage-value version it knows"},
			{From: assetAPIUsageSchema, To: assetAPIUsage, Kind: "feeds", Note: "value schema of the topic"},
			{From: assetAPIUsage, To: assetRollup, Kind: "reads",
				Fields: []string{"usage_id", "account_id", "region", "event_time", "response_bytes"}},
			{From: assetRollup, To: assetUsageHourlyT, Kind: "writes", ColumnMap: map[string][]string{
				"usage_id": {"account_id", "event_time"}, "account_id": {"account_id"}, "region": {"region"},
				"window_start": {"event_time"}, "window_end": {"event_time"}, "request_count": {"usage_id"},
				"egress_bytes": {"response_bytes"},
			}},
			{From: assetUsageHourlyT, To: assetUsageHourly, Kind: "materializes", Via: "tableflow"},
			{From: assetFctEgress, To: assetRevenueToday, Kind: "reads", Fields: []string{"day", "plan", "billable_bytes"}},
			{From: assetFctEgress, To: assetStripeDAG, Kind: "reads", Fields: []string{"account_id", "day", "billable_bytes"}},
		},
	}
	data, err = jsonFile(notes)
	if err := add(fileNotes, data, err); err != nil {
		return nil, err
	}

	// People and domains.
	people := []personYAML{
		person("sam", "Sam Okafor", "U07SAMOKAF1"),
		person("bea", "Bea Lindqvist", "U07BEALIND2"),
		person("kai", "Kai Moreno", "U07KAIMORE3"),
		person("noor", "Noor Haddad", "U07NOORHAD4"),
	}
	domains := []domainYAML{
		{Name: "streaming", Assets: []string{"kafka://prod/*", "schema://*", "flink://*", "duckdb://usage.*"},
			Autonomy: "L2", Owners: []string{"sam"}, ApprovalExpiry: "2h"},
		{Name: "billing", Assets: []string{"dbt://*.billing.*", "duckdb://billing.*", "duckdb://crm.*", "sigma://workbook/*", "airflow://dag/*"},
			Autonomy: "L2", Owners: []string{"bea"}, Copy: []string{"noor"}, ApprovalExpiry: "4h"},
		{Name: "gateway", Assets: []string{"service://api-gateway"}, Autonomy: "L1", Owners: []string{"kai"}, ApprovalExpiry: "4h"},
	}
	data, err = peopleFile(`dw.yaml fragment for the billing scenario pack: people and domains.
Sam runs the streaming platform (topics, schemas, Flink statements);
Bea owns billing data (dbt models, the Stripe sync); Kai leads the API
gateway team; Noor owns the finance workbook.`, people, domains)
	if err := add(filePeople, data, err); err != nil {
		return nil, err
	}

	// Change log.
	changes := []Change{
		{ID: "billing-chg-1", At: tl.Day.AddDate(0, 0, -3).Add(10*time.Hour + 20*time.Minute), Kind: "config", System: "kafka",
			Assets: []string{assetAPIUsage}, Actor: "sam", Source: "terraform",
			Summary: "api-usage: retention.ms 7d -> 14d",
			Details: map[string]any{"config": "retention.ms", "old": "604800000", "new": "1209600000"}},
		{ID: "billing-chg-2", At: tl.PrevDayDBTDeploy, Kind: "deploy", System: "dbt",
			Assets: []string{assetFctEgress}, Fields: []FieldChange{{Name: "billing_currency", Change: "added"}},
			Actor: "bea", Source: "dbt-cloud",
			Summary: "billing project: fct_billable_egress carries billing_currency from dim_accounts",
			Details: map[string]any{"project": "billing", "git_sha": hexID("billing-dbt-deploy")[:12], "models": []string{"fct_billable_egress"}}},
		{ID: "billing-chg-3", At: tl.DashboardChange, Kind: "config", System: "sigma",
			Assets: []string{assetRevenueToday}, Actor: "noor", Source: "sigma",
			Summary: "Revenue today: region filter added to the summary page"},
		{ID: "billing-chg-4", At: tl.SchemaV12, Kind: "schema_version", System: "schema-registry",
			Assets: []string{assetAPIUsageSchema},
			Fields: []FieldChange{{Name: "response_bytes", Change: "removed"}, {Name: "response_kib", Change: "added"}},
			Actor:  "kai", Source: "schema-registry",
			Summary: "api-usage-value version 12 registered: response_bytes removed, response_kib added (BACKWARD: accepted)",
			Details: map[string]any{"subject": "api-usage-value", "version": 12, "previous_version": 11, "schema_id": 100412,
				"compatibility": "BACKWARD", "schema_file": "schemas/api-usage-value/v12.avsc"}},
		{ID: "billing-chg-5", At: tl.GatewayDeploy, Kind: "deploy", System: "kubernetes",
			Assets: []string{assetGateway, assetAPIUsage}, Actor: "kai", Source: "argocd",
			Summary: "api-gateway 3.18.0 rolling deploy: produces api-usage-value version 12",
			Details: map[string]any{"version": "3.18.0", "previous_version": "3.17.4", "strategy": "rolling", "pods": GatewayPods,
				"started_at": tl.GatewayDeploy.Format(time.RFC3339), "completed_at": tl.GatewayDeployEnd.Format(time.RFC3339),
				"schema_version": 12}},
	}
	data, err = changesFile(changes)
	if err := add(fileChanges, data, err); err != nil {
		return nil, err
	}

	// dbt manifest, as the 15:00 build wrote it.
	usageCols := []dbtColumn{
		{"usage_id", "VARCHAR", "account_id and hour; unique"},
		{"account_id", "VARCHAR", ""},
		{"region", "VARCHAR", ""},
		{"window_start", "TIMESTAMP", "Hour bucket (event time)."},
		{"window_end", "TIMESTAMP", ""},
		{"request_count", "BIGINT", ""},
		{"egress_bytes", "BIGINT", "Sum of response_bytes over the hour; null when a request had no size."},
		{"ingested_at", "TIMESTAMP", "Kafka timestamp of the row's latest version in usage-hourly (Flink's event-time watermark at emission)."},
	}
	proj := &dbtProject{
		name: "billing", database: "demo", generatedAt: tl.DBTBuild.Add(42 * time.Second),
		sources: []dbtSource{
			{sourceName: "usage", name: "usage_hourly", schema: "usage", loadedAtField: "ingested_at", owner: "sam", domain: "streaming",
				description: "Per-account hourly usage landed from the usage-hourly topic by Tableflow.", columns: usageCols,
				warnAfterHours: 2, errorAfterHours: 6},
			{sourceName: "crm", name: "accounts", schema: "crm", loadedAtField: "updated_at", owner: "bea", domain: "billing",
				description: "Customer accounts from the CRM.", warnAfterHours: 24, errorAfterHours: 72,
				columns: []dbtColumn{{"account_id", "VARCHAR", ""}, {"plan", "VARCHAR", ""}}},
		},
		models: []dbtModel{
			{name: "dim_accounts", schema: "billing", dir: "marts", materialized: "table", owner: "bea", domain: "billing",
				description: "One row per customer account.", rawCode: dimAccountsSQL, sources: [][2]string{{"crm", "accounts"}},
				tags: []string{"billing"},
				columns: []dbtColumn{{"account_id", "VARCHAR", ""}, {"account_name", "VARCHAR", ""}, {"plan", "VARCHAR", ""},
					{"region", "VARCHAR", ""}, {"billing_currency", "VARCHAR", ""}, {"created_at", "TIMESTAMP", ""}}},
			{name: "fct_billable_egress", schema: "billing", dir: "marts", materialized: "table", owner: "bea", domain: "billing",
				description: "Billable egress per account and day; the Stripe sync invoices it.", rawCode: fctBillableEgressSQL,
				sources: [][2]string{{"usage", "usage_hourly"}}, refs: []string{"dim_accounts"}, tags: []string{"billing", "hourly"},
				columns: []dbtColumn{{"account_id", "VARCHAR", ""}, {"day", "DATE", ""}, {"plan", "VARCHAR", ""},
					{"billing_currency", "VARCHAR", ""}, {"request_count", "BIGINT", ""},
					{"billable_bytes", "BIGINT", "COALESCE(egress_bytes, 0) summed over the day."}, {"built_at", "TIMESTAMP", ""}}},
		},
		tests: []dbtTest{
			{"not_null", "source:usage.usage_hourly", "usage_id"},
			{"unique", "source:usage.usage_hourly", "usage_id"},
			{"unique", "dim_accounts", "account_id"},
			{"not_null", "fct_billable_egress", "account_id"},
			{"not_null", "fct_billable_egress", "billable_bytes"},
		},
		exposures: []dbtExposure{
			{name: "revenue_today", label: "Revenue today", kind: "dashboard", maturity: "high",
				url: "https://app.sigmacomputing.com/example/workbook/revenue-today", ownerName: "Noor Haddad", ownerEmail: "noor.haddad@example.com",
				description: "Sigma workbook: intraday revenue by plan and region.", refs: []string{"fct_billable_egress"},
				meta: map[string]any{"platform": "sigma", "asset": assetRevenueToday}},
			{name: "sync_metered_usage_to_stripe", label: "Metered usage to Stripe", kind: "application", maturity: "high",
				url: "https://airflow.example.com/dags/sync_metered_usage_to_stripe", ownerName: "Bea Lindqvist", ownerEmail: "bea.lindqvist@example.com",
				description: "Airflow DAG reporting each account's daily billable egress to Stripe metered billing.",
				refs:        []string{"fct_billable_egress"}, tags: []string{"outbound", "money"},
				meta: map[string]any{"platform": "airflow", "asset": assetStripeDAG, "schedule": "0 23 * * *"}},
		},
	}
	data, err = jsonFile(proj.manifest())
	if err := add(fileManifest, data, err); err != nil {
		return nil, err
	}
	return files, nil
}
