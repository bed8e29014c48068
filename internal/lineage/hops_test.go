package lineage_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/packload"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// billingGraph loads story A's scenario pack (dbt manifest, team notes,
// change log) into db and returns its context graph.
func billingGraph(t *testing.T, db *store.DB) *lineage.Graph {
	t.Helper()
	now := time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)
	clk := clock.NewFake(now)
	pack, _, err := packload.Read("billing", now)
	if err != nil {
		t.Fatalf("read billing pack: %v", err)
	}
	if _, err := packload.LoadStore(context.Background(), db, clk, pack, "demo"); err != nil {
		t.Fatalf("load billing pack: %v", err)
	}
	return lineage.New(db, clk)
}

// path follows Next pointers from asset back to a start.
func path(hops map[string]lineage.Hop, asset string) []string {
	out := []string{asset}
	for cur := asset; len(out) < 50; {
		h, ok := hops[cur]
		if !ok || h.Next == "" {
			break
		}
		cur = h.Next
		out = append(out, cur)
	}
	return out
}

func TestFieldReadersBillingStory(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g := billingGraph(t, db)

		// Version 12 of the subject drops response_bytes: the statement
		// that sums it reads it, the dbt models built on the landed table
		// read egress_bytes and no column lineage says they use it.
		rs, err := g.FieldReaders(ctx, "schema://api-usage-value", []string{"response_bytes"}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 {
			t.Fatalf("readers = %+v, want only the rollup statement", rs)
		}
		r := rs[0]
		if r.Reader != "flink://usage-hourly-rollup" || r.Field != "response_bytes" || r.From != "kafka://prod/api-usage" {
			t.Errorf("reader = %+v", r)
		}
		if !strings.Contains(r.Evidence, "recorded SQL: ") || !strings.Contains(r.Evidence, "SUM(response_bytes)") {
			t.Errorf("evidence %q should quote the recorded SQL summing response_bytes", r.Evidence)
		}
		for _, r := range rs {
			if strings.HasPrefix(r.Reader, "dbt://") {
				t.Errorf("dbt model %s reported as reading response_bytes", r.Reader)
			}
		}

		// A field no edge's column lineage carries past the statement
		// reaches no one, and a case difference does not matter.
		rs, err = g.FieldReaders(ctx, "schema://api-usage-value", []string{"RESPONSE_KIB"}, 10)
		if err != nil || len(rs) != 0 {
			t.Errorf("readers of response_kib = %+v, %v; want none (the statement does not read it)", rs, err)
		}

		// Column lineage stops a field: the Stripe DAG and the workbook
		// read billable_bytes of the model, recorded by the team's note.
		rs, err = g.FieldReaders(ctx, "fct_billable_egress", []string{"billable_bytes"}, 10)
		if err != nil {
			t.Fatal(err)
		}
		var readers []string
		for _, r := range rs {
			readers = append(readers, r.Reader)
			if r.Evidence != "column lineage from note" {
				t.Errorf("%s evidence %q, want the note's column lineage", r.Reader, r.Evidence)
			}
		}
		slices.Sort(readers)
		if want := []string{"airflow://dag/sync_metered_usage_to_stripe", "sigma://workbook/revenue-today"}; !slices.Equal(readers, want) {
			t.Errorf("readers of billable_bytes = %v, want %v", readers, want)
		}
		rs, err = g.FieldReaders(ctx, "fct_billable_egress", []string{"egress_bytes"}, 10)
		if err != nil || len(rs) != 0 {
			t.Errorf("readers of the model's egress_bytes = %+v, %v; want none: the DAG's column lineage does not mention it", rs, err)
		}
	})
}

func TestFieldReadersFollowRenames(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g := billingGraph(t, db)
		// An audit job records that it reads egress_bytes of the landed
		// table; the statement derives egress_bytes from response_bytes,
		// so the audit job reads the schema's response_bytes too.
		if _, err := g.RecordLineage(ctx, lineage.Note{
			Edges: []lineage.NoteEdge{{From: "duckdb://usage.usage_hourly", To: "airflow://dag/egress_audit", ReadsFields: []string{"egress_bytes"}}},
		}); err != nil {
			t.Fatal(err)
		}
		rs, err := g.FieldReaders(ctx, "schema://api-usage-value", []string{"response_bytes"}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 2 || rs[0].Reader != "flink://usage-hourly-rollup" {
			t.Fatalf("readers = %+v, want the statement first, then the audit job", rs)
		}
		audit := rs[1]
		if audit.Reader != "airflow://dag/egress_audit" || audit.Field != "response_bytes" || audit.From != "duckdb://usage.usage_hourly" {
			t.Errorf("audit reader = %+v", audit)
		}
		if want := "reads egress_bytes, which column lineage derives from response_bytes; column lineage from note"; audit.Evidence != want {
			t.Errorf("evidence %q, want %q", audit.Evidence, want)
		}
		// The depth bounds the walk: the audit job is 5 hops away.
		if rs, err := g.FieldReaders(ctx, "schema://api-usage-value", []string{"response_bytes"}, 4); err != nil || len(rs) != 1 {
			t.Errorf("at depth 4: %+v, %v; want only the statement", rs, err)
		}
	})
}

func TestFieldReadersUnknownAsset(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g := billingGraph(t, db)
		_, err := g.FieldReaders(context.Background(), "schema://api-usage-valu", []string{"response_bytes"}, 10)
		if !errors.Is(err, lineage.ErrUnknownAsset) || !strings.Contains(err.Error(), "closest: schema://api-usage-value") {
			t.Errorf("err = %v; want unknown asset naming the closest", err)
		}
		if _, err := g.FieldReaders(context.Background(), "schema://api-usage-value", []string{" "}, 10); err == nil {
			t.Error("no field names: want an error")
		}
		if _, err := g.FieldReaders(context.Background(), "schema://api-usage-value", []string{"x"}, -1); err == nil {
			t.Error("negative depth: want an error")
		}
	})
}

func TestUpstreamFromAlias(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g := billingGraph(t, db)
		// dw-quality names the table duckdb://usage.usage_hourly; its
		// canonical id carries the database.
		const given = "duckdb://usage.usage_hourly"
		up, err := g.Upstream(ctx, []string{given, "service://not-in-the-graph"}, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{given, "duckdb://demo.usage.usage_hourly", "dbt://source.billing.usage.usage_hourly", "service://not-in-the-graph"} {
			if h, ok := up[name]; !ok || h.Distance != 0 || h.Next != "" {
				t.Errorf("%s = %+v, %v; want a start at distance 0", name, h, ok)
			}
		}
		want := []string{"schema://api-usage-value", "kafka://prod/api-usage", "flink://usage-hourly-rollup", "kafka://prod/usage-hourly", given}
		if got := path(up, "schema://api-usage-value"); !slices.Equal(got, want) {
			t.Errorf("path from the subject = %v, want %v", got, want)
		}
		if up["schema://api-usage-value"].Distance != 4 || up["service://api-gateway"].Distance != 4 {
			t.Errorf("distances: subject %d, gateway %d; want 4 and 4", up["schema://api-usage-value"].Distance, up["service://api-gateway"].Distance)
		}
		if _, ok := up["dbt://model.billing.fct_billable_egress"]; ok {
			t.Error("a downstream model appears upstream")
		}

		near, err := g.Upstream(ctx, []string{given}, 2)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := near["flink://usage-hourly-rollup"]; !ok {
			t.Error("depth 2 misses the statement 2 hops up")
		}
		if _, ok := near["kafka://prod/api-usage"]; ok {
			t.Error("depth 2 reaches a topic 3 hops up")
		}
	})
}

func TestDownstreamKeysEveryName(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g := billingGraph(t, db)
		down, err := g.Downstream(ctx, []string{"schema://api-usage-value"}, 10)
		if err != nil {
			t.Fatal(err)
		}
		// The model is reached once and answers to its dbt id and its
		// warehouse relation alike.
		model, ok := down["dbt://model.billing.fct_billable_egress"]
		if !ok || model.Distance != 5 {
			t.Fatalf("model = %+v, %v; want distance 5", model, ok)
		}
		if alias := down["duckdb://demo.billing.fct_billable_egress"]; alias != model {
			t.Errorf("alias hop %+v differs from the model's %+v", alias, model)
		}
		if h := down["airflow://dag/sync_metered_usage_to_stripe"]; h.Distance != 6 || h.Next != "dbt://model.billing.fct_billable_egress" {
			t.Errorf("Stripe DAG = %+v", h)
		}

		// A change to the graph is seen by the next walk.
		if _, err := g.RecordLineage(ctx, lineage.Note{Path: []string{"airflow://dag/sync_metered_usage_to_stripe", "stripe://invoices"}}); err != nil {
			t.Fatal(err)
		}
		down, err = g.Downstream(ctx, []string{"schema://api-usage-value"}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if h, ok := down["stripe://invoices"]; !ok || h.Distance != 7 {
			t.Errorf("new asset = %+v, %v; want distance 7", h, ok)
		}
		if _, err := g.Downstream(ctx, []string{"schema://api-usage-value"}, -1); err == nil {
			t.Error("negative depth: want an error")
		}
	})
}

// Agents answer tool calls concurrently over one Graph: walks from
// different assets share its index and its cache of names.
func TestWalksConcurrently(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g := billingGraph(t, db)
		starts := []string{"schema://api-usage-value", "duckdb://usage.usage_hourly", "fct_billable_egress", "service://api-gateway"}
		errs := make(chan error, 4*len(starts))
		for i := 0; i < 4; i++ {
			for _, s := range starts {
				go func() {
					down, err := g.Downstream(ctx, []string{s}, 10)
					if err == nil {
						_, err = g.Upstream(ctx, []string{s}, 10)
					}
					if err == nil && len(down) == 0 {
						err = errors.New("empty walk from " + s)
					}
					errs <- err
				}()
			}
		}
		for i := 0; i < cap(errs); i++ {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
}

// FieldReadersWithin walks only through the reach it is given: a reader
// downstream of the asset but outside the reach (it feeds something else)
// is not reported, nor one behind an asset outside it; a stale or absent
// reach confines nothing.
func TestFieldReadersWithinReach(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g := lineage.New(db, clock.NewFake(time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)))
		note := lineage.Note{Edges: []lineage.NoteEdge{
			{From: "kafka://prod/pay", To: "flink://rollup", ReadsFields: []string{"amount"}},
			{From: "flink://rollup", To: "kafka://prod/pay-hourly"},
			{From: "kafka://prod/pay", To: "flink://audit", ReadsFields: []string{"amount"}},
			{From: "flink://audit", To: "kafka://prod/audit-out"},
			{From: "kafka://prod/pay", To: "kafka://prod/pay-copy"},
			{From: "kafka://prod/pay-copy", To: "kafka://prod/pay-copy2"},
			{From: "kafka://prod/pay-copy2", To: "flink://copy-reader", ReadsFields: []string{"amount"}},
			{From: "flink://copy-reader", To: "kafka://prod/pay-hourly"},
		}}
		if _, err := g.RecordLineage(ctx, note); err != nil {
			t.Fatal(err)
		}
		readers := func(rs []lineage.FieldReader) []string {
			var out []string
			for _, r := range rs {
				out = append(out, r.Reader)
			}
			slices.Sort(out)
			return out
		}
		all, err := g.FieldReaders(ctx, "kafka://prod/pay", []string{"amount"}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if got := readers(all); !slices.Equal(got, []string{"flink://audit", "flink://copy-reader", "flink://rollup"}) {
			t.Fatalf("unconfined readers %v", got)
		}
		// Upstream of the hourly topic within 2 hops: rollup, pay,
		// copy-reader and pay-copy2, but not pay-copy (3 hops), so
		// copy-reader is reachable from pay only through an asset outside
		// the reach.
		up, reach, err := g.UpstreamReach(ctx, []string{"kafka://prod/pay-hourly"}, 2)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := up["kafka://prod/pay"]; !ok {
			t.Fatalf("pay not upstream within 2 hops: %v", up)
		}
		in, err := g.FieldReadersWithin(ctx, "kafka://prod/pay", []string{"amount"}, 10, reach)
		if err != nil {
			t.Fatal(err)
		}
		if got := readers(in); !slices.Equal(got, []string{"flink://rollup"}) {
			t.Errorf("readers within the hourly topic's upstream: %v, want only flink://rollup", got)
		}
		// An asset outside the reach walks nothing.
		if rs, err := g.FieldReadersWithin(ctx, "kafka://prod/pay-copy", []string{"amount"}, 10, reach); err != nil || len(rs) != 0 {
			t.Errorf("walk from outside the reach: %v, %v; want nothing", readers(rs), err)
		}
		// After a write the reach names another index's nodes: the walk
		// is not confined (wider, never wrong).
		if _, err := g.RecordLineage(ctx, lineage.Note{Edges: []lineage.NoteEdge{{From: "kafka://prod/x", To: "kafka://prod/y"}}}); err != nil {
			t.Fatal(err)
		}
		stale, err := g.FieldReadersWithin(ctx, "kafka://prod/pay", []string{"amount"}, 10, reach)
		if err != nil {
			t.Fatal(err)
		}
		if got := readers(stale); len(got) != 3 {
			t.Errorf("readers with a stale reach %v, want all three", got)
		}
	})
}
