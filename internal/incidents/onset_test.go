package incidents

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// These tests judge the onset and credibility rules on incidents generated
// by seeded code the rules were not written against: a random layered
// lineage graph, a symptomatic table at its bottom, the true cause on a
// random upstream table inside the first anomalous hour, and decoys the
// same day with no lineage link, downstream, or upstream days earlier.

// genIncident is one generated incident.
type genIncident struct {
	g       *memGraph
	asset   string                         // the symptomatic table
	cause   *changelog.RecordChangeParams  // the true cause; nil in a scenario without one
	decoys  []changelog.RecordChangeParams // changes that did not cause it
	day     time.Time                      // midnight of the incident's day
	badFrom time.Time                      // start of the first anomalous hour
}

var genKinds = []string{"deploy", "config", "release", "connector", "partitioning", "pipeline"}

func generateIncident(seed uint64, withCause bool) genIncident {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	day := time.Date(2026, 11, 2+rng.IntN(20), 0, 0, 0, 0, time.UTC)
	gi := genIncident{g: newMemGraph(), day: day, badFrom: day.Add(time.Duration(6+rng.IntN(8)) * time.Hour)}
	// A layered DAG: every table below the first layer has one or two
	// parents in the layer above.
	layers, width := 4+rng.IntN(2), 3+rng.IntN(4)
	name := func(l, i int) string { return fmt.Sprintf("duckdb://wh.s%d.l%d_t%d", seed%97, l, i) }
	for l := 1; l < layers; l++ {
		for i := 0; i < width; i++ {
			parents := rng.Perm(width)[:1+rng.IntN(2)]
			for _, p := range parents {
				gi.g.edge(name(l-1, p), name(l, i))
			}
		}
	}
	gi.asset = name(layers-1, rng.IntN(width))
	dashboard := fmt.Sprintf("sigma://workbook/s%d-report", seed%97)
	gi.g.edge(gi.asset, dashboard)
	// An unrelated corner of the catalog.
	other := []string{}
	for i := 0; i < 4; i++ {
		other = append(other, fmt.Sprintf("duckdb://wh.other%d.t%d", seed%97, i))
	}
	gi.g.chain(other...)

	up := bfs([]string{gi.asset}, gi.g.in, 10)
	var upstream []string
	for a, h := range up {
		if h.Distance >= 1 {
			upstream = append(upstream, a)
		}
	}
	slices.Sort(upstream)
	if withCause {
		// Inside the first anomalous hour, after its start: the case the
		// old point onset plus 15 minutes of grace left out.
		at := gi.badFrom.Add(time.Duration(20+rng.IntN(39)) * time.Minute)
		gi.cause = &changelog.RecordChangeParams{At: at, Kind: "pipeline", System: "dagster",
			Assets:  []string{upstream[rng.IntN(len(upstream))]},
			Summary: fmt.Sprintf("seed %d: loader skips late partitions", seed), Actor: "platform"}
	}
	// Decoys: unrelated tables through the day, several inside the first
	// anomalous hour and just before it; one downstream; one upstream
	// generic deploy two days earlier.
	for i := 0; i < 6+rng.IntN(4); i++ {
		at := gi.badFrom.Add(time.Duration(-300+rng.IntN(370)) * time.Minute)
		gi.decoys = append(gi.decoys, changelog.RecordChangeParams{At: at, Kind: genKinds[rng.IntN(len(genKinds))], System: "dbt",
			Assets: []string{other[rng.IntN(len(other))]}, Summary: fmt.Sprintf("seed %d: unrelated change %d", seed, i)})
	}
	gi.decoys = append(gi.decoys,
		changelog.RecordChangeParams{At: gi.badFrom.Add(10 * time.Minute), Kind: "config", System: "sigma", Assets: []string{dashboard},
			Summary: fmt.Sprintf("seed %d: dashboard filter edited", seed)},
		changelog.RecordChangeParams{At: gi.badFrom.Add(-50 * time.Hour), Kind: "deploy", System: "dbt", Assets: []string{upstream[rng.IntN(len(upstream))]},
			Summary: fmt.Sprintf("seed %d: dbt deploy two days earlier", seed)})
	return gi
}

// window is a monitored window as run_quality_check reports it: hourly
// buckets from start to end, checked at observed.
type window struct {
	name              string
	start, end, check time.Time
}

func (gi genIncident) windows() []window {
	d := gi.day
	return []window{
		{"today", d, d.Add(24 * time.Hour), gi.badFrom.Add(3*time.Hour + 30*time.Minute)},
		{"last_24h", gi.badFrom.Add(-20 * time.Hour), gi.badFrom.Add(4 * time.Hour), gi.badFrom.Add(4*time.Hour + 5*time.Minute)},
		{"since the hour before until the next", gi.badFrom.Add(-time.Hour), gi.badFrom.Add(2 * time.Hour), gi.badFrom.Add(2*time.Hour + 20*time.Minute)},
	}
}

// report builds the check report a volume problem starting at badFrom
// gives over w: healthy hours pass, bad ones are anomalous, buckets not
// yet ended are left out.
func (gi genIncident) report(w window) *checks.Report {
	r := checks.MetricResult{Check: "row_count", Metric: "row_count", Problem: checks.ProblemVolume, Status: checks.Anomalous,
		Message: "row count below its usual range"}
	for b := w.start; b.Before(w.end) && !b.Add(time.Hour).After(w.check); b = b.Add(time.Hour) {
		st := checks.Pass
		if !b.Before(gi.badFrom) {
			st = checks.Anomalous
		}
		r.Buckets = append(r.Buckets, checks.BucketResult{Start: b, Value: 1000, Status: st})
	}
	return &checks.Report{ObservedAt: w.check, Window: &checks.Window{Start: w.start, End: w.end, Grain: checks.Hour},
		Status: checks.Anomalous, Results: []checks.MetricResult{r}}
}

// diagnoseThrough records the generated changes in a fresh store, reports
// the window's check and diagnoses the incident it opens.
func diagnoseThrough(t *testing.T, db *store.DB, gi genIncident, w window) *Diagnosis {
	t.Helper()
	ctx := context.Background()
	s, _ := newService(t, db, w.check, gi.g)
	if gi.cause != nil {
		mustRecord(t, s, *gi.cause)
	}
	for _, d := range gi.decoys {
		mustRecord(t, s, d)
	}
	syms := CheckSymptoms(gi.report(w), gi.asset)
	if len(syms) != 1 || !syms[0].At.Equal(gi.badFrom) {
		t.Fatalf("window %s: symptoms %+v, want one starting at %s", w.name, syms, gi.badFrom)
	}
	rep := mustReport(t, s, syms...)
	if len(rep.Incidents) != 1 {
		t.Fatalf("window %s: %d incidents", w.name, len(rep.Incidents))
	}
	d, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: rep.Incidents[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func changeIDsBySummary(cs []Cause) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = fmt.Sprintf("%s@%.3f", c.Change.Summary, c.Confidence)
	}
	return out
}

func TestDiagnoseOnsetIntervalSameRankingThroughEveryWindow(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		gi := generateIncident(seed, true)
		var first []string
		for _, w := range gi.windows() {
			d := diagnoseThrough(t, storetest.SQLite(t), gi, w)
			if !d.Onset.Equal(gi.badFrom) || !d.OnsetEnd.Equal(gi.badFrom.Add(time.Hour)) {
				t.Fatalf("seed %d window %s: onset %s–%s, want the first anomalous hour %s", seed, w.name, d.Onset, d.OnsetEnd, gi.badFrom)
			}
			if len(d.Causes) == 0 || d.Causes[0].Change.Summary != gi.cause.Summary {
				t.Fatalf("seed %d window %s: top cause is not the true cause at %s; ranking %v", seed, w.name,
					gi.cause.At.Format("15:04"), changeIDsBySummary(d.Causes))
			}
			top := d.Causes[0]
			if d.Verdict != VerdictLikely || !top.Credible || top.Factors.Timing != 1 {
				t.Fatalf("seed %d window %s: verdict %s credible %v timing %v", seed, w.name, d.Verdict, top.Credible, top.Factors.Timing)
			}
			for _, c := range d.Causes[1:] {
				if c.Credible && c.Relation != RelationUpstream && c.Relation != RelationSame {
					t.Fatalf("seed %d: %s credible without a lineage path", seed, c.Change.Summary)
				}
			}
			got := changeIDsBySummary(d.Causes)
			if first == nil {
				first = got
			} else if !slices.Equal(first, got) {
				t.Fatalf("seed %d: window %s ranks %v, the first window ranked %v", seed, w.name, got, first)
			}
		}
	}
}

func TestDiagnoseNoCredibleCauseWhenOnlyUnrelatedChanges(t *testing.T) {
	for seed := uint64(21); seed <= 28; seed++ {
		gi := generateIncident(seed, false)
		// Only the decoys with no lineage link or downstream: drop the
		// upstream deploy so nothing has a path.
		gi.decoys = gi.decoys[:len(gi.decoys)-1]
		db := storetest.SQLite(t)
		w := gi.windows()[0]
		d := diagnoseThrough(t, db, gi, w)
		if d.Verdict != VerdictNone || d.Considered != len(gi.decoys) || len(d.Causes) == 0 {
			t.Fatalf("seed %d: verdict %s considered %d of %d", seed, d.Verdict, d.Considered, len(gi.decoys))
		}
		for _, c := range d.Causes {
			if c.Credible {
				t.Fatalf("seed %d: %s (%s, %.2f) called credible", seed, c.Change.Summary, c.Relation, c.Confidence)
			}
		}
		s, _ := newService(t, db, w.check, gi.g)
		inc, err := s.GetIncident(context.Background(), d.IncidentID)
		if err != nil {
			t.Fatal(err)
		}
		if inc.Verdict != VerdictNone || inc.Cause() != nil || inc.CitedCause() != nil {
			t.Fatalf("seed %d: stored verdict %s cause %v", seed, inc.Verdict, inc.Cause())
		}
		// A proposal cites no cause: its why and rationale name none of
		// the considered changes.
		draft, err := s.DraftProposal(context.Background(), DraftParams{IncidentID: d.IncidentID, Kind: "hold",
			What: "hold the report", Targets: []string{gi.asset}, Undo: "resume it"})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range d.Causes {
			if strings.Contains(draft.Why, c.Change.Summary) || slices.ContainsFunc(draft.Rationale, func(r string) bool { return strings.Contains(r, c.Change.Summary) }) {
				t.Fatalf("seed %d: proposal cites %q: %+v", seed, c.Change.Summary, draft)
			}
		}
		if _, err := s.DraftProposal(context.Background(), DraftParams{IncidentID: d.IncidentID, Kind: "hold",
			What: "hold the report", Targets: []string{gi.asset}, Undo: "resume it", CauseRank: 1}); err == nil {
			t.Fatalf("seed %d: a proposal cited a cause below the credibility line", seed)
		}
	}
}

func TestAttributeCauseOverridesAndCorrects(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		gi := generateIncident(31, false)
		w := gi.windows()[0]
		d := diagnoseThrough(t, db, gi, w)
		if d.Verdict != VerdictNone {
			t.Fatalf("verdict %s", d.Verdict)
		}
		s, clk := newService(t, db, w.check, gi.g)
		// The person knows better: an unrecorded-lineage change was it.
		named := d.Causes[len(d.Causes)-1].Change
		for _, bad := range []AttributeParams{
			{IncidentID: d.IncidentID, ChangeID: named.ID, Actor: "maria"},
			{IncidentID: d.IncidentID, ChangeID: named.ID, Reason: "x"},
			{IncidentID: d.IncidentID, ChangeID: 0, Actor: "maria", Reason: "x"},
			{IncidentID: d.IncidentID, ChangeID: 999999, Actor: "maria", Reason: "x"},
			{IncidentID: "INC-999", ChangeID: named.ID, Actor: "maria", Reason: "x"},
			{IncidentID: d.IncidentID, ChangeID: named.ID, Actor: "maria", Reason: "a\x00b"},
		} {
			if _, err := s.AttributeCause(ctx, bad); err == nil {
				t.Fatalf("attribution %+v accepted", bad)
			}
		}
		if inc, _ := s.GetIncident(ctx, d.IncidentID); inc.Attributed != nil {
			t.Fatalf("a refused attribution left %+v", inc.Attributed)
		}
		inc, err := s.AttributeCause(ctx, AttributeParams{IncidentID: d.IncidentID, ChangeID: named.ID, Actor: "maria",
			Reason: "the loader reads this table through a view the catalog does not know"})
		if err != nil {
			t.Fatal(err)
		}
		if inc.Verdict != VerdictAttributed || inc.Attributed.Actor != "maria" || inc.Cause().ID != named.ID || inc.Attributed.Replaced != 0 {
			t.Fatalf("after attribution: verdict %s attributed %+v", inc.Verdict, inc.Attributed)
		}
		f, actor := inc.CauseFacts("dw-incidents")
		if f == nil || actor != "maria" || f.AttributedBy != "maria" || f.ChangeID != named.ID {
			t.Fatalf("receipt facts %+v by %s", f, actor)
		}
		draft, err := s.DraftProposal(ctx, DraftParams{IncidentID: d.IncidentID, Kind: "hold", What: "hold", Targets: []string{gi.asset}, Undo: "resume"})
		if err != nil || !strings.Contains(draft.Why, named.Summary) || !strings.Contains(draft.Why, "maria") {
			t.Fatalf("draft %+v %v", draft, err)
		}
		// A re-diagnosis keeps what the person said.
		again, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: d.IncidentID})
		if err != nil || again.Verdict != VerdictAttributed || again.Attributed == nil || again.Attributed.Change.ID != named.ID {
			t.Fatalf("re-diagnosis: %+v %v", again, err)
		}
		// A correction names another change and keeps the first.
		clk.Advance(time.Minute)
		other := d.Causes[0].Change
		inc, err = s.AttributeCause(ctx, AttributeParams{IncidentID: d.IncidentID, ChangeID: other.ID, Actor: "li", Reason: "checked the loader logs"})
		if err != nil {
			t.Fatal(err)
		}
		if inc.Attributed.Change.ID != other.ID || inc.Attributed.Actor != "li" || inc.Attributed.Replaced != named.ID {
			t.Fatalf("correction: %+v", inc.Attributed)
		}
		last := inc.Timeline[len(inc.Timeline)-1]
		if last.Actor != "li" || last.From != last.To || !strings.Contains(last.Note, "corrected") {
			t.Fatalf("timeline %+v", last)
		}
	})
}

// TestDiagnoseLazyWalkRanksExactlyAsWalkingEveryChange: on generated
// graphs with column reads and many changes that remove fields, the
// ranking with the lazy field-reader walk equals the one walking every
// changed asset, cause by cause.
func TestDiagnoseLazyWalkRanksExactlyAsWalkingEveryChange(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(41); seed <= 46; seed++ {
		gi := generateIncident(seed, true)
		rng := rand.New(rand.NewPCG(seed, 99))
		// Column reads on random edges, and changes removing those fields
		// on random tables (upstream, unrelated, the symptom itself).
		var assets []string
		for a := range gi.g.out {
			assets = append(assets, a)
		}
		slices.Sort(assets)
		for i := 0; i < 15; i++ {
			from := assets[rng.IntN(len(assets))]
			to := gi.g.out[from][rng.IntN(len(gi.g.out[from]))]
			gi.g.reads(from, to, fmt.Sprintf("f%d", rng.IntN(4)), "")
		}
		for i := 0; i < 40; i++ {
			gi.decoys = append(gi.decoys, changelog.RecordChangeParams{At: gi.badFrom.Add(-time.Duration(rng.IntN(60*48)) * time.Minute), Kind: genKinds[rng.IntN(len(genKinds))],
				System: "dbt", Assets: []string{assets[rng.IntN(len(assets))]}, Summary: fmt.Sprintf("seed %d: field change %d", seed, i),
				Fields: []changelog.FieldChange{{Name: fmt.Sprintf("f%d", rng.IntN(4)), How: changelog.FieldRemoved}}})
		}
		db := storetest.SQLite(t)
		d := diagnoseThrough(t, db, gi, gi.windows()[0])
		boundWalks = false
		full, err := Diagnose(ctx, db, gi.g, d.IncidentID, DiagnoseOptions{Clock: clockAt(gi.windows()[0].check)})
		boundWalks = true
		if err != nil {
			t.Fatal(err)
		}
		lazy, err := Diagnose(ctx, db, gi.g, d.IncidentID, DiagnoseOptions{Clock: clockAt(gi.windows()[0].check)})
		if err != nil {
			t.Fatal(err)
		}
		if len(full.Causes) != len(lazy.Causes) {
			t.Fatalf("seed %d: %d causes lazily, %d walking all", seed, len(lazy.Causes), len(full.Causes))
		}
		readers := 0
		for i := range full.Causes {
			f, l := full.Causes[i], lazy.Causes[i]
			if f.Change.ID != l.Change.ID || f.Confidence != l.Confidence || !slices.Equal(f.Readers, l.Readers) {
				t.Fatalf("seed %d rank %d: lazy %s (%.3f) vs full %s (%.3f)", seed, i+1, l.Change.Summary, l.Confidence, f.Change.Summary, f.Confidence)
			}
			readers += len(f.Readers)
		}
		t.Logf("seed %d: %d causes, %d readers named", seed, len(full.Causes), readers)
	}
}

func clockAt(t time.Time) clock.Clock { return clock.NewFake(t) }
