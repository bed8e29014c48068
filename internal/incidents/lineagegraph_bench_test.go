package incidents

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// BenchmarkDiagnoseLineageGraph is BenchmarkDiagnose on the context graph
// in the store, through LineageGraph, instead of the in-memory graph: the
// same 50,000-asset layered graph recorded as a team note, the same
// 100,000 changes, the planted cause's field read recorded as column
// lineage. It reports the diagnosis time and its ratio to the in-memory
// graph's diagnosis of the same incident in the same run.
func BenchmarkDiagnoseLineageGraph(b *testing.B) {
	for _, engine := range []struct {
		name string
		open func(testing.TB) *store.DB
	}{{"sqlite", storetest.SQLite}, {"postgres", storetest.Postgres}} {
		b.Run(engine.name, func(b *testing.B) {
			ctx := context.Background()
			db := engine.open(b)
			mem := benchGraph()
			onset := tue(14, 0)
			clk := clock.NewFake(onset.Add(time.Hour))
			lg := lineage.New(db, clk)
			var note lineage.Note
			for from, tos := range mem.out {
				for _, to := range tos {
					note.Edges = append(note.Edges, lineage.NoteEdge{From: from, To: to, Kind: "feeds"})
				}
			}
			setup := time.Now()
			if _, err := lg.RecordLineage(ctx, note); err != nil {
				b.Fatal(err)
			}
			b.Logf("recorded %d edges in %s", len(note.Edges), time.Since(setup).Round(time.Millisecond))
			g := LineageGraph(lg)
			s, _ := newService(b, db, onset.Add(time.Hour), g)
			seedChanges(b, db, onset, benchChanges)
			symptomAsset := benchAsset(benchLayers-1, 500)
			up, err := g.Upstream(ctx, []string{symptomAsset}, 3)
			if err != nil {
				b.Fatal(err)
			}
			var source string
			for a, h := range up {
				if h.Distance == 3 && (source == "" || a < source) {
					source = a
				}
			}
			job := up[source].Next
			mem.reads(source, job, "amount", "")
			if _, err := lg.RecordLineage(ctx, lineage.Note{Edges: []lineage.NoteEdge{{From: source, To: job, ReadsFields: []string{"amount"}}}}); err != nil {
				b.Fatal(err)
			}
			mustRecord(b, s, changelog.RecordChangeParams{At: onset.Add(-20 * time.Minute), Kind: "schema_version", System: "registry",
				Assets: []string{source}, Fields: []changelog.FieldChange{{Name: "amount", How: changelog.FieldRemoved}}, Summary: "planted cause"})
			id := mustReport(b, s, Symptom{Kind: SymptomNulls, Asset: symptomAsset, Column: "total", Observed: 0.2, At: onset}).Incidents[0].ID
			opts := DiagnoseOptions{Clock: clk}
			d, err := Diagnose(ctx, db, g, id, opts)
			if err != nil {
				b.Fatal(err)
			}
			if d.Causes[0].Change.Summary != "planted cause" || len(d.Causes[0].Readers) != 1 || d.Causes[0].Readers[0] != job {
				b.Fatalf("planted cause not first with its reader: %s", rankingText(d.Causes[:3]))
			}
			var memTime, graphTime time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := Diagnose(ctx, db, mem, id, opts); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := Diagnose(ctx, db, g, id, opts); err != nil {
					b.Fatal(err)
				}
				memTime += t1.Sub(t0)
				graphTime += time.Since(t1)
			}
			n := float64(b.N)
			b.ReportMetric(float64(graphTime.Microseconds())/1000/n, "diagnose-ms/op")
			b.ReportMetric(float64(memTime.Microseconds())/1000/n, "in-memory-ms/op")
			b.ReportMetric(float64(graphTime)/float64(memTime), "x-in-memory")
		})
	}
}
