package approvals

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
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

// BenchmarkMayDispatch measures the check every dispatching tool makes
// (stop, level, approved proposal with lazy expiry) against the cheapest
// store-backed check there is: one settings read.
func BenchmarkMayDispatch(b *testing.B) {
	ctx := context.Background()
	db := storetest.SQLite(b)
	s, _ := fixture(b, db)
	p := mustPropose(b, s, holdDAG())
	if _, err := s.Decide(ctx, p.ID, term(b, s, "bob"), VerdictApprove, ""); err != nil {
		b.Fatal(err)
	}
	act := Action{Domain: "billing", Kind: KindHold, ProposalID: p.ID, Reversible: true}
	base := baseline(b, func() {
		if _, _, _, err := store.GetSetting(ctx, db, stopKey); err != nil {
			b.Fatal(err)
		}
	})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.MayDispatch(ctx, act); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed())/float64(base), "x_settings_read")
}

// BenchmarkVerify measures checking a 500-entry chain against reading the
// same entries without checking them: the ratio is the cost of hashing.
func BenchmarkVerify(b *testing.B) {
	ctx := context.Background()
	db := storetest.SQLite(b)
	err := db.InTx(ctx, func(tx *store.Tx) error {
		for i := 0; i < 500; i++ {
			if _, err := AppendReceipt(ctx, tx, t0.Add(time.Duration(i)*time.Second), "INC-B", EntryStep, "dw-bench",
				map[string]any{"i": i, "description": "rerun partition", "checks_after": []Check{{Name: "rows", Passed: true, Detail: "1204"}}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	base := baseline(b, func() {
		if _, err := Entries(ctx, db, "INC-B"); err != nil {
			b.Fatal(err)
		}
	})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := Verify(ctx, db, "INC-B")
		if err != nil || !v.OK {
			b.Fatal(v, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed())/float64(base), "x_plain_read")
}

// BenchmarkDomainOf measures routing an asset by every name the graph
// knows it by (a dbt-built table: its aliases are read from the store)
// against matching the spelling as written, without the graph.
func BenchmarkDomainOf(b *testing.B) {
	ctx := context.Background()
	db := storetest.SQLite(b)
	s, _ := fixture(b, db)
	g := lineage.New(db, nil)
	if _, err := g.RecordLineage(ctx, lineage.Note{Assets: []lineage.NoteAsset{{ID: "dbt://model.shop.orders", Aliases: []string{"snowflake://analytics.usage.orders"}}},
		Path: []string{"dbt://model.shop.orders", "sigma://workbook/rev"}}); err != nil {
		b.Fatal(err)
	}
	plain := lineage.StoreIdentities(nil, s.cfg)
	base := baseline(b, func() {
		if _, ok, err := DomainOf(ctx, s.cfg, plain, "snowflake://usage.orders"); err != nil || !ok {
			b.Fatal(ok, err)
		}
	})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d, ok, err := s.DomainOf(ctx, "dbt://model.shop.orders"); err != nil || !ok || d.Name != "billing" {
			b.Fatal(d, ok, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed())/float64(base), "x_without_graph")
}
