package incidents

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// recordingGraph is a Graph that remembers which assets field-reader walks
// started from.
type recordingGraph struct {
	Graph
	walked   []string
	unscoped int // walks asked with no scope
}

func (g *recordingGraph) FieldReaders(ctx context.Context, asset string, fields []string, maxDepth int, within Scope) ([]FieldReader, error) {
	g.walked = append(g.walked, asset)
	if within == nil {
		g.unscoped++
	}
	return g.Graph.FieldReaders(ctx, asset, fields, maxDepth, within)
}

// The field-reader walk stays inside the symptom's upstream set. A job
// that reads the removed field but feeds something else is not evidence,
// and a change to an asset that is not upstream of the symptom is never
// walked: it ranks on what it is (unrelated), below the real cause,
// with no readers, whether or not the ranking is branch and bound.
func TestFieldWalkStaysInTheSymptomsUpstream(t *testing.T) {
	for _, bound := range []bool{true, false} {
		storetest.Each(t, func(t *testing.T, db *store.DB) {
			defer func(was bool) { boundWalks = was }(boundWalks)
			boundWalks = bound
			ctx := context.Background()
			onset := tue(14, 0)
			clk := clock.NewFake(onset.Add(time.Hour))
			lg := lineage.New(db, clk)
			const (
				src     = "kafka://prod/payments"
				onPath  = "flink://payments-rollup"
				symptom = "kafka://prod/payments-hourly"
				aside   = "flink://payments-audit" // reads the field, feeds something else
				other   = "kafka://prod/refunds"   // not upstream of the symptom at all
				otherJB = "flink://refunds-rollup"
				elsewh  = "kafka://prod/audit-out"
			)
			if _, err := lg.RecordLineage(ctx, lineage.Note{Edges: []lineage.NoteEdge{
				{From: src, To: onPath, ReadsFields: []string{"amount"}},
				{From: onPath, To: symptom},
				{From: src, To: aside, ReadsFields: []string{"amount"}},
				{From: aside, To: elsewh},
				{From: other, To: otherJB, ReadsFields: []string{"amount"}},
				{From: otherJB, To: elsewh},
			}}); err != nil {
				t.Fatal(err)
			}
			// Unconfined, the walk from the source finds both readers, so
			// the confinement below is what leaves the aside job out.
			all, err := lg.FieldReaders(ctx, src, []string{"amount"}, 10)
			if err != nil {
				t.Fatal(err)
			}
			var readers []string
			for _, r := range all {
				readers = append(readers, r.Reader)
			}
			slices.Sort(readers)
			if !slices.Equal(readers, []string{aside, onPath}) {
				t.Fatalf("unconfined readers of amount: %v, want %s and %s", readers, aside, onPath)
			}

			g := &recordingGraph{Graph: LineageGraph(lg)}
			s, _ := newService(t, db, onset.Add(time.Hour), g)
			removed := []changelog.FieldChange{{Name: "amount", How: changelog.FieldRemoved}}
			cause := mustRecord(t, s, changelog.RecordChangeParams{At: onset.Add(-30 * time.Minute), Kind: "schema_version", System: "registry",
				Assets: []string{src}, Fields: removed, Summary: "payments drops amount"})
			unrelated := mustRecord(t, s, changelog.RecordChangeParams{At: onset.Add(-5 * time.Minute), Kind: "schema_version", System: "registry",
				Assets: []string{other}, Fields: removed, Summary: "refunds drops amount"})
			id := mustReport(t, s, Symptom{Kind: SymptomNulls, Asset: symptom, Column: "total", Observed: 0.3, At: onset}).Incidents[0].ID
			d, err := Diagnose(ctx, db, g, id, DiagnoseOptions{Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Causes) != 2 {
				t.Fatalf("%d causes, want 2: %s", len(d.Causes), rankingText(d.Causes))
			}
			top, second := d.Causes[0], d.Causes[1]
			if top.Change.ID != cause.ID || top.Relation != RelationUpstream || !top.Credible {
				t.Fatalf("top cause %q (%s, credible %v), want %q upstream and credible", top.Change.Summary, top.Relation, top.Credible, cause.Summary)
			}
			if !slices.Equal(top.Readers, []string{onPath}) || top.Factors.Fields != 1 {
				t.Errorf("top cause readers %v (fields %v), want only %s: %s reads amount but does not feed %s",
					top.Readers, top.Factors.Fields, onPath, aside, symptom)
			}
			if second.Change.ID != unrelated.ID || second.Relation != RelationUnrelated || second.Credible ||
				len(second.Readers) != 0 || second.Factors.Fields != 0.35 {
				t.Errorf("second %q: relation %s, credible %v, readers %v, fields %v; want unrelated, not credible, no readers, fields 0.35",
					second.Change.Summary, second.Relation, second.Credible, second.Readers, second.Factors.Fields)
			}
			if slices.Contains(g.walked, other) {
				t.Errorf("field walks started from %v: %s is not upstream of %s and must not be walked", g.walked, other, symptom)
			}
			if g.unscoped > 0 {
				t.Errorf("%d field walk(s) were not confined to the symptom's upstream", g.unscoped)
			}
			if !slices.Contains(g.walked, src) {
				t.Errorf("field walks started from %v, want %s (the cause's readers are evidence)", g.walked, src)
			}
		})
	}
}
