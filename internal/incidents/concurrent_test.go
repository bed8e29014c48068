package incidents_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// barrierGraph holds each diagnosis's first field-reader walk until n
// have reached one (or 3 s pass): an interleaving the scheduler can
// produce on its own when n diagnoses run at once in one process.
type barrierGraph struct {
	incidents.Graph
	n       int32
	arrived atomic.Int32
	once    sync.Once
	release chan struct{}
}

func (b *barrierGraph) FieldReaders(ctx context.Context, asset string, fields []string, maxDepth int, within incidents.Scope) ([]incidents.FieldReader, error) {
	if b.arrived.Add(1) >= b.n {
		b.once.Do(func() { close(b.release) })
	}
	select {
	case <-b.release:
	case <-time.After(3 * time.Second):
	}
	return b.Graph.FieldReaders(ctx, asset, fields, maxDepth, within)
}

// As many diagnoses at once as the store's pool has connections (4 on
// SQLite, 8 on PostgreSQL) all finish: a diagnosis holds no connection
// while its field-reader walks (LineageGraph -> lineage.Graph.Index ->
// the graph's version) take another. A hostile review found the first
// version holding its read snapshot across them: every diagnosis, and
// every other store user in the process, waited until its context ended.
func TestConcurrentDiagnosesHoldNoConnectionAcrossWalks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk, tl := loadBilling(t, db)
		n := int32(4)
		if db.Dialect() == store.Postgres {
			n = 8
		}
		g := &barrierGraph{Graph: incidents.LineageGraph(lineage.New(db, clk)), n: n, release: make(chan struct{})}
		svc := &incidents.Service{DB: db, Clock: clk, Graph: g}
		rep, err := svc.ReportSymptoms(ctx, incidents.ReportParams{Symptoms: []incidents.Symptom{{
			Kind: incidents.SymptomNulls, Asset: "duckdb://usage.usage_hourly", Metric: "null_rate", Column: "egress_bytes",
			Observed: 0.821, At: tl.Day.Add(14 * time.Hour), Source: "run_quality_check",
		}}})
		if err != nil {
			t.Fatal(err)
		}
		id := rep.Incidents[0].ID
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		errs := make(chan error, n)
		for range n {
			go func() {
				_, err := svc.Diagnose(ctx, incidents.DiagnoseParams{IncidentID: id})
				errs <- err
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Errorf("diagnosis: %v", err)
			}
		}
	})
}
