package incidents

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// loadTrips writes loyalty.trips into the story's DuckDB file: ten days of
// hourly rides and ride starts that move together (seeded counts), and at
// the bad hour every ride written twice (dup = true), the way an
// at-least-once replay does: a quarter more rides.
func loadTrips(t *testing.T, s *story, bad time.Time) {
	t.Helper()
	db, err := duckdb.OpenWrite(s.ctx, s.whPath, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(s.ctx, `CREATE TABLE loyalty.trips (ts TIMESTAMP, kind VARCHAR, dup BOOLEAN)`); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 8))
	tx, err := db.BeginTx(s.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ins := func(at time.Time, kind string, n int, dup bool) {
		if _, err := tx.ExecContext(s.ctx, `INSERT INTO loyalty.trips SELECT ?::TIMESTAMP + INTERVAL (i) SECOND, ?, ? FROM range(?) t(i)`,
			at.UTC().Format("2006-01-02 15:04:05"), kind, dup, n); err != nil {
			t.Fatal(err)
		}
	}
	for h := bad.Add(-10 * 24 * time.Hour); h.Before(bad.Add(3 * time.Hour)); h = h.Add(time.Hour) {
		// Counts vary widely from hour to hour, but rides and starts
		// always match: a quarter more rides is no anomaly of rides
		// alone, only of their ratio.
		n := 600 + rng.IntN(1200)
		ins(h, "ride", n, false)
		ins(h, "start", n, false)
		if h.Equal(bad) {
			ins(h, "ride", 300, true)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func fixTrips(t *testing.T, s *story) {
	t.Helper()
	db, err := duckdb.OpenWrite(s.ctx, s.whPath, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func(db *sql.DB) { db.Close() }(db)
	if _, err := db.ExecContext(s.ctx, `DELETE FROM loyalty.trips WHERE dup`); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyPartnerMetricsInEitherOrder: a replay doubled the rides of one
// hour, so rides moved apart from ride_starts. After the fix, verification
// must recompute both before judging either: whichever metric declares the
// pairing (and so whichever is re-run first), the verdict is verified.
// Before, re-running the partner first judged it against the stale doubled
// rides and escalated a fix that worked.
func TestVerifyPartnerMetricsInEitherOrder(t *testing.T) {
	for _, declaredOn := range []string{"trips_rides", "trips_starts"} {
		t.Run("moves_with on "+declaredOn, func(t *testing.T) {
			s := newStory(t, "loyalty")
			ctx, h := s.ctx, s.h
			bad := s.tl.Day.Add(14 * time.Hour)
			loadTrips(t, s, bad)
			other := map[string]string{"trips_rides": "trips_starts", "trips_starts": "trips_rides"}
			for _, name := range []string{other[declaredOn], declaredOn} {
				kind := "ride"
				if name == "trips_starts" {
					kind = "start"
				}
				p := incidents.DefineMetricParams{Name: name, Description: kind + "s per hour", Asset: "duckdb://loyalty.trips", Warehouse: "demo",
					SQL:         fmt.Sprintf("SELECT date_trunc('hour', ts) AS hour, count(*) AS n FROM loyalty.trips WHERE kind = '%s' GROUP BY 1", kind),
					ValueColumn: "n", TimeColumn: "hour", SymptomKind: "volume"}
				if name == declaredOn {
					p.MovesWith = []string{other[declaredOn]}
				}
				if _, _, err := h.defineMetric(ctx, p); err != nil {
					t.Fatal(err)
				}
				if _, _, err := h.monitorMetrics(ctx, MonitorIn{MonitorParams: incidents.MonitorParams{Metric: name, Backfill: true,
					Window: &incidents.Window{Start: bad.Add(-10 * 24 * time.Hour), End: bad}}}); err != nil {
					t.Fatal(err)
				}
			}
			s.clk.Set(bad.Add(65 * time.Minute))
			var id string
			for _, name := range []string{"trips_rides", "trips_starts"} {
				mon, _, err := h.monitorMetrics(ctx, MonitorIn{MonitorParams: incidents.MonitorParams{Metric: name,
					Window: &incidents.Window{Start: bad, End: bad.Add(time.Hour)}}})
				if err != nil {
					t.Fatal(err)
				}
				for _, ref := range mon.Incidents {
					id = ref.ID
				}
			}
			inc, err := s.env().svc.GetIncident(ctx, id)
			if err != nil || id == "" {
				t.Fatalf("no incident: %v", err)
			}
			// Only the pair moved: the divergence is the one symptom, so
			// its partner is re-run before the metric that moved.
			if len(inc.Symptoms) != 1 || inc.Symptoms[0].Kind != incidents.SymptomDivergence {
				t.Fatalf("symptoms %+v, want one divergence", inc.Symptoms)
			}
			if _, _, err := h.diagnose(ctx, DiagnoseIn{Incident: id}); err != nil {
				t.Fatal(err)
			}
			prop, _, err := h.propose(ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{{Kind: "hold",
				What: "Pause the Braze sync until trips are deduplicated", Targets: []string{"hightouch://sync/braze-tier-changes"},
				Undo: "resume the sync in Hightouch"}}})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range prop.Proposals {
				s.decide(p.ID, p.Approver, approvals.VerdictApprove)
			}
			fixTrips(t, s)
			s.clk.Set(bad.Add(3*time.Hour + 5*time.Minute))
			rem, summary, err := h.remediate(ctx, RemediateIn{Incident: id, Note: "duplicates removed"})
			if err != nil {
				t.Fatal(err)
			}
			if !rem.Verified || rem.Outcome != incidents.OutcomeVerified {
				t.Fatalf("a fix that worked is %s: %s\n%s", rem.Outcome, rem.Reason, summary)
			}
			for _, a := range rem.Assertions {
				if !a.Passed {
					t.Fatalf("assertion %+v failed", a)
				}
			}
		})
	}
}
