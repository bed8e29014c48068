package orchestrate_test

import (
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/orchestrate"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// baseline runs fn b.N times before the measured loop and returns its
// total time, so the ratio compares the two in the same process and run.
func baseline(b *testing.B, fn func()) time.Duration {
	start := time.Now()
	for i := 0; i < b.N; i++ {
		fn()
	}
	return time.Since(start)
}

// BenchmarkRunRetry measures a retried Run of a run already started (the
// path every agent retry takes: a store read, no orchestrator call)
// against one status read from the orchestrator (one HTTP round trip to
// an in-process Airflow). Below 1 means a retry costs less than asking
// the orchestrator.
func BenchmarkRunRetry(b *testing.B) {
	db := storetest.SQLite(b)
	f := newFixture(b, db, 5*time.Second)
	p := f.approved(systems[1])
	params := f.params(systems[1], p.ID)
	first, err := f.d.Run(f.ctx, params)
	if err != nil {
		b.Fatal(err)
	}
	runners, err := orchestrate.NewRunners(f.cfg.Orchestrators)
	if err != nil {
		b.Fatal(err)
	}
	ref := orchestrate.RunRef{System: orchestrate.Airflow, Target: airflowDAG, RunID: first.RunID}
	base := baseline(b, func() {
		if _, err := runners[orchestrate.Airflow].Status(f.ctx, ref); err != nil {
			b.Fatal(err)
		}
	})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.d.Run(f.ctx, params); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed())/float64(base), "x_status_read")
}

// BenchmarkRunRefused measures a refused dispatch (org-wide stop) against
// approvals.MayDispatch alone: the ratio is what validation and the
// store lookup add before the rules are asked.
func BenchmarkRunRefused(b *testing.B) {
	db := storetest.SQLite(b)
	f := newFixture(b, db, 5*time.Second)
	p := f.approved(systems[1])
	if _, err := f.svc.Stop(f.ctx, "ops", "bench"); err != nil {
		b.Fatal(err)
	}
	params := f.params(systems[1], p.ID)
	act := approvals.Action{Kind: approvals.KindRerun, ProposalID: p.ID, Reversible: true}
	base := baseline(b, func() {
		if _, err := f.svc.MayDispatch(f.ctx, act); !approvals.IsRefusal(err) {
			b.Fatal(err)
		}
	})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.d.Run(f.ctx, params); !approvals.IsRefusal(err) {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed())/float64(base), "x_may_dispatch")
}
