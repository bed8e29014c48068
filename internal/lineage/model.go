// Package lineage is the context graph: which assets exist across stream
// and batch platforms (topics, schema subjects, stream jobs, connectors,
// tables, dbt nodes, dashboards, orchestrator jobs, reverse-ETL syncs), how
// data flows between them, down to columns where that is known, and who owns
// what. It records the notes a team writes once and is the one writer of
// the graph: the ingest formats (dbt manifests, OpenLineage run events,
// Kafka Connect connector configs, in lineage/ingest) write through its
// Writer. It keeps everything in the shared store so all agent processes
// see one graph, and answers blast
// radius and trace questions from a compact in-memory index that reloads
// when the store's graph version moves.
package lineage

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/suggest"
)

// Kind is what an asset is.
type Kind string

// Asset kinds. A dbt exposure becomes a dashboard, report or application.
const (
	KindTopic           Kind = "topic"
	KindSchemaSubject   Kind = "schema_subject"
	KindStreamJob       Kind = "stream_job"
	KindConnector       Kind = "connector"
	KindTable           Kind = "table"
	KindView            Kind = "view"
	KindDBTModel        Kind = "dbt_model"
	KindSeed            Kind = "seed"
	KindSnapshot        Kind = "snapshot"
	KindSource          Kind = "source"
	KindDashboard       Kind = "dashboard"
	KindOrchestratorJob Kind = "orchestrator_job"
	KindReverseETLSync  Kind = "reverse_etl_sync"
	KindReport          Kind = "report"
	KindApplication     Kind = "application"
	KindJob             Kind = "job"
	KindDataset         Kind = "dataset"
)

// Kinds lists every asset kind, in the order the index numbers them.
var Kinds = []Kind{KindTopic, KindSchemaSubject, KindStreamJob, KindConnector, KindTable, KindView,
	KindDBTModel, KindSeed, KindSnapshot, KindSource, KindDashboard, KindOrchestratorJob,
	KindReverseETLSync, KindReport, KindApplication, KindJob, KindDataset}

// kindAliases are the common spellings ParseKind takes for the kinds
// they belong to.
var kindAliases = map[string]Kind{
	"workbook": KindDashboard, "explore": KindDashboard, "look": KindDashboard, "bi": KindDashboard,
	"dag": KindOrchestratorJob, "schedule": KindOrchestratorJob, "orchestrator": KindOrchestratorJob, "pipeline": KindOrchestratorJob,
	"model":   KindDBTModel,
	"subject": KindSchemaSubject, "schema": KindSchemaSubject,
	"statement": KindStreamJob, "flink_statement": KindStreamJob, "stream": KindStreamJob,
	"sync": KindReverseETLSync, "reverse_etl": KindReverseETLSync,
}

// ParseKind validates a kind name, accepting a few common spellings
// (workbook, explore, dag, schedule) for the kinds they belong to.
func ParseKind(s string) (Kind, error) {
	if k, ok := suggest.Pick(s, Kinds, kindAliases); ok {
		return k, nil
	}
	return "", fmt.Errorf("unknown asset kind %q; valid kinds: %s", s, strings.Join(suggest.Names(Kinds), ", "))
}

// isJob reports whether assets of this kind transform or move data rather
// than hold it; it decides default edge kinds and where reads-fields apply.
func (k Kind) isJob() bool {
	switch k {
	case KindStreamJob, KindConnector, KindOrchestratorJob, KindReverseETLSync, KindJob:
		return true
	}
	return false
}

// kindRank orders kinds by how much they say when two ingestions describe
// the same asset: a dbt model is more than the table it materializes, which
// is more than a dbt source declaring it.
func kindRank(k Kind) int {
	switch k {
	case KindDBTModel, KindSnapshot, KindSeed:
		return 3
	case KindSource, KindDataset, "":
		return 0
	}
	return 2
}

// EdgeKind is how data moves along an edge.
type EdgeKind string

// Edge kinds.
const (
	EdgeReads        EdgeKind = "reads"
	EdgeWrites       EdgeKind = "writes"
	EdgeFeeds        EdgeKind = "feeds"
	EdgeMaterializes EdgeKind = "materializes"
	EdgeProduces     EdgeKind = "produces"
	EdgeConsumes     EdgeKind = "consumes"
)

// EdgeKinds lists every edge kind, in the order the index numbers them.
var EdgeKinds = []EdgeKind{EdgeReads, EdgeWrites, EdgeFeeds, EdgeMaterializes, EdgeProduces, EdgeConsumes}

// ParseEdgeKind validates an edge kind; "" is allowed and means "pick from
// the kinds of the two ends".
func ParseEdgeKind(s string) (EdgeKind, error) {
	k := EdgeKind(strings.ToLower(strings.TrimSpace(s)))
	if k == "" {
		return "", nil
	}
	for _, known := range EdgeKinds {
		if known == k {
			return k, nil
		}
	}
	names := make([]string, len(EdgeKinds))
	for i, e := range EdgeKinds {
		names[i] = string(e)
	}
	return "", fmt.Errorf("unknown edge kind %q; valid kinds: %s", s, strings.Join(names, ", "))
}

// defaultEdgeKind names an edge from the kinds at its ends, so ingestion
// sources that only say "A feeds B" still produce readable edges.
func defaultEdgeKind(from, to Kind) EdgeKind {
	switch {
	case to.isJob() && from == KindTopic:
		return EdgeConsumes
	case to.isJob():
		return EdgeReads
	case from.isJob() && to == KindTopic:
		return EdgeProduces
	case from.isJob():
		return EdgeWrites
	case from == KindDBTModel && (to == KindTable || to == KindView):
		return EdgeMaterializes
	}
	return EdgeFeeds
}

// Source names where a fact in the graph came from.
type Source string

// Ingestion sources.
const (
	SourceDBT         Source = "dbt"
	SourceOpenLineage Source = "openlineage"
	SourceNote        Source = "note"
	SourceConnect     Source = "connect"
)

// The tags that move an asset to the front of a blast radius: data that
// leaves the company, moves money, reaches a regulator or a customer.
const (
	TagOutbound       = "outbound"
	TagMoney          = "money"
	TagRegulator      = "regulator"
	TagCustomerFacing = "customer-facing"
)

// Flag bits kept per asset in the store and the index.
const (
	flagOutbound uint8 = 1 << iota
	flagMoney
	flagRegulator
	flagCustomerFacing
	flagScheduled

	flagCritical = flagOutbound | flagMoney | flagRegulator | flagCustomerFacing
)

// normalizeTags lower-cases, trims, dedups and sorts tags; the critical tags
// also accept underscores and spaces (customer_facing, "customer facing").
func normalizeTags(tags []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range tags {
		t = strings.ToLower(strings.TrimSpace(t))
		if t == "" {
			continue
		}
		if alt := strings.NewReplacer("_", "-", " ", "-").Replace(t); alt == TagCustomerFacing {
			t = alt
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

func tagFlags(tags []string) uint8 {
	var f uint8
	for _, t := range tags {
		switch t {
		case TagOutbound:
			f |= flagOutbound
		case TagMoney:
			f |= flagMoney
		case TagRegulator:
			f |= flagRegulator
		case TagCustomerFacing:
			f |= flagCustomerFacing
		}
	}
	return f
}

// Column is a column or field of an asset.
type Column struct {
	Name        string `json:"name" jsonschema:"column or field name"`
	Type        string `json:"type,omitempty" jsonschema:"data type as the source system spells it"`
	Description string `json:"description,omitempty" jsonschema:"what the column holds"`
}

// Schedule is when a job runs: a standard 5-field cron expression (or a
// descriptor such as @daily) in a time zone (UTC when empty).
type Schedule struct {
	Cron     string `json:"cron" jsonschema:"5-field cron expression (minute hour day-of-month month day-of-week) or @hourly/@daily/@weekly/@monthly"`
	Timezone string `json:"timezone,omitempty" jsonschema:"IANA time zone the cron expression is read in, e.g. Europe/Berlin; UTC when empty"`
}

// Asset is a node of the context graph.
type Asset struct {
	ID          string    `json:"id" jsonschema:"asset id platform://path, e.g. kafka://prod/api-usage or dbt://model.billing.fct_billable_egress"`
	Kind        Kind      `json:"kind" jsonschema:"what the asset is: topic, schema_subject, stream_job, connector, table, view, dbt_model, seed, snapshot, source, dashboard, orchestrator_job, reverse_etl_sync, report, application, job or dataset"`
	Platform    string    `json:"platform" jsonschema:"system the asset lives in, e.g. kafka, flink, snowflake, dbt, sigma, airflow"`
	Name        string    `json:"name" jsonschema:"short name (last part of the id)"`
	Title       string    `json:"title,omitempty" jsonschema:"display name, e.g. a workbook's title"`
	Owner       string    `json:"owner,omitempty" jsonschema:"owning person or team"`
	OwnerEmail  string    `json:"owner_email,omitempty" jsonschema:"owner's email"`
	Domain      string    `json:"domain,omitempty" jsonschema:"business domain the asset belongs to"`
	Description string    `json:"description,omitempty" jsonschema:"what the asset is for"`
	Tags        []string  `json:"tags,omitempty" jsonschema:"tags; outbound, money, regulator and customer-facing mark critical assets"`
	Schedule    *Schedule `json:"schedule,omitempty" jsonschema:"when the job runs"`
	NextRun     time.Time `json:"next_run,omitzero" jsonschema:"next scheduled run, computed from the schedule"`
	Columns     []Column  `json:"columns,omitempty" jsonschema:"columns or fields"`
	SQL         string    `json:"sql,omitempty" jsonschema:"the job's SQL text, when recorded"`
	URL         string    `json:"url,omitempty" jsonschema:"link to the asset in its system"`
	Sources     []Source  `json:"sources,omitempty" jsonschema:"ingestion sources that described the asset: dbt, openlineage, note, connect"`
	Aliases     []string  `json:"aliases,omitempty" jsonschema:"other names the asset is known by"`
	FirstSeen   time.Time `json:"first_seen,omitzero" jsonschema:"when the graph first learned of the asset"`
	LastSeen    time.Time `json:"last_seen,omitzero" jsonschema:"when an ingestion last mentioned the asset"`
}

// ColumnMapping is one piece of column lineage on an edge: From (a column of
// the edge's source) flows into To (a column of its target). To "" means the
// target, a job, reads From; To "*" means From affects every column of the
// target, as a filter or join key does.
type ColumnMapping struct {
	From string `json:"from" jsonschema:"column of the upstream asset"`
	To   string `json:"to,omitempty" jsonschema:"column of the downstream asset; empty when the downstream job only reads the column; * when it affects every column"`
}

// Edge is a flow of data from one asset to another.
type Edge struct {
	From     string          `json:"from" jsonschema:"upstream asset id"`
	To       string          `json:"to" jsonschema:"downstream asset id"`
	Kind     EdgeKind        `json:"kind" jsonschema:"reads, writes, feeds, materializes, produces or consumes"`
	Columns  []ColumnMapping `json:"columns,omitempty" jsonschema:"column lineage along the edge, when known"`
	Sources  []Source        `json:"sources,omitempty" jsonschema:"where the edge was learned: dbt, openlineage, note, connect"`
	LastSeen time.Time       `json:"last_seen,omitzero" jsonschema:"when an ingestion last reported the edge"`
	// ColumnsTotal is set when an answer lists only the first mappings.
	ColumnsTotal int `json:"columns_total,omitempty" jsonschema:"column mappings on the edge in all, when columns lists only the first 10"`
}
