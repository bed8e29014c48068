package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/story"
)

// TestStoryLoyalty drives story B through the five binaries over stdio
// and asserts every finding SCENARIOS.md lists, from the tools'
// structured output.
func TestStoryLoyalty(t *testing.T) {
	if testing.Short() {
		t.Skip("story B drives five processes; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	now := time.Date(2026, 3, 10, 18, 0, 0, 0, time.UTC)
	run, err := story.Loyalty(ctx, &story.Env{BinDir: binDir, Home: t.TempDir(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	dump := func(c *story.Call) string { b, _ := json.MarshalIndent(c.Out, "", " "); return string(b) }
	day := run.Timeline.Day
	at := func(d time.Duration) string { return day.Add(d).Format(time.RFC3339) }

	// 15:05: the team's hourly metric reads about 9% of its baseline at
	// 14:00; every earlier hour of today is normal; an incident opens.
	var anomalous []map[string]any
	for _, p := range list(run.Metric.Out, "points") {
		switch p["verdict"] {
		case "anomalous":
			anomalous = append(anomalous, p)
		case "normal":
		default:
			t.Errorf("metric point %v: verdict %v", p["at"], p["verdict"])
		}
	}
	if len(anomalous) != 1 || anomalous[0]["at"] != at(14*time.Hour) {
		t.Fatalf("want only the 14:00 hour anomalous:\n%s", dump(run.Metric))
	}
	value, _ := anomalous[0]["value"].(float64)
	median, _ := anomalous[0]["median"].(float64)
	if share := value / median; median <= 0 || share < 0.07 || share > 0.11 {
		t.Errorf("the metric reads %.1f%% of its baseline median %.0f; the story has it at about 9%%", 100*share, median)
	}
	if !strings.Contains(run.Metric.Text, "91% below the usual") {
		t.Errorf("the metric's answer does not say 91%% below the usual: %s", run.Metric.Text)
	}
	if getPath(run.Metric.Out, "incidents", 0, "opened") != true || run.IncidentID == "" {
		t.Fatalf("no incident opened: %s", run.Metric.Text)
	}

	// The table's shape is fine: member_id unique, no nulls, no volume
	// problem, so it is a value problem; the check opens nothing.
	if probs, _ := run.Check.Out["problems"].([]any); len(probs) != 0 || run.Check.Out["status"] != "pass" {
		t.Errorf("quality check problems %v, status %v:\n%s", run.Check.Out["problems"], run.Check.Out["status"], run.Check.Text)
	}
	if incs, _ := run.Check.Out["incidents"].([]any); len(incs) != 0 {
		t.Errorf("the quality check opened or joined %v", incs)
	}
	for _, r := range results(run.Check.Out) {
		if r["status"] == "fail" || r["status"] == "anomalous" {
			t.Errorf("%s is %s: %v", r["check"], r["status"], r["message"])
		}
	}
	for _, c := range []struct{ metric, dim string }{{"duplicate_rate", "member_id"}, {"null_rate", "member_id"}, {"null_rate", "balance"}} {
		r := findResult(run.Check.Out, c.metric, c.dim)
		if r == nil || r["status"] != "pass" || r["observed"] != float64(0) {
			t.Errorf("%s(%s) should pass at 0: %v", c.metric, c.dim, r)
		}
	}
	if !strings.Contains(run.Check.Text, "value problem") {
		t.Errorf("the check does not point at a value problem: %s", run.Check.Text)
	}

	// Diagnosis: the 14:02 restore that skipped state first, release v4.2
	// (the only other recent change on the job) below it.
	causes := list(run.Diagnosis.Out["diagnosis"], "causes")
	if len(causes) < 2 {
		t.Fatalf("want at least two causes:\n%s", dump(run.Diagnosis))
	}
	first, second := causes[0], causes[1]
	if getPath(first, "change", "kind") != "restore" || getPath(first, "change", "state_skipped") != true ||
		getPath(first, "change", "at") != at(14*time.Hour+2*time.Minute) {
		t.Errorf("first cause is not the 14:02 restore with state skipped: %s", toJSON(first["change"]))
	}
	if !strings.Contains(toJSON(first["evidence"]), "skipped operator state") {
		t.Errorf("first cause's evidence does not name the skipped state: %v", first["evidence"])
	}
	if getPath(second, "change", "kind") != "deploy" || !strings.Contains(toJSON(getPath(second, "change", "summary")), "v4.2") ||
		getPath(second, "rank") != float64(2) {
		t.Errorf("second cause is not release v4.2: %s", toJSON(second["change"]))
	}

	// Blast radius from the table: fct_member_tier and the Braze sync,
	// outbound and customer-facing, next run 22:00, listed first.
	var reached []string
	for _, a := range list(run.BlastRadius.Out, "assets") {
		reached = append(reached, a["id"].(string))
	}
	for _, want := range []string{"dbt://model.loyalty.fct_member_tier", "hightouch://sync/braze-tier-changes"} {
		if !slices.Contains(reached, want) {
			t.Errorf("blast radius %v misses %s", reached, want)
		}
	}
	sync, _ := getPath(run.BlastRadius.Out, "assets", 0).(map[string]any)
	crit := toJSON(sync["critical"])
	if sync["id"] != "hightouch://sync/braze-tier-changes" || sync["next_run"] != at(22*time.Hour) ||
		!strings.Contains(crit, "outbound") || !strings.Contains(crit, "customer-facing") {
		t.Errorf("first blast-radius entry should be the outbound, customer-facing Braze sync at 22:00: %s", toJSON(sync))
	}

	// Proposals: each goes to the owner of its target, the job's owner
	// for the redeploy with the loyalty data owner copied.
	want := map[string]string{"hightouch://sync/braze-tier-changes": "lena", "dbt-cloud://job/nightly_tiers": "tomas", "flink://points-balance": "priya"}
	props := list(run.Proposals.Out, "proposals")
	if len(props) != 4 {
		t.Fatalf("want 4 proposals:\n%s", dump(run.Proposals))
	}
	var diff map[string]any
	for _, p := range props {
		target := toJSON(getPath(p, "targets", 0))
		who := want[strings.Trim(target, `"`)]
		if p["approver"] != who {
			t.Errorf("%v (%v): approver %v, want %s", p["id"], p["what"], p["approver"], who)
		}
		if who == "priya" && !strings.Contains(toJSON(p["copied"]), `"tomas"`) {
			t.Errorf("%v: the loyalty data owner is not copied: %v", p["id"], p["copied"])
		}
		if p["kind"] == "diff" {
			diff = p
		}
	}
	if diff == nil || getPath(diff, "details", "allowNonRestoredState") != false || getPath(diff, "details", "version") != "v4.1" ||
		getPath(diff, "details", "savepoint") != run.Savepoint || !strings.Contains(run.Savepoint, "/savepoints/points-balance/savepoint-") {
		t.Errorf("the deployment diff does not redeploy v4.1 from the 14:00 savepoint without allowNonRestoredState: %s", toJSON(diff))
	}
	names := map[string]string{"lena": "Lena Hoffmann (lena)", "tomas": "Tomás Ferreira (tomas)", "priya": "Priya Raman (priya)"}
	for i, out := range run.Approvals {
		who, _ := props[i]["approver"].(string)
		if !strings.Contains(out, "Approved "+props[i]["id"].(string)) || !strings.Contains(out, "Recorded as "+names[who]) {
			t.Errorf("approval %d by %s: %q", i, who, out)
		}
	}

	// Verified: the metric back on baseline for the hours since 14:00,
	// and the table re-checked clean.
	if run.Verification.Out["verified"] != true || run.Verification.Out["status"] != "verified" {
		t.Fatalf("not verified:\n%s", dump(run.Verification))
	}
	a, _ := getPath(run.Verification.Out, "assertions", 0).(map[string]any)
	obs, _ := a["observed"].(string)
	if a["passed"] != true || !strings.Contains(toJSON(a["checked"]), "metric avg_balance_active_last_hour") ||
		!strings.Contains(obs, "14:00") || !strings.Contains(obs, "15:00") || strings.Contains(obs, "anomalous") {
		t.Errorf("the metric is not back on baseline: %s", toJSON(a))
	}
	if probs, _ := run.Recheck.Out["problems"].([]any); len(probs) != 0 || run.Recheck.Out["status"] != "pass" {
		t.Errorf("run_quality_check after the fix: %s", run.Recheck.Text)
	}

	// Tier downgrades of the verification run of nightly_tiers are in line
	// with their baseline, both in remediate's scope and when monitored.
	td, _ := getPath(run.TierDowngrades.Out, "points", 0).(map[string]any)
	if td == nil || td["at"] != at(0) || td["verdict"] != "normal" {
		t.Errorf("tier_downgrades today: %s", dump(run.TierDowngrades))
	} else if v, lo, hi := td["value"].(float64), td["low"].(float64), td["high"].(float64); v < lo || v > hi || v < 500 {
		t.Errorf("tier_downgrades %v outside its baseline %v–%v", v, lo, hi)
	}
	inScope := false
	for _, c := range list(run.Verification.Out, "checks") {
		if strings.HasPrefix(toJSON(c["name"]), `"metric tier_downgrades`) && c["passed"] == true && strings.Contains(toJSON(c["observed"]), "(normal)") {
			inScope = true
		}
	}
	if !inScope {
		t.Errorf("remediate did not judge tier_downgrades in line with baseline: %s", toJSON(run.Verification.Out["checks"]))
	}

	// The receipt: chain intact, the undo reverts the diff, both
	// savepoints recorded with the approved proposal and its step.
	if run.Receipt.Out["intact"] != true || !strings.HasPrefix(strings.TrimSpace(run.ReceiptVerify), "ok") || !strings.Contains(run.ReceiptVerify, run.IncidentID) {
		t.Errorf("receipt chain: intact %v; dw receipt verify: %q", run.Receipt.Out["intact"], run.ReceiptVerify)
	}
	md, _ := run.Receipt.Out["markdown"].(string)
	for _, want := range []string{"## Undo", "revert the deployment diff", run.Savepoint, run.StopSavepoint, "verified: all"} {
		if !strings.Contains(md, want) {
			t.Errorf("receipt markdown lacks %q", want)
		}
	}
	recorded, decided := false, map[string]bool{}
	for _, e := range list(run.Receipt.Out, "entries") {
		switch e["kind"] {
		case "proposal":
			if getPath(e, "facts", "details", "savepoint") == run.Savepoint && getPath(e, "facts", "details", "stop_with_savepoint") == run.StopSavepoint {
				recorded = true
			}
		case "decision":
			if getPath(e, "facts", "verdict") == "approve" {
				decided[toJSON(getPath(e, "facts", "person"))] = true
			}
		}
	}
	if !recorded || run.StopSavepoint == "" {
		t.Errorf("no proposal entry records both savepoints (%s, %s)", run.Savepoint, run.StopSavepoint)
	}
	for _, who := range []string{`"lena"`, `"tomas"`, `"priya"`} {
		if !decided[who] {
			t.Errorf("no approval by %s in the receipt", who)
		}
	}
}

// list is a JSON array of objects under key.
func list(v any, key string) []map[string]any {
	var out []map[string]any
	items, _ := getPath(v, key).([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}
