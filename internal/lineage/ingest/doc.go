// Package ingest reads the formats other systems describe lineage in, a dbt
// manifest (and its tests), OpenLineage run events and Kafka Connect
// connector configs, into the context graph. Each format is checked and
// planned whole before anything is written; the writing goes through
// lineage's Writer in one transaction, so lineage stays the one writer of
// the lineage_* tables and never imports this package.
//
// The formats share one package because they share what they produce and
// how (AssetInput values, one Graph.Write per import) and their tests share
// fixtures; a package each would be three small packages with one caller.
package ingest
