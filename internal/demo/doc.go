// Package demo generates the scenario packs of SCENARIOS.md (A: usage
// billing, B: loyalty points): the warehouse tables, written into a DuckDB
// file by deterministic code, and the packs' metadata files (dbt manifest,
// lineage notes, people and domains, Avro schema versions, change log,
// Kafka Connect state, OpenLineage events) under testdata/scenarios.
//
// Nothing here is read by the product's rules: the packs are data for the
// demo and the end-to-end tests, and the tools must find each story in
// them by general means.
//
// Time: every instant of a story is an offset from an incident day, and
// Timeline(now) picks the latest day whose 15:05 check is not in the
// future, so the demo runs any day and a test passes a fixed now. The
// tables hold what had landed at 15:05 (LoadWarehouse) or at the 16:05
// verification (ApplyBillingFix, ApplyLoyaltyFix). Pack files are written
// for PackDay; ReadPack moves their times onto the timeline.
//
// Randomness comes from math/rand/v2 PCG streams with fixed seeds, one
// stream per account-hour, member or hour, so a row does not depend on
// which other rows were generated and the same now gives the same file.
package demo
