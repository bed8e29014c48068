// Package demo generates the metadata of the scenario packs of
// SCENARIOS.md (A: usage billing, B: loyalty points): dbt manifest,
// lineage notes, people and domains, Avro schema versions, change log,
// Kafka Connect state and OpenLineage events under testdata/scenarios, and
// the story's Timeline that both those files and the warehouse tables
// (package demo/tables) are placed on.
//
// Nothing here is read by the product's rules: the packs are data for the
// demo and the end-to-end tests, and the tools must find each story in
// them by general means. The package links no warehouse driver, so an
// agent that seeds its store from the packs does not carry DuckDB.
//
// Time: every instant of a story is an offset from an incident day, and
// Timeline(now) picks the latest day whose 15:05 check is not in the
// future, so the demo runs any day and a test passes a fixed now. Pack
// files are written for PackDay; ReadPack moves their times onto the
// timeline.
package demo
