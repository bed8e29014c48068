package incidents

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

var randomKinds = []changelog.ChangeKind{changelog.ChangeDeploy, changelog.ChangeRelease, changelog.ChangeSchemaVersion, changelog.ChangeRestore,
	changelog.ChangeConfig, changelog.ChangeConnector, changelog.ChangePartitioning, changelog.ChangePipeline, "weird", ""}
var randomSymptoms = []SymptomKind{SymptomNulls, SymptomVolume, SymptomUniqueness, SymptomFreshness, SymptomLoadLag, SymptomValue, SymptomDivergence, "other"}
var randomOps = []changelog.FieldOp{changelog.FieldRemoved, changelog.FieldAdded, changelog.FieldTypeChanged, changelog.FieldRenamed}

// randomWindowRanking builds the seed's window in db (a store of its own)
// and compares rankWindow with sortAll on it.
func randomWindowRanking(t *testing.T, db *store.DB, seed uint64) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 99))
	layers, width := 2+rng.IntN(6), 2+rng.IntN(6)
	asset := func(l, i int) string { return fmt.Sprintf("a://l%d.t%d", l, i) }
	g := seededLayers(rng, layers, width, asset)
	for range rng.IntN(40) {
		l, i := rng.IntN(layers-1), rng.IntN(width)
		if out := g.out[asset(l, i)]; len(out) > 0 {
			g.reads(asset(l, i), out[rng.IntN(len(out))], fmt.Sprintf("f%d", rng.IntN(3)), "")
		}
	}
	// A fifth to all but a fifth of the assets changed are unrelated to
	// the graph, so some windows rank unrelated changes too.
	unrelated := 1 + rng.IntN(4)
	randAsset := func() string {
		if rng.IntN(5) < unrelated {
			return fmt.Sprintf("a://else.t%d", rng.IntN(5))
		}
		return asset(rng.IntN(layers), rng.IntN(width))
	}
	onset := time.Date(2026, 10, 13, 14, 0, 0, 0, time.UTC)
	bucket := []time.Duration{0, time.Millisecond, 10 * time.Minute, time.Hour}[rng.IntN(4)]
	inc := &Incident{ID: "INC-X", Onset: onset, OnsetEnd: onset.Add(bucket)}
	seen := map[string]bool{}
	for range 1 + rng.IntN(4) {
		s := Symptom{Kind: randomSymptoms[rng.IntN(len(randomSymptoms))], Asset: asset(rng.IntN(layers), rng.IntN(width)), At: onset}
		if rng.IntN(2) == 0 {
			s.Column = fmt.Sprintf("f%d", rng.IntN(3))
		}
		inc.Symptoms = append(inc.Symptoms, s)
		if !seen[s.Asset] {
			seen[s.Asset] = true
			inc.Assets = append(inc.Assets, s.Asset)
		}
	}
	opts := DiagnoseOptions{
		Lookback:  []time.Duration{time.Hour, 6 * time.Hour, 72 * time.Hour}[rng.IntN(3)],
		Grace:     []time.Duration{time.Millisecond, time.Minute, 15 * time.Minute}[rng.IntN(3)],
		MaxDepth:  1 + rng.IntN(8),
		MaxCauses: 1 + rng.IntN(15),
	}.withDefaults()
	// Times on a coarse grid plus the edges.
	edges := []time.Time{onset, inc.OnsetEnd, inc.OnsetEnd.Add(opts.Grace), inc.OnsetEnd.Add(opts.Grace / 2), onset.Add(-opts.Lookback),
		onset.Add(-time.Millisecond), inc.OnsetEnd.Add(time.Millisecond), onset.Add(bucket / 2), inc.OnsetEnd.Add(opts.Grace + time.Millisecond)}
	randTime := func() time.Time {
		if rng.IntN(3) == 0 {
			return edges[rng.IntN(len(edges))]
		}
		step := opts.Lookback / 8
		return onset.Add(-time.Duration(rng.IntN(9)) * step)
	}
	n := 20 + rng.IntN(200)
	insert := func(at time.Time, kind changelog.ChangeKind, assets []string, fields []changelog.FieldChange, skipped bool) {
		a, _ := json.Marshal(assets)
		f, _ := json.Marshal(fields)
		if fields == nil {
			f = []byte("[]")
			if rng.IntN(4) == 0 {
				f = []byte("[ ]") // no field changes, stored unlike RecordChange does
			}
		}
		sk := 0
		if skipped {
			sk = 1
		}
		var id int64
		if err := db.QueryRowContext(ctx, `INSERT INTO incident_changes (external_key, at_ms, kind, system, assets, fields, state_skipped, actor, source, summary, details, recorded_ms)
			VALUES (NULL, ?, ?, 'fz', ?, ?, ?, '', '', 'x', '{}', 0) RETURNING id`, store.Millis(at), string(kind), string(a), string(f), sk).Scan(&id); err != nil {
			t.Fatal(err)
		}
		// As changelog writes it: each asset once, however often listed.
		for _, asset := range assets {
			if _, err := db.ExecContext(ctx, `INSERT INTO incident_change_assets (asset, change_id, at_ms) VALUES (?, ?, ?)
				ON CONFLICT (asset, change_id) DO NOTHING`, asset, id, store.Millis(at)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range n {
		at := randTime()
		kind := randomKinds[rng.IntN(len(randomKinds))]
		var assets []string
		na := 1 + rng.IntN(3)
		if rng.IntN(10) == 0 {
			na = 30 + rng.IntN(40)
		}
		for range na {
			assets = append(assets, randAsset())
		}
		var fields []changelog.FieldChange
		for range rng.IntN(4) {
			fa := ""
			if rng.IntN(4) != 0 {
				fa = assets[rng.IntN(len(assets))]
			}
			if rng.IntN(4) == 0 {
				fa = randAsset()
			}
			fields = append(fields, changelog.FieldChange{Asset: fa, Name: fmt.Sprintf("f%d", rng.IntN(4)), How: randomOps[rng.IntN(len(randomOps))]})
		}
		skipped := rng.IntN(3) == 0
		insert(at, kind, assets, fields, skipped)
		if rng.IntN(4) == 0 {
			insert(at, kind, assets, fields, skipped)
		}
	}
	history := map[changelog.ChangeKind][]pastCause{}
	for _, k := range randomKinds {
		if rng.IntN(3) == 0 {
			history[k] = []pastCause{{id: "INC-0", onset: onset.Add(-48 * time.Hour)}}
		}
	}
	// The lazy walk on and off; the changes near the symptoms found by a
	// seek per upstream asset, by reading the whole window, by a seek that
	// gives up at its second row and reads the window (each on PostgreSQL
	// too, which in use always reads the window), and as shipped.
	budgets := []func(int, int, int) int{
		func(int, int, int) int { return math.MaxInt },
		func(int, int, int) int { return 0 },
		func(int, int, int) int { return 1 },
		nil,
	}
	for i := range 2 * len(budgets) {
		bw := i < len(budgets)
		func() {
			defer func(was bool, budget func(int, int, int) int, seek func(store.Dialect) bool) {
				boundWalks, nearBudget, seeks = was, budget, seek
			}(boundWalks, nearBudget, seeks)
			boundWalks = bw
			if b := budgets[i%len(budgets)]; b != nil {
				nearBudget, seeks = b, func(store.Dialect) bool { return true }
			}
			r, err := newRanker(ctx, db, g, inc, opts)
			if err != nil {
				t.Fatal(err)
			}
			r.history = history
			got, considered, err := r.rankWindow(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := newRanker(ctx, db, g, inc, opts)
			if err != nil {
				t.Fatal(err)
			}
			ref.history = history
			ref.bounding = false
			want, wn := sortAll(t, ref, db)
			if considered != wn {
				t.Fatalf("seed %d: considered %d, window %d", seed, considered, wn)
			}
			if len(got) != len(want) {
				t.Fatalf("seed %d bw %v: %d causes, want %d", seed, bw, len(got), len(want))
			}
			for i := range want {
				a, b := got[i], want[i]
				if a.Change.ID != b.Change.ID || a.score != b.score || a.Factors != b.Factors || a.Confidence != b.Confidence ||
					fmt.Sprint(a.Readers) != fmt.Sprint(b.Readers) || fmt.Sprint(a.Evidence) != fmt.Sprint(b.Evidence) || a.Rank != b.Rank {
					t.Fatalf("seed %d bw %v rank %d: got change %d %.3f %+v, want %d %.3f %+v", seed, bw, i+1, a.Change.ID, a.score, a.Factors, b.Change.ID, b.score, b.Factors)
				}
			}
			if r.unread < 0 || r.unread > considered {
				t.Fatalf("unread %d of %d", r.unread, considered)
			}
		}()
	}
}

// The ranking equals scoring every change in full and sorting, on random
// windows none of the rules was written against: random layered lineage
// with column reads; one to four symptoms of any kind (one unknown), on
// any assets, with or without a column; changes of every kind (and two
// unknown ones) on one to three assets or dozens, upstream, downstream
// and unrelated mixed, with up to three field changes of any kind (on the
// change's assets, on others or on none), state skipped on any kind, some
// recorded twice; times on a coarse grid and on every edge (the onset,
// the first bucket's end, inside the grace, its end, the window's ends
// and a millisecond either side); a random bucket, lookback, grace, depth
// and number of causes; earlier top causes of random kinds; the lazy walk
// on and off. Ids, scores, factors, readers, words, confidences, ranks and
// the number considered must all agree.
func TestRankingMatchesFullSortOnRandomWindows(t *testing.T) {
	for _, engine := range []struct {
		name  string
		open  func(testing.TB) *store.DB
		seeds int
	}{{"sqlite", storetest.SQLite, 80}, {"postgres", storetest.Postgres, 8}} {
		t.Run(engine.name, func(t *testing.T) {
			for seed := range engine.seeds {
				randomWindowRanking(t, engine.open(t), uint64(1000+seed))
			}
		})
	}
}
