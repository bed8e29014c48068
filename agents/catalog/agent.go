// Package catalog is the dw-context-catalog agent: the context graph from topic to job to table to model to dashboard and outbound job.
package catalog

import (
	"github.com/dataworkers/dw/internal/agentboot"
	"github.com/dataworkers/dw/internal/deps"
)

// Name is the binary's and the server's name.
const Name = "dw-context-catalog"

const instructions = `dw-context-catalog answers what a change or a broken table reaches, who owns it, and what runs on it next.

The graph is built from dbt manifests (import_dbt_manifest), OpenLineage run events (import_openlineage_events), Kafka Connect connector configs, and the notes a team records once (record_lineage: a hop such as topic -> stream job -> table, the fields a job reads, a schedule, an owner, tags).
blast_radius_analysis lists everything downstream of an asset (optionally only what reads given columns), with distance, path, owners, and outbound, money, regulator and customer-facing assets and scheduled jobs with their next run first. trace_cross_platform_lineage follows paths across platforms upstream or downstream. get_lineage, search_assets and get_owners answer the smaller questions.
Assets are named platform://path (kafka://prod/api-usage, snowflake://usage.usage_hourly, dbt://model.billing.fct_billable_egress); a bare unambiguous name also works.`

// Spec is the dw-context-catalog server: what it says and which tools it has;
// agentboot does the rest.
func Spec() agentboot.Spec {
	return agentboot.Spec{
		Name:            Name,
		Title:           "Data Workers: context catalog",
		Instructions:    instructions,
		ReadsWarehouses: false,
		Register:        Register,
	}
}

type handlers struct{ d *deps.Deps }
