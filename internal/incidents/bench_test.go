package incidents

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

const (
	benchLayers    = 50
	benchPerLayer  = 1000 // 50,000 assets
	benchChanges   = 100_000
	benchLogLength = 60 * 24 * time.Hour
)

func benchAsset(layer, i int) string { return fmt.Sprintf("duckdb://l%02d.t%04d", layer, i) }

// benchGraph is a layered DAG: every asset has two parents in the layer
// above, so the upstream of one asset fans out to thousands within 10 hops.
func benchGraph() *memGraph {
	g := newMemGraph()
	rng := rand.New(rand.NewPCG(7, 8))
	for l := 1; l < benchLayers; l++ {
		for i := range benchPerLayer {
			for range 2 {
				g.edge(benchAsset(l-1, rng.IntN(benchPerLayer)), benchAsset(l, i))
			}
		}
	}
	return g
}

// seedChanges writes n changes spread over the log's length before end, in
// multi-row inserts (recording them one by one would time the setup, not
// the diagnosis). One change in five touches fields.
func seedChanges(b *testing.B, db *store.DB, end time.Time, n int) {
	rng := rand.New(rand.NewPCG(9, 10))
	kinds := []changelog.ChangeKind{changelog.ChangeDeploy, changelog.ChangeRelease, changelog.ChangeSchemaVersion, changelog.ChangeRestore, changelog.ChangeConfig, changelog.ChangeConnector, changelog.ChangePartitioning, changelog.ChangePipeline}
	const batch = 400
	for start := 0; start < n; start += batch {
		var sb strings.Builder
		sb.WriteString(`INSERT INTO incident_changes (external_key, at_ms, kind, system, assets, fields, state_skipped, actor, source, summary, details, recorded_ms) VALUES `)
		var args []any
		for i := start; i < min(start+batch, n); i++ {
			if i > start {
				sb.WriteString(", ")
			}
			sb.WriteString("(NULL, ?, ?, ?, ?, ?, 0, 'bench', 'bench', ?, '{}', ?)")
			asset := benchAsset(rng.IntN(benchLayers), rng.IntN(benchPerLayer))
			fields := "[]"
			if rng.IntN(5) == 0 {
				fields = fmt.Sprintf(`[{"asset":%q,"name":"f%d","how":"removed"}]`, asset, rng.IntN(50))
			}
			at := end.Add(-time.Duration(rng.Int64N(int64(benchLogLength))))
			args = append(args, store.Millis(at), string(kinds[rng.IntN(len(kinds))]), "bench", fmt.Sprintf(`[%q]`, asset), fields,
				fmt.Sprintf("change %d", i), store.Millis(at))
		}
		if _, err := db.ExecContext(context.Background(), sb.String(), args...); err != nil {
			b.Fatal(err)
		}
	}
	// The asset index, as changelog fills it when it records a change.
	fill := `INSERT INTO incident_change_assets (asset, change_id, at_ms)
		SELECT DISTINCT j.value, c.id, c.at_ms FROM incident_changes c, json_each(c.assets) j WHERE true
		ON CONFLICT (asset, change_id) DO NOTHING`
	if db.Dialect() == store.Postgres {
		fill = `INSERT INTO incident_change_assets (asset, change_id, at_ms)
			SELECT DISTINCT j.value, c.id, c.at_ms FROM incident_changes c, jsonb_array_elements_text(CAST(c.assets AS jsonb)) AS j(value)
			ON CONFLICT (asset, change_id) DO NOTHING`
	}
	if _, err := db.ExecContext(context.Background(), fill); err != nil {
		b.Fatal(err)
	}
}

// benchStore is the diagnose benchmarks' store: the layered graph, a
// service an hour after the onset, the change log seeded before it, and
// the symptom's asset at the bottom of the graph.
func benchStore(b *testing.B, open func(testing.TB) *store.DB) (*store.DB, *memGraph, *Service, time.Time, string) {
	db := open(b)
	g := benchGraph()
	onset := tue(14, 0)
	s, _ := newService(b, db, onset.Add(time.Hour), g)
	seedChanges(b, db, onset, benchChanges)
	return db, g, s, onset, benchAsset(benchLayers-1, 500)
}

// BenchmarkDiagnose ranks the candidate causes of an incident with 100,000
// changes in the log and a 50,000-asset graph, against the baseline of only
// loading the lookback window's changes from the store.
func BenchmarkDiagnose(b *testing.B) {
	for _, engine := range []struct {
		name string
		open func(testing.TB) *store.DB
	}{{"sqlite", storetest.SQLite}, {"postgres", storetest.Postgres}} {
		b.Run(engine.name, func(b *testing.B) {
			ctx := context.Background()
			db, g, s, onset, symptomAsset := benchStore(b, engine.open)
			// The planted cause: three hops up, a field a job on the path reads.
			up, _ := g.Upstream(ctx, []string{symptomAsset}, 3)
			var source string
			for a, h := range up {
				if h.Distance == 3 && (source == "" || a < source) {
					source = a
				}
			}
			job := up[source].Next
			g.reads(source, job, "amount", "recorded SQL: SUM(amount)")
			mustRecord(b, s, changelog.RecordChangeParams{At: onset.Add(-20 * time.Minute), Kind: "schema_version", System: "registry",
				Assets: []string{source}, Fields: []changelog.FieldChange{{Name: "amount", How: changelog.FieldRemoved}}, Summary: "planted cause"})
			id := mustReport(b, s, Symptom{Kind: SymptomNulls, Asset: symptomAsset, Column: "total", Observed: 0.2, At: onset}).Incidents[0].ID
			opts := DiagnoseOptions{Clock: clock.NewFake(onset.Add(time.Hour))}
			d, err := Diagnose(ctx, db, g, id, opts)
			if err != nil {
				b.Fatal(err)
			}
			if d.Causes[0].Change.Summary != "planted cause" {
				b.Fatalf("planted cause not first: %s", rankingText(d.Causes[:3]))
			}
			var loadTime, diagTime time.Duration
			var loaded int
			for b.Loop() {
				t0 := time.Now()
				// The floor reads the diagnosis's own window: the lookback
				// before the onset to the grace after the first anomalous
				// bucket.
				cs, err := changelog.LoadWindow(ctx, db, d.Window.Start, d.Window.End.Add(time.Millisecond))
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := Diagnose(ctx, db, g, id, opts); err != nil {
					b.Fatal(err)
				}
				loadTime += t1.Sub(t0)
				diagTime += time.Since(t1)
				loaded = len(cs)
			}
			n := float64(b.N)
			b.ReportMetric(float64(diagTime.Microseconds())/1000/n, "diagnose-ms/op")
			b.ReportMetric(float64(loadTime.Microseconds())/1000/n, "load-ms/op")
			b.ReportMetric(float64(diagTime)/float64(loadTime), "x-load")
			b.ReportMetric(float64(loaded), "candidates")
		})
	}
}

// BenchmarkDiagnoseNearChanges holds the two ways a diagnosis finds the
// changes on or upstream of its symptoms to nearBudget's promise, against
// the floor of the same diagnosis forced to read its whole window's keys,
// in the same process: where the symptom's upstream holds a few of the
// window's changes (the seek: at most half the floor's time, x-scan), and
// where every change in the window is on the symptom (the seek gives up
// after its budget and reads the window: at most about 1.5 times it).
func BenchmarkDiagnoseNearChanges(b *testing.B) {
	for _, engine := range []struct {
		name string
		open func(testing.TB) *store.DB
	}{{"sqlite", storetest.SQLite}, {"postgres", storetest.Postgres}} {
		for _, allNear := range []bool{false, true} {
			for _, lookback := range []time.Duration{72 * time.Hour, 720 * time.Hour} {
				name := fmt.Sprintf("%s/upstream-few/%dh", engine.name, lookback/time.Hour)
				if allNear {
					name = fmt.Sprintf("%s/all-on-the-symptom/%dh", engine.name, lookback/time.Hour)
				}
				b.Run(name, func(b *testing.B) {
					ctx := context.Background()
					db, g, s, onset, symptom := benchStore(b, engine.open)
					if allNear { // every change in the log on the symptom itself
						for _, st := range []struct {
							q    string
							args []any
						}{
							{"DELETE FROM incident_change_assets", nil},
							{"UPDATE incident_changes SET assets = ?", []any{fmt.Sprintf(`[%q]`, symptom)}},
							{"INSERT INTO incident_change_assets (asset, change_id, at_ms) SELECT ?, id, at_ms FROM incident_changes", []any{symptom}},
						} {
							if _, err := db.ExecContext(ctx, st.q, st.args...); err != nil {
								b.Fatal(err)
							}
						}
					}
					id := mustReport(b, s, Symptom{Kind: SymptomNulls, Asset: symptom, Column: "total", Observed: 0.2, At: onset}).Incidents[0].ID
					opts := DiagnoseOptions{Clock: clock.NewFake(onset.Add(time.Hour)), Lookback: lookback}
					seek := nearBudget
					defer func() { nearBudget = seek }()
					scan := func(int, int, int) int { return 0 }
					diagnose := func(budget func(int, int, int) int) (time.Duration, []Cause) {
						nearBudget = budget
						t0 := time.Now()
						d, err := Diagnose(ctx, db, g, id, opts)
						if err != nil {
							b.Fatal(err)
						}
						return time.Since(t0), d.Causes
					}
					diagnose(seek) // each way warm (plans, caches), as a second call finds it
					diagnose(scan)
					var seekTime, scanTime time.Duration
					for b.Loop() {
						ts, a := diagnose(seek)
						tw, w := diagnose(scan)
						if len(a) != len(w) || a[0].Change.ID != w[0].Change.ID {
							b.Fatalf("the two ways rank differently: %s against %s", rankingText(a[:min(3, len(a))]), rankingText(w[:min(3, len(w))]))
						}
						seekTime += ts
						scanTime += tw
					}
					b.ReportMetric(float64(seekTime.Microseconds())/1000/float64(b.N), "diagnose-ms/op")
					b.ReportMetric(float64(scanTime.Microseconds())/1000/float64(b.N), "window-read-ms/op")
					b.ReportMetric(float64(seekTime)/float64(scanTime), "x-window-read")
				})
			}
		}
	}
}
