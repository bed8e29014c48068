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
	ctx := context.Background()
	opts = opts.withDefaults()
	r, err := newRanker(ctx, db, g, inc, opts)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := changelog.LoadWindow(ctx, db, inc.Onset.Add(-opts.Lookback), inc.OnsetEnd.Add(opts.Grace+time.Millisecond))
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
	return all[:min(len(all), opts.MaxCauses)]
}

// Ranking while reading the window (exact scores straight into the
// ranking, field walks only for the bounds that could still enter it)
// keeps exactly the changes, in the order, with the scores and readers
// that scoring and sorting every change in full gives, on seeded windows
// dense with ties: changes on the same minute, the same assets and the
// same removed fields, many upstream of the symptom and read on the path.
func TestStreamedRankingMatchesFullSort(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		const layers, width = 8, 12
		asset := func(l, i int) string { return fmt.Sprintf("duckdb://l%d.t%02d", l, i) }
		rng := rand.New(rand.NewPCG(18, 3))
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
					d, err := Diagnose(ctx, db, g, id, opts)
					if err != nil {
						t.Fatal(err)
					}
					inc, err := loadIncident(ctx, db, id)
					if err != nil {
						t.Fatal(err)
					}
					want := referenceRanking(t, db, g, inc, opts)
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
