package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	incidentsagent "github.com/dataworkers/dw/agents/incidents"
	"github.com/dataworkers/dw/agents/quality"
	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/demo/seeded"
	"github.com/dataworkers/dw/internal/incidents"
)

// seededSeeds are the seeds each generated scenario runs with: the names,
// volumes, history length (21–28 days), fault time and size differ per
// seed, so a rule that passes is not tuned to one dataset.
var seededSeeds = []uint64{3, 1414, 271828}

// TestSeededReplayDuplicates: a logistics sink connector moved to
// at-least-once delivery replays and redelivers shipment events.
func TestSeededReplayDuplicates(t *testing.T) {
	runSeeded(t, seeded.ReplayDuplicates, checks.ProblemUniqueness)
}

// TestSeededUnitChange: a marketplace payout job's deploy writes amounts in
// currency units instead of cents; no team metric is defined, so only the
// one-scan profile's value distribution can see it.
func TestSeededUnitChange(t *testing.T) {
	runSeeded(t, seeded.UnitChange, checks.ProblemValues)
}

// TestSeededLatePartition: an IoT loading DAG's schedule change leaves the
// day's later hourly partitions unloaded.
func TestSeededLatePartition(t *testing.T) {
	runSeeded(t, seeded.LatePartition, checks.ProblemVolume)
}

// runSeeded runs a scenario kind with each seed: the incident through the
// agents over stdio (incident on the right table, the true cause first
// and credible, the blast radius exactly what is downstream), and the
// same generator without the fault over a healthy week, which opens no
// incident.
func runSeeded(t *testing.T, kind seeded.Kind, problem checks.Problem) {
	if testing.Short() {
		t.Skip("seeded scenarios spawn agent processes; skipped with -short")
	}
	for _, seed := range seededSeeds {
		t.Run(fmt.Sprintf("seed %d incident", seed), func(t *testing.T) {
			s, err := seeded.Generate(kind, seed, false)
			if err != nil {
				t.Fatal(err)
			}
			seededIncident(t, s, problem)
		})
		t.Run(fmt.Sprintf("seed %d healthy week", seed), func(t *testing.T) {
			s, err := seeded.Generate(kind, seed, true)
			if err != nil {
				t.Fatal(err)
			}
			seededHealthyWeek(t, s)
		})
	}
}

// seededEnv writes a dw.yaml naming one DuckDB file in a fresh home.
func seededEnv(t *testing.T) (env map[string]string, duckdbPath string) {
	t.Helper()
	home := t.TempDir()
	duckdbPath = filepath.Join(home, "warehouse.duckdb")
	cfg := filepath.Join(home, "dw.yaml")
	yaml := "home: " + home + "\nwarehouses:\n  - name: wh\n    kind: duckdb\n    path: " + duckdbPath + "\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"DW_CONFIG": cfg, "DW_HOME": home}, duckdbPath
}

// spawnAt spawns an agent whose clock reads at.
func spawnAt(t *testing.T, name string, env map[string]string, at time.Time) *agentProc {
	t.Helper()
	e := map[string]string{"DW_CLOCK": at.UTC().Format(time.RFC3339)}
	for k, v := range env {
		e[k] = v
	}
	return spawn(t, name, e)
}

// decodeOut decodes a tool's structured content, failing on a tool error.
func decodeOut[T any](t *testing.T, res *mcp.CallToolResult, tool string) T {
	t.Helper()
	var out T
	if res.IsError {
		t.Fatalf("%s: %s", tool, text(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: decode: %v\n%s", tool, err, raw)
	}
	return out
}

// asArgs turns a typed input into tool arguments.
func asArgs(t *testing.T, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func seededIncident(t *testing.T, s *seeded.Scenario, problem checks.Problem) {
	ctx := context.Background()
	env, path := seededEnv(t)
	if err := s.WriteDuckDB(ctx, path, s.CheckAt); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s seed %d: %s, history from %s, fault %s, check %s", s.Kind, s.Seed, s.Asset,
		s.HistoryStart.Format("Mon 01-02"), s.FaultAt.Format("Mon 01-02 15:04"), s.CheckAt.Format("15:04"))

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
	backfill := q.call(t, "run_quality_check", map[string]any{"table": s.Table.Ref(), "since": s.HistoryStart.Format(time.RFC3339),
		"until": s.Day.Format(time.RFC3339), "bucket": "hour", "no_incident": true})
	decodeOut[quality.RunOut](t, backfill, "run_quality_check (history)")
	res := q.call(t, "run_quality_check", map[string]any{"table": s.Table.Ref(), "period": "today", "bucket": "hour"})
	run := decodeOut[quality.RunOut](t, res, "run_quality_check")
	if !slices.Contains(run.Problems, problem) {
		t.Errorf("the check names problems %v, want %s among them:\n%s", run.Problems, problem, text(res))
	}
	if len(run.Incidents) != 1 || !run.Incidents[0].Opened {
		t.Fatalf("want one incident opened, got %+v:\n%s", run.Incidents, text(res))
	}

	res = inc.call(t, "diagnose_incident", map[string]any{"incident": run.Incidents[0].ID})
	out := decodeOut[incidentsagent.DiagnoseOut](t, res, "diagnose_incident")
	d := out.Diagnosis
	if !slices.Equal(d.Assets, []string{s.Asset}) {
		t.Errorf("incident on %v, want %s", d.Assets, s.Asset)
	}
	if d.Verdict != incidents.VerdictLikely || len(d.Causes) == 0 {
		t.Fatalf("verdict %s with %d causes, want likely_cause:\n%s", d.Verdict, len(d.Causes), text(res))
	}
	if top := d.Causes[0]; top.Change.Key != s.CauseKey || !top.Credible {
		var ranked []string
		for _, c := range d.Causes {
			ranked = append(ranked, fmt.Sprintf("%s %.3f %+v", c.Change.Key, c.Confidence, c.Factors))
		}
		t.Errorf("first cause %s (credible %v), want %s; onset %s–%s; ranking:\n%v\n%s", top.Change.Key, top.Credible, s.CauseKey,
			d.Onset.Format("15:04"), d.OnsetEnd.Format("15:04"), ranked, text(res))
	}
	for _, c := range d.Causes[:min(3, len(d.Causes))] {
		t.Logf("rank %d %s %s confidence %.3f credible %v relation %s", c.Rank, c.Change.Kind, c.Change.Assets, c.Confidence, c.Credible, c.Relation)
	}
	// The blast radius is exactly what is downstream of the table: the
	// decoys' assets and the upstream are not in it.
	var reached []string
	for _, a := range out.BlastRadius.Assets {
		reached = append(reached, a.ID)
	}
	want := slices.Clone(s.Downstream)
	slices.Sort(reached)
	slices.Sort(want)
	if !slices.Equal(reached, want) || out.BlastRadius.More {
		t.Errorf("blast radius %v (more %v), want exactly %v", reached, out.BlastRadius.More, want)
	}
}

// seededHealthyWeek judges each day of the week around the incident day at
// the same time of day as the incident's check, with the file holding what
// had landed by then, after the history before the week was recorded. No
// incident may open over the week (issue 14); the in-process test
// internal/checks TestSeededHealthyWeeksStayQuietAndIncidentsAreCaught
// runs the same week over many more seeds.
func seededHealthyWeek(t *testing.T, s *seeded.Scenario) {
	ctx := context.Background()
	env, path := seededEnv(t)
	checkTime := s.CheckAt.Sub(s.Day)
	var alarms []string
	var last time.Time
	for i, day := range s.HealthyWeek() {
		at := day.Add(checkTime)
		var err error
		if i == 0 {
			err = s.WriteDuckDB(ctx, path, at)
		} else {
			err = s.AppendDuckDB(ctx, path, last, at)
		}
		if err != nil {
			t.Fatal(err)
		}
		last = at
		q := spawnAt(t, "dw-quality", env, at)
		if i == 0 {
			decodeOut[quality.RunOut](t, q.call(t, "run_quality_check", map[string]any{"table": s.Table.Ref(),
				"since": s.HistoryStart.Format(time.RFC3339), "until": day.Format(time.RFC3339), "bucket": "hour", "no_incident": true}),
				"run_quality_check (history)")
		}
		res := q.call(t, "run_quality_check", map[string]any{"table": s.Table.Ref(), "period": "today", "bucket": "hour"})
		run := decodeOut[quality.RunOut](t, res, "run_quality_check")
		if len(run.Incidents) > 0 {
			alarms = append(alarms, fmt.Sprintf("%s at %s opened %+v:\n%s", day.Format("Mon 01-02"), at.Format("15:04"), run.Incidents, text(res)))
		}
		q.session.Close()
	}
	if len(alarms) > 0 {
		t.Errorf("the healthy week opened %d incidents, want none:\n%s", len(alarms), strings.Join(alarms, "\n"))
	}
}
