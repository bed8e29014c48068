package e2e

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/story"
)

// TestStoryBilling drives story A through the five binaries over stdio
// and asserts every finding SCENARIOS.md lists, from the tools'
// structured output.
func TestStoryBilling(t *testing.T) {
	if testing.Short() {
		t.Skip("story A drives five processes; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	now := time.Date(2026, 3, 10, 18, 0, 0, 0, time.UTC)
	run, err := story.Billing(ctx, &story.Env{BinDir: binDir, Home: t.TempDir(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	dump := func(c *story.Call) string { b, _ := json.MarshalIndent(c.Out, "", " "); return string(b) }

	// 15:05: egress_bytes null in ~18% of today's rows, 0% in every earlier check.
	nulls := findResult(run.Check.Out, "null_rate", "egress_bytes")
	if nulls == nil {
		t.Fatalf("no null_rate(egress_bytes) result:\n%s", dump(run.Check))
	}
	if nulls["status"] != "anomalous" {
		t.Errorf("null_rate(egress_bytes) status %v", nulls["status"])
	}
	if obs, _ := nulls["observed"].(float64); math.Abs(obs-0.18) > 0.02 {
		t.Errorf("null share %.3f, want about 18%%", obs)
	}
	if msg, _ := nulls["message"].(string); !strings.Contains(msg, "0% in every earlier check") {
		t.Errorf("message %q should say 0%% in every earlier check", msg)
	}
	for _, metric := range []string{"row_count", "load_lag_avg_seconds", "duplicate_rate"} {
		for _, r := range results(run.Check.Out) {
			if r["metric"] == metric && (r["status"] == "anomalous" || r["status"] == "fail") {
				t.Errorf("%s should be normal: %v", metric, r["message"])
			}
		}
	}
	if run.IncidentID == "" {
		t.Fatal("no incident opened")
	}

	// Diagnosis: schema version 12 ranks first.
	first, _ := getPath(run.Diagnosis.Out, "diagnosis", "causes", 0).(map[string]any)
	if first == nil || !strings.Contains(toJSON(first), "api-usage-value") || !strings.Contains(toJSON(first), "schema_version") {
		t.Errorf("first cause is not the schema change:\n%s", dump(run.Diagnosis))
	}

	// The diagnosis carries the catalog's blast radius too.
	if !strings.Contains(toJSON(run.Diagnosis.Out["blast_radius"]), "sync_metered_usage_to_stripe") {
		t.Errorf("diagnosis has no blast radius reaching the Stripe DAG")
	}

	// Blast radius: the model, the workbook, and the Stripe DAG at 23:00, outbound/money first.
	br := toJSON(run.BlastRadius.Out)
	for _, want := range []string{"fct_billable_egress", "revenue-today", "airflow://dag/sync_metered_usage_to_stripe"} {
		if !strings.Contains(br, want) {
			t.Errorf("blast radius misses %s", want)
		}
	}
	firstHit, _ := getPath(run.BlastRadius.Out, "assets", 0).(map[string]any)
	if !strings.Contains(toJSON(firstHit), "outbound") || !strings.Contains(toJSON(firstHit), run.Timeline.Day.Format("2006-01-02")+"T23:00:00Z") {
		t.Errorf("first blast-radius entry should be the outbound DAG with its 23:00 run: %v", firstHit)
	}

	// Version 13 passes check_compatibility and is safe.
	if run.Compatibility.Out["compatible"] != true || run.Compatibility.Out["safe"] != true {
		t.Errorf("v13: %s", run.Compatibility.Text)
	}

	// Registration refused before approval, registered after.
	if !run.Refusal.IsError || !strings.Contains(run.Refusal.Text, "approve") {
		t.Errorf("refusal before approval: %q", run.Refusal.Text)
	}
	if run.Registration.Out["registered"] != true || run.Registration.Out["version"] != float64(13) {
		t.Errorf("registration: %s", run.Registration.Text)
	}

	// The schema version's approver is the streaming platform owner.
	for i, id := range run.ProposalIDs {
		p, _ := getPath(run.Proposals.Out, "proposals", i).(map[string]any)
		if id == run.SchemaID && p["approver"] != "sam" {
			t.Errorf("schema version approver %v, want sam", p["approver"])
		}
	}

	// Verified after the fix: the parsed answer, not a key's name.
	if run.Verification.Out["verified"] != true || run.Verification.Out["status"] != "verified" {
		t.Errorf("not verified: verified=%v status=%v: %s", run.Verification.Out["verified"], run.Verification.Out["status"], run.Verification.Text)
	}
	// dw receipt verify: every record line says ok, and the incident's
	// receipt is among them.
	receiptID, _ := run.Verification.Out["receipt_id"].(string)
	if receiptID == "" {
		t.Fatalf("the verification names no receipt: %s", dump(run.Verification))
	}
	verdicts := map[string]string{} // what was checked (receipt id, records, global) -> ok, TAMPERED, UNAUTHENTICATED
	for _, line := range strings.Split(run.ReceiptVerify, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(line, " ") {
			continue // detail lines under a record, blank lines
		}
		switch f[0] {
		case "ok", "TAMPERED", "UNAUTHENTICATED":
			verdicts[f[1]] = f[0]
		}
	}
	for _, what := range []string{receiptID, "records", "global"} {
		if verdicts[what] != "ok" {
			t.Errorf("receipt verify: %s is %q, want ok:\n%s", what, verdicts[what], run.ReceiptVerify)
		}
	}
	for what, v := range verdicts {
		if v != "ok" {
			t.Errorf("receipt verify: %s %s", what, v)
		}
	}
	// The receipt: intact, with a verification entry and the schema
	// version approved by sam with its undo.
	if run.Receipt.Out["intact"] != true {
		t.Errorf("receipt not intact: %v", run.Receipt.Out["problems"])
	}
	if n, _ := getPath(run.Receipt.Out, "entry_kinds", "verification").(float64); n < 1 {
		t.Errorf("receipt has no verification entry: %v", run.Receipt.Out["entry_kinds"])
	}
	var schemaProp map[string]any
	list, _ := run.Receipt.Out["proposals"].([]any)
	for _, p := range list {
		if m, _ := p.(map[string]any); m != nil && m["kind"] == "schema_version" {
			schemaProp = m
		}
	}
	if schemaProp == nil {
		t.Fatalf("receipt records no schema_version proposal: %s", dump(run.Receipt))
	}
	if schemaProp["decided_by"] != "sam" || (schemaProp["state"] != "approved" && schemaProp["state"] != "executed") {
		t.Errorf("schema_version proposal in the receipt: %v", schemaProp)
	}
	if md, _ := run.Receipt.Out["markdown"].(string); !strings.Contains(strings.ToLower(md), "undo") {
		t.Errorf("the receipt for people names no undo")
	}
}

func results(out map[string]any) []map[string]any {
	var rs []map[string]any
	list, _ := out["results"].([]any)
	for _, r := range list {
		if m, ok := r.(map[string]any); ok {
			rs = append(rs, m)
		}
	}
	return rs
}

func findResult(out map[string]any, metric, dim string) map[string]any {
	for _, r := range results(out) {
		if r["metric"] == metric && r["dimension"] == dim {
			return r
		}
	}
	return nil
}

func getPath(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			s, _ := v.([]any)
			if k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
