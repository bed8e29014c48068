// Package tables writes the warehouse tables of the scenario packs into a
// DuckDB file by deterministic code: the billing story's usage and billing
// tables and the loyalty story's balances, activity and tiers, placed on
// demo.Timeline. It is apart from package demo so that only the binaries
// that load tables link DuckDB.
//
// The tables hold what had landed at the story's 15:05 check
// (LoadWarehouse) or at the 16:05 verification (ApplyBillingFix,
// ApplyLoyaltyFix).
//
// Randomness comes from math/rand/v2 PCG streams with fixed seeds, one
// stream per account-hour, member or hour, so a row does not depend on
// which other rows were generated and the same now gives the same file.
package tables
