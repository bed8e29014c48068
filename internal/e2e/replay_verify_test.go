package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	incidentsagent "github.com/dataworkers/dw/agents/incidents"
	"github.com/dataworkers/dw/agents/quality"
	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/demo/seeded"
	"github.com/dataworkers/dw/internal/incidents"
)

// TestReplayFixVerifiedThroughTheAgents: the seeded logistics incident
// (a sink connector moved to at-least-once delivery wrote event ids twice)
// goes through the agents over stdio as a team would take it: the check
// opens the incident, it is diagnosed, a hold is proposed with
// propose_remediation, its approver approves it at the terminal with
// `dw approve`, the owners repair the table, and remediate verifies. A
// repair whose replay wrote copies of events that had landed an hour
// before the fault is escalated on the declared key, never verified; the
// same repair without the copies is verified.
func TestReplayFixVerifiedThroughTheAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("drives three agents and dw over stdio; skipped with -short")
	}
	login := config.CurrentOSUser()
	if login == "" {
		t.Skip("this uid has no account, so nobody can approve at the terminal")
	}
	for _, copies := range []int{15, 0} {
		t.Run(fmt.Sprintf("%d copies", copies), func(t *testing.T) {
			replayFix(t, login, copies)
		})
	}
}

func replayFix(t *testing.T, login string, copies int) {
	ctx := context.Background()
	s, err := seeded.Generate(seeded.ReplayDuplicates, seededSeeds[0], false)
	if err != nil {
		t.Fatal(err)
	}
	// The repair below rewrites rows by their key, the table's first column.
	if !strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s.Table.Columns), "(")), "event_id ") {
		t.Fatalf("the replay table's first column is not event_id: %s", s.Table.Columns)
	}
	home := t.TempDir()
	path := filepath.Join(home, "warehouse.duckdb")
	cfgPath := filepath.Join(home, "dw.yaml")
	yaml := fmt.Sprintf(`home: %s
warehouses:
  - {name: wh, kind: duckdb, path: %s}
people:
  - {id: ops, name: Ops Owner, os_users: [%q]}
domains:
  - {name: logistics, assets: ["duckdb://%s.*"], owners: [ops], autonomy: L2}
`, home, path, login, s.Table.Schema)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DW_CONFIG": cfgPath, "DW_HOME": home}
	if err := s.WriteDuckDB(ctx, path, s.CheckAt); err != nil {
		t.Fatal(err)
	}

	cat := spawnAt(t, "dw-context-catalog", env, s.CheckAt)
	if res := cat.call(t, "record_lineage", asArgs(t, s.Lineage)); res.IsError {
		t.Fatalf("record_lineage: %s", text(res))
	}
	inc := spawnAt(t, "dw-incidents", env, s.CheckAt)
	for _, c := range s.Changes {
		if res := inc.call(t, "record_change", asArgs(t, c)); res.IsError {
			t.Fatalf("record_change %s: %s", c.Key, text(res))
		}
	}
	q := spawnAt(t, "dw-quality", env, s.CheckAt)
	decodeOut[map[string]any](t, q.call(t, "set_quality_expectations", map[string]any{"table": s.Table.Ref(),
		"key": []string{"event_id"}, "event_time": "event_at", "ingest_time": "ingested_at"}), "set_quality_expectations")
	decodeOut[quality.RunOut](t, q.call(t, "run_quality_check", map[string]any{"table": s.Table.Ref(), "since": s.HistoryStart.Format(time.RFC3339),
		"until": s.Day.Format(time.RFC3339), "bucket": "hour", "no_incident": true}), "run_quality_check (history)")
	res := q.call(t, "run_quality_check", map[string]any{"table": s.Table.Ref(), "period": "today", "bucket": "hour"})
	run := decodeOut[quality.RunOut](t, res, "run_quality_check")
	if len(run.Incidents) != 1 || !slices.Contains(run.Problems, checks.ProblemUniqueness) {
		t.Fatalf("want one incident on repeated keys, got %+v (problems %v):\n%s", run.Incidents, run.Problems, text(res))
	}
	id := run.Incidents[0].ID
	diag := decodeOut[incidentsagent.DiagnoseOut](t, inc.call(t, "diagnose_incident", map[string]any{"incident": id}), "diagnose_incident")
	asset := diag.Diagnosis.Assets[0]

	proposed := decodeOut[incidentsagent.ProposeOut](t, inc.call(t, "propose_remediation", map[string]any{"incident": id, "proposals": []map[string]any{{
		"kind": "hold", "targets": []string{asset},
		"what": "Hold reads of " + s.Table.Ref() + " until the redelivered events are removed", "undo": "release the hold"}}}), "propose_remediation")
	if len(proposed.Proposals) != 1 || proposed.Proposals[0].Approver != "ops" || proposed.Proposals[0].Domain != "logistics" {
		t.Fatalf("proposals %+v, want one for ops in logistics", proposed.Proposals)
	}
	dw := exec.Command(filepath.Join(binDir, "dw"), "approve", proposed.Proposals[0].ID, "--reason", "hold until the table is repaired")
	dw.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DW_HOME=" + home, "DW_CONFIG=" + cfgPath}
	if out, err := dw.CombinedOutput(); err != nil {
		t.Fatalf("dw approve as %s: %v\n%s", login, err, out)
	}

	// The repair: every event once, as first landed; then, for the broken
	// arm, a replay from offsets reset an hour back writes exact copies of
	// events of the hour before the fault again (redelivered as they
	// were, so only their keys say so).
	fixAt := s.CheckAt.Add(time.Minute)
	seen := map[any]bool{}
	var rows []seeded.Row
	for _, r := range s.Table.Rows {
		if !seen[r.Values[0]] {
			seen[r.Values[0]] = true
			rows = append(rows, r)
		}
	}
	from := s.FaultAt.Add(-time.Hour).Truncate(time.Hour)
	replayed := 0
	for _, r := range slices.Clone(rows) {
		if replayed == copies {
			break
		}
		if !r.Landed.Before(from) && r.Landed.Before(from.Add(time.Hour)) {
			rows = append(rows, seeded.Row{Values: slices.Clone(r.Values), Landed: fixAt})
			replayed++
		}
	}
	if replayed != copies {
		t.Fatalf("only %d events landed in the hour before the fault, want %d to copy", replayed, copies)
	}
	s.Table.Rows = rows
	if err := s.WriteDuckDB(ctx, path, fixAt); err != nil {
		t.Fatal(err)
	}

	after := spawnAt(t, "dw-incidents", env, fixAt)
	out := decodeOut[incidentsagent.RemediateOut](t, after.call(t, "remediate", map[string]any{"incident": id,
		"note": "connector back to exactly-once; redelivered events removed"}), "remediate")
	if copies == 0 {
		if !out.Verified || out.Outcome != incidents.OutcomeVerified || out.Status != string(incidents.StatusVerified) {
			t.Fatalf("the clean repair is %s (%s): %s", out.Outcome, out.Status, out.Reason)
		}
		return
	}
	if out.Verified || out.Outcome != incidents.OutcomeEscalated || out.Status != string(incidents.StatusEscalated) {
		t.Fatalf("a replay that wrote %d repeated keys is %s (%s): %s", copies, out.Outcome, out.Status, out.Reason)
	}
	if !slices.Equal(out.EscalatedTo, []string{"ops"}) {
		t.Errorf("escalated to %v, want ops, who approved the fix", out.EscalatedTo)
	}
	var key []incidents.CheckResult
	for _, c := range out.Checks {
		if c.Required && !c.Passed && c.Asset == asset && strings.HasPrefix(c.Name, "uniqueness(event_id)") {
			key = append(key, c)
		}
	}
	if len(key) == 0 {
		t.Errorf("no failing declared-key check on %s among %+v", asset, out.Checks)
	}
	// Only the keys are wrong: every other check of the repaired table passes.
	for _, c := range out.Checks {
		if !c.Passed && !strings.HasPrefix(c.Name, "uniqueness(event_id)") {
			t.Errorf("check %s failed (%s), but only the repeated keys are wrong", c.Name, c.Observed)
		}
	}
	for _, a := range out.Assertions {
		if !a.Passed && !strings.HasPrefix(a.Name, "uniqueness:") {
			t.Errorf("assertion %s failed (%s), but only the repeated keys are wrong", a.Name, a.Observed)
		}
	}
}
