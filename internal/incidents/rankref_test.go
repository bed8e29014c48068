package incidents

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// referenceRanking is the ranking as diagnosis made it before it scored
// the window while reading it: every change read in full, every one
// scored exactly (every field walk done), all sorted, the first kept.
func referenceRanking(t *testing.T, db *store.DB, g Graph, inc *Incident, opts DiagnoseOptions) []Cause {
	t.Helper()
	r, err := newRanker(context.Background(), db, g, inc, opts.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	all, _ := sortAll(t, r, db)
	return all
}

// diagnoseAndSortAll diagnoses the incident and returns the diagnosis,
// the incident as it then stands and its reference ranking.
func diagnoseAndSortAll(t *testing.T, db *store.DB, g Graph, id string, opts DiagnoseOptions) (*Diagnosis, *Incident, []Cause) {
	t.Helper()
	ctx := context.Background()
	d, err := Diagnose(ctx, db, g, id, opts)
	if err != nil {
		t.Fatal(err)
	}
	inc, err := loadIncident(ctx, db, id)
	if err != nil {
		t.Fatal(err)
	}
	return d, inc, referenceRanking(t, db, g, inc, opts)
}

// sortAll is referenceRanking with r's ranker, ranked and calibrated as a
// diagnosis's causes are, and the number of changes in the window.
func sortAll(t *testing.T, r *ranker, db *store.DB) ([]Cause, int) {
	t.Helper()
	inc, opts := r.inc, r.opts
	changes, err := changelog.LoadWindow(context.Background(), db, inc.Onset.Add(-opts.Lookback), inc.OnsetEnd.Add(opts.Grace+time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	all := make([]Cause, len(changes))
	for i := range changes {
		if all[i], err = r.score(&changes[i], true); err != nil {
			t.Fatal(err)
		}
	}
	gap := func(c Cause) time.Duration { return absDuration(inc.Onset.Sub(c.At)) }
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.score != b.score {
			return a.score > b.score
		}
		if gap(a) != gap(b) {
			return gap(a) < gap(b)
		}
		return a.Change.ID < b.Change.ID
	})
	all = all[:min(len(all), opts.MaxCauses)]
	for i := range all {
		all[i].Rank = i + 1
	}
	calibrate(all)
	return all, len(changes)
}

// seededLayers is a layered graph of layers × width assets, each below
// the first layer with one or two parents drawn from the layer above (an
// edge is stored once, so two equal draws make one edge).
func seededLayers(rng *rand.Rand, layers, width int, asset func(l, i int) string) *memGraph {
	g := newMemGraph()
	for l := 1; l < layers; l++ {
		for i := range width {
			p1, p2 := rng.IntN(width), rng.IntN(width)
			g.edge(asset(l-1, p1), asset(l, i))
			if p2 != p1 {
				g.edge(asset(l-1, p2), asset(l, i))
			}
		}
	}
	return g
}

// Ranking while reading the window (exact scores straight into the
// ranking, field walks only for the bounds that could still enter it)
// keeps exactly the changes, in the order, with the scores and readers
// that scoring and sorting every change in full gives, on seeded windows
// dense with ties: changes on the same minute, the same assets and the
// same removed fields, many upstream of the symptom and read on the path.
func TestStreamedRankingMatchesFullSort(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		const layers, width = 8, 12
		asset := func(l, i int) string { return fmt.Sprintf("duckdb://l%d.t%02d", l, i) }
		rng := rand.New(rand.NewPCG(18, 3))
		g := seededLayers(rng, layers, width, asset)
		// Jobs on many edges read some of the fields the changes remove.
		for range 60 {
			l, i := rng.IntN(layers-1), rng.IntN(width)
			if out := g.out[asset(l, i)]; len(out) > 0 {
				g.reads(asset(l, i), out[rng.IntN(len(out))], fmt.Sprintf("f%d", rng.IntN(3)), "")
			}
		}
		onset := tue(14, 0)
		s, _ := newService(t, db, onset.Add(time.Hour), g)
		kinds := []changelog.ChangeKind{changelog.ChangeDeploy, changelog.ChangeSchemaVersion, changelog.ChangeRestore, changelog.ChangePipeline, changelog.ChangeConnector}
		for i := range 400 {
			p := changelog.RecordChangeParams{
				// Minutes, and few of them, so many changes tie on time.
				At:   onset.Add(-time.Duration(rng.IntN(12*60/7)*7) * time.Minute),
				Kind: string(kinds[rng.IntN(len(kinds))]), System: "seeded",
				Assets: []string{asset(rng.IntN(layers), rng.IntN(width))}, Summary: fmt.Sprintf("change %d", i),
				StateSkipped: rng.IntN(4) == 0,
			}
			if p.Kind != string(changelog.ChangeRestore) {
				p.StateSkipped = false
			}
			switch rng.IntN(3) {
			case 0:
				p.Fields = []changelog.FieldChange{{Name: fmt.Sprintf("f%d", rng.IntN(3)), How: changelog.FieldRemoved}}
			case 1:
				p.Fields = []changelog.FieldChange{{Name: "g", How: changelog.FieldAdded}, {Name: fmt.Sprintf("f%d", rng.IntN(3)), How: changelog.FieldTypeChanged}}
			}
			mustRecord(t, s, p)
			if i%4 == 0 {
				// The same change twice: a tie on score and time that
				// only the id breaks.
				p.Summary += " again"
				mustRecord(t, s, p)
			}
		}
		id := mustReport(t, s, Symptom{Kind: SymptomNulls, Asset: asset(layers-1, 3), Column: "total", Observed: 0.2, At: onset}).Incidents[0].ID
		for _, maxCauses := range []int{1, 3, DefaultMaxCauses, 50} {
			for _, bound := range []bool{true, false} {
				func() {
					defer func(was bool) { boundWalks = was }(boundWalks)
					boundWalks = bound
					opts := DiagnoseOptions{Clock: clock.NewFake(onset.Add(time.Hour)), MaxCauses: maxCauses}
					d, _, want := diagnoseAndSortAll(t, db, g, id, opts)
					if len(d.Causes) != len(want) || len(want) != maxCauses {
						t.Fatalf("max %d, bound %v: %d causes, the full sort keeps %d", maxCauses, bound, len(d.Causes), len(want))
					}
					readers := 0
					for i, w := range want {
						got := d.Causes[i]
						if got.Change.ID != w.Change.ID || got.score != w.score || got.Factors != w.Factors ||
							fmt.Sprint(got.Readers) != fmt.Sprint(w.Readers) || fmt.Sprint(got.Evidence) != fmt.Sprint(w.Evidence) {
							t.Fatalf("max %d, bound %v, rank %d: change %d (score %.3f, factors %+v, readers %v), full sort change %d (%.3f, %+v, %v)",
								maxCauses, bound, i+1, got.Change.ID, got.score, got.Factors, got.Readers, w.Change.ID, w.score, w.Factors, w.Readers)
						}
						readers += len(w.Readers)
					}
					if readers == 0 {
						t.Fatalf("max %d: no kept cause names a reader: the scenario does not exercise the field walk", maxCauses)
					}
				}()
			}
		}
	})
}

// The bound from a change's time and assets (a change whose lineage and
// timing keep it under the ranking's last score is never read in full)
// keeps exactly the full sort's ranking on windows built for it: most
// changes unrelated to the symptom, downstream of it or days old; times
// on a coarse grid and many changes that score their bound exactly (a
// removed symptomatic column, of the kind that was the top cause before),
// so scores tie on the last kept one; the symptom in the middle of the
// graph so there is a downstream. Several windows, which between them
// must leave some changes unread, so the rule is exercised, not only
// present.
func TestCutRankingMatchesFullSort(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		const layers, width = 7, 6
		asset := func(l, i int) string { return fmt.Sprintf("duckdb://l%d.t%02d", l, i) }
		rng := rand.New(rand.NewPCG(41, 7))
		g := seededLayers(rng, layers, width, asset)
		for range 20 {
			l, i := rng.IntN(layers-1), rng.IntN(width)
			if out := g.out[asset(l, i)]; len(out) > 0 {
				g.reads(asset(l, i), out[rng.IntN(len(out))], "f1", "")
			}
		}
		symptom := asset(layers/2, 4)
		s, clk := newService(t, db, tue(14, 0), g)
		kinds := []changelog.ChangeKind{changelog.ChangeDeploy, changelog.ChangeSchemaVersion, changelog.ChangeSchemaVersion,
			changelog.ChangeRestore, changelog.ChangePipeline, changelog.ChangeConnector, changelog.ChangePartitioning}
		cut := 0
		// Each window is ten days after the last, past its lookback.
		for w := range 4 {
			onset := tue(14, 0).Add(time.Duration(w) * 10 * 24 * time.Hour)
			// An earlier incident on the symptom whose top cause removed
			// the column, so such changes score the history factor too.
			earlier := onset.Add(-5 * 24 * time.Hour)
			clk.Set(earlier.Add(time.Hour))
			mustRecord(t, s, changelog.RecordChangeParams{At: earlier.Add(-10 * time.Minute), Kind: "schema_version", System: "seeded",
				Assets: []string{symptom}, Fields: []changelog.FieldChange{{Name: "f1", How: changelog.FieldRemoved}}, Summary: "the earlier cause"})
			old := mustReport(t, s, Symptom{Kind: SymptomNulls, Asset: symptom, Column: "f1", Observed: 0.3, At: earlier}).Incidents[0].ID
			if _, err := Diagnose(ctx, db, g, old, DiagnoseOptions{Clock: clk}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Transition(ctx, TransitionParams{IncidentID: old, To: "closed", Note: "seeded"}); err != nil {
				t.Fatal(err)
			}
			clk.Set(onset.Add(time.Hour))
			for i := range 300 {
				a := asset(rng.IntN(layers), rng.IntN(width))
				if rng.IntN(3) == 0 { // no lineage reaches it
					a = fmt.Sprintf("duckdb://elsewhere.t%03d", rng.IntN(100))
				}
				p := changelog.RecordChangeParams{
					// Hour steps over the lookback, some in the grace.
					At:   onset.Add(-time.Duration(rng.IntN(73)) * time.Hour).Add(time.Duration(rng.IntN(2)) * 10 * time.Minute),
					Kind: string(kinds[rng.IntN(len(kinds))]), System: "seeded", Assets: []string{a}, Summary: fmt.Sprintf("change %d.%d", w, i),
				}
				p.StateSkipped = p.Kind == string(changelog.ChangeRestore) && rng.IntN(2) == 0
				switch rng.IntN(3) {
				case 0, 1:
					p.Fields = []changelog.FieldChange{{Name: "f1", How: changelog.FieldRemoved}}
				}
				mustRecord(t, s, p)
			}
			id := mustReport(t, s, Symptom{Kind: SymptomNulls, Asset: symptom, Column: "f1", Observed: 0.2, At: onset}).Incidents[0].ID
			for _, maxCauses := range []int{1, 2, 3, 5, DefaultMaxCauses} {
				opts := DiagnoseOptions{Clock: clk, MaxCauses: maxCauses}
				d, inc, want := diagnoseAndSortAll(t, db, g, id, opts)
				if len(d.Causes) != len(want) {
					t.Fatalf("window %d, max %d: %d causes, the full sort keeps %d", w, maxCauses, len(d.Causes), len(want))
				}
				for i, wc := range want {
					if got := d.Causes[i]; got.Change.ID != wc.Change.ID || got.score != wc.score || got.Factors != wc.Factors {
						t.Fatalf("window %d, max %d, rank %d: change %d (score %.3f, %+v), full sort change %d (%.3f, %+v)",
							w, maxCauses, i+1, got.Change.ID, got.score, got.Factors, wc.Change.ID, wc.score, wc.Factors)
					}
				}
				r, err := newRanker(ctx, db, g, inc, opts.withDefaults())
				if err != nil {
					t.Fatal(err)
				}
				if _, considered, err := r.rankWindow(ctx, db); err != nil {
					t.Fatal(err)
				} else if r.unread >= considered {
					t.Fatalf("window %d, max %d: %d of %d changes left unread, yet %d causes kept", w, maxCauses, r.unread, considered, len(want))
				}
				cut += r.unread
			}
			if _, err := s.Transition(ctx, TransitionParams{IncidentID: id, To: "closed", Note: "seeded"}); err != nil {
				t.Fatal(err)
			}
		}
		if cut == 0 {
			t.Fatal("every change of every window was read in full: the windows do not exercise the bound")
		}
	})
}

// A change no lineage connects to the symptoms can still be the best
// there is: a pipeline change at the onset, on an asset lineage does not
// reach, outranks a config change nine hops up and two days old (0.155
// against 0.142). rankWindow holds the unrelated changes behind one bound
// until it reaches the top; a bound under what such a change can score
// would rank the far one first.
func TestUnrelatedChangeOutranksAFarStaleOne(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		chain := make([]string, 10)
		for i := range chain {
			chain[i] = fmt.Sprintf("duckdb://hop.t%02d", i)
		}
		g := newMemGraph().chain(chain...)
		onset := tue(14, 0)
		s, clk := newService(t, db, onset.Add(time.Hour), g)
		mustRecord(t, s, changelog.RecordChangeParams{At: onset.Add(-48 * time.Hour), Kind: "config", System: "kafka",
			Assets: []string{chain[0]}, Summary: "far and stale"})
		mustRecord(t, s, changelog.RecordChangeParams{At: onset, Kind: "pipeline", System: "airflow",
			Assets: []string{"airflow://dag/elsewhere"}, Summary: "unrelated, at the onset"})
		id := mustReport(t, s, Symptom{Kind: SymptomVolume, Asset: chain[9], Metric: "row_count",
			Observed: 10, ExpectedLow: 100, ExpectedHigh: 200, At: onset}).Incidents[0].ID
		opts := DiagnoseOptions{Clock: clk, MaxCauses: 1}
		d, _, want := diagnoseAndSortAll(t, db, g, id, opts)
		if len(d.Causes) != 1 || len(want) != 1 || want[0].Change.Summary != "unrelated, at the onset" || d.Causes[0].Change.ID != want[0].Change.ID {
			t.Fatalf("top cause %s, the full sort's %s", rankingText(d.Causes), rankingText(want))
		}
	})
}
