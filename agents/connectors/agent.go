// Package connectors is the dw-connectors agent: Kafka lag and topic health, Kafka Connect, Schema Registry, Flink restores, lineage events and approved schema registration.
package connectors

import (
	"github.com/dataworkers/dw/internal/agentboot"
	"github.com/dataworkers/dw/internal/deps"
)

// Name is the binary's and the server's name.
const Name = "dw-connectors"

const instructions = `dw-connectors reads the streaming estate natively (Kafka, Kafka Connect, Schema Registry, Flink) and makes the only writes Data Workers ever makes there: a schema version a named owner approved, lineage events, and approved downstream runs. What it reads becomes evidence the other agents use: lag samples, connector lineage, registry versions and Flink restores in the change log.

get_consumer_lag reads lag per group, topic and partition, stores the round, and judges each group over the stored window (ok, lagging, rewound, stalled, stopped) with the evidence; it names the consuming job's owner from the context graph. Call it again a minute later to give a status more samples. get_topic_health finds offline and under-replicated partitions, in-sync replicas below min.insync.replicas, and the retention and cleanup configs.
get_connector_status shows Kafka Connect connector and task states with the failing task's trace and records each connector's topic -> table hops in the context graph. validate_connector_config asks the cluster to validate a proposed config; it never creates or changes a connector, a person applies it.
list_subjects and get_latest_schema read the Schema Registry; get_latest_schema gives the canonical SHA-256 a proposal binds and the fields changed since the previous version, and records the version in the change log (first-seen time: the registry keeps no registration time). read_flink_restores records a job's restores from checkpoints and savepoints; REST cannot say whether state was skipped, so that is recorded from the deployment with record_change (dw-incidents).
register_stream_schema registers a version only under an approved schema_version proposal for exactly that subject and schema (its details bind schema_sha256); otherwise, or under the org-wide stop, it refuses, writes nothing and says whom to ask. It records the change, a receipt step and marks the proposal executed; calling it again does nothing twice. Check a new schema with dw-schema's check_compatibility before proposing it.
emit_lineage_event validates an OpenLineage run event, stores it in the context graph and forwards it to openlineage.url when configured.
trigger_dagster_job, trigger_airflow_dag, trigger_dbt_cloud_job and start_step_functions_execution start a run only for an approved proposal naming it (or a reversible class the domain opened at L3), never under the org-wide stop, and never twice for one approval; get_run_status follows it and records the outcome in the receipt.`

// Spec is the dw-connectors server: what it says and which tools it has;
// agentboot does the rest.
func Spec() agentboot.Spec {
	return agentboot.Spec{
		Name:            Name,
		Title:           "Data Workers: streaming connectors",
		Instructions:    instructions,
		ReadsWarehouses: false,
		Register:        Register,
	}
}

// handlers carries the dependencies; deps holds the context graph and the
// clients to external systems (internal/deps/clients).
type handlers struct {
	d *deps.Deps
}
