package checks

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// orders builds shop.orders: 120 orders an hour from Feb 25 to the end of
// the fixture's day, paid in EUR (about 42%), USD (35%) or GBP, drawn by a
// hash of the order id (seeded, not written against the rule). From
// flipAt on, a broken currency default makes 97% of orders EUR. Each order
// also has a free-text note that is nearly unique per row.
func orders(flipAt time.Time) string {
	return `CREATE TABLE shop.orders AS
		WITH o AS (SELECT range AS order_id, TIMESTAMP '2025-02-25 00:00:00' + to_microseconds(range * 30000000) AS created_at,
			hash(range * 2654435761) % 1000 AS u FROM range(120 * 24 * 15))
		SELECT order_id, created_at,
			CASE WHEN created_at >= TIMESTAMP '` + flipAt.Format("2006-01-02 15:04:05") + `'
				THEN CASE WHEN u < 970 THEN 'EUR' ELSE 'USD' END
				ELSE CASE WHEN u < 420 THEN 'EUR' WHEN u < 770 THEN 'USD' ELSE 'GBP' END END AS currency,
			'ship to door ' || (u * 7919 + order_id) AS delivery_note,
			10 + (hash(order_id) % 9000) / 100.0 AS amount
		FROM o`
}

// A currency column whose mix flips is flagged by the profile alone, in
// plain words against the column's own baseline; the healthy day before
// stays quiet; each check is one statement on the warehouse.
func TestCurrencyMixThatFlipsIsFlagged(t *testing.T) {
	flip := day.Add(10 * time.Hour)
	wh := &countingWarehouse{Warehouse: openFixture(t, orders(flip))}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := clock.NewFake(day.Add(24*time.Hour + 30*time.Minute))
		env := Env{DB: db, Warehouse: wh, Clock: clk, Agent: "dw-quality", Tool: "run_quality_check"}
		check := func(since, until time.Time) *Report {
			t.Helper()
			before := wh.queries.Load()
			rep, err := RunCheck(ctx, env, CheckRequest{Table: "shop.orders", Bucket: "hour",
				Since: since.Format(time.RFC3339), Until: until.Format(time.RFC3339)})
			if err != nil {
				t.Fatal(err)
			}
			// A day is one scan; a longer window is a backfill, one
			// statement per chunk.
			want := 1
			if span := until.Sub(since); span > 48*time.Hour {
				want = int((span + ChunkSpan(Hour) - 1) / ChunkSpan(Hour))
			}
			if n := wh.queries.Load() - before; n != int64(want) || rep.Statements != want {
				t.Fatalf("the profile took %d queries (%d statements), want %d", n, rep.Statements, want)
			}
			return rep
		}
		// Two weeks of history, then the healthy Monday.
		check(day.Add(-14*24*time.Hour), day.Add(-24*time.Hour))
		healthy := check(day.Add(-24*time.Hour), day)
		share := resultFor(t, healthy, "distribution(currency)", MetricTopValueShare)
		if share.Status != Pass || topOf(share) != "EUR" || share.Observed == nil || math.Abs(*share.Observed-0.42) > 0.03 {
			t.Fatalf("healthy day: %s top %q share %v (%s)", share.Status, topOf(share), deref(share.Observed), share.Message)
		}
		if d := resultFor(t, healthy, "distribution(currency)", MetricDistinctValues); d.Status != Pass || d.Observed == nil || *d.Observed != 3 {
			t.Fatalf("healthy distinct currencies: %s %v (%s)", d.Status, deref(d.Observed), d.Message)
		}
		if slices.Contains(healthy.Problems, ProblemValues) {
			t.Fatalf("healthy day has a values problem: %s", healthy.Summary)
		}
		// The free-text note is not a category: no profile of it at all.
		for _, r := range healthy.Results {
			if r.Check == "distribution(delivery_note)" {
				t.Fatalf("free text profiled as a category: %+v", r)
			}
		}

		// The day the default broke.
		rep := check(day, day.Add(24*time.Hour))
		r := resultFor(t, rep, "distribution(currency)", MetricTopValueShare)
		if r.Status != Anomalous || r.Problem != ProblemValues || topOf(r) != "EUR" {
			t.Fatalf("flipped mix: %s %s top %q (%s)", r.Status, r.Problem, topOf(r), r.Message)
		}
		if r.Usual == nil || math.Abs(*r.Usual-0.42) > 0.05 || r.Expected == nil || r.Expected.High > 0.7 {
			t.Errorf("baseline: usual %v expected %+v", deref(r.Usual), r.Expected)
		}
		var firstBad time.Time
		for _, b := range r.Buckets {
			if b.Status == Anomalous && firstBad.IsZero() {
				firstBad = b.Start
			}
			if b.Start.Before(flip) && b.Status != Pass {
				t.Errorf("bucket %s before the flip: %s (%s)", b.Start.Format("15:04"), b.Status, b.Reason)
			}
			if !b.Start.Before(flip) && (b.Status != Anomalous || b.Value < 0.94) {
				t.Errorf("bucket %s after the flip: %s at %v", b.Start.Format("15:04"), b.Status, b.Value)
			}
		}
		if !firstBad.Equal(flip) {
			t.Errorf("first anomalous bucket %s, want %s", firstBad, flip)
		}
		// The message states the move in words and numbers.
		usually := ", usually " + percent(r.Expected.Low) + "–" + percent(r.Expected.High)
		if !strings.HasPrefix(r.Message, "currency: top value 'EUR' is ") || !strings.Contains(r.Message, "'EUR' is 9") ||
			!strings.Contains(r.Message, usually) {
			t.Errorf("message %q, want the top value's share and %q", r.Message, usually)
		}
		if !slices.Contains(rep.Problems, ProblemValues) {
			t.Errorf("problems %v: %s", rep.Problems, rep.Summary)
		}
		// Still three currencies: the count of values did not move, the mix did.
		if d := resultFor(t, rep, "distribution(currency)", MetricDistinctValues); d.Status == Anomalous {
			t.Errorf("distinct currencies judged %s (%s)", d.Status, d.Message)
		}
	})
}

// A text column whose history shows it is not low-cardinality keeps its
// distinct count but loses the top-value share, so the scan stays small.
func TestHighCardinalityTextLosesItsTopShare(t *testing.T) {
	wh := openFixture(t, `CREATE TABLE shop.visits AS SELECT range AS visit_id, 'page-' || range AS landing FROM range(3000)`)
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := clock.NewFake(day)
		env := Env{DB: db, Warehouse: wh, Clock: clk}
		rep, err := RunCheck(ctx, env, CheckRequest{Table: "shop.visits"})
		if err != nil {
			t.Fatal(err)
		}
		if d := resultFor(t, rep, "distribution(landing)", MetricDistinctValues); d.Observed == nil || *d.Observed < lowCardinalityLimit {
			t.Fatalf("first scan distinct: %v", deref(d.Observed))
		}
		resultFor(t, rep, "distribution(landing)", MetricTopValueShare) // measured once, before history says otherwise
		clk.Set(day.Add(time.Hour))
		rep, err = RunCheck(ctx, env, CheckRequest{Table: "shop.visits"})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Results {
			if r.Metric == MetricTopValueShare {
				t.Fatalf("top share of a column with %v distinct values still profiled: %+v", lowCardinalityLimit, r)
			}
		}
		resultFor(t, rep, "distribution(landing)", MetricDistinctValues)
	})
}

// When two values tie for the most common, the top value is the first of
// them in the column's order, whatever order the rows were written in
// (mode() gave the first one the scan met, and on a parallel scan any),
// and the share is the tied count; over the whole table and over a window.
// NULLs never count as a value.
func TestTopValueOnATieIsTheFirstInOrder(t *testing.T) {
	wh := openFixture(t, `CREATE TABLE shop.tiers AS
		SELECT range AS id, TIMESTAMP '2025-03-11 06:00:00' + to_microseconds(range * 1000000) AS at,
			CASE WHEN range < 50 THEN 'zulu' WHEN range < 100 THEN 'alpha' ELSE 'mike' END AS tier,
			CASE WHEN range < 100 THEN NULL ELSE 'b' END AS note, NULL::VARCHAR AS empty
		FROM range(130) ORDER BY range`)
	db := storetest.SQLite(t)
	env := Env{DB: db, Warehouse: wh, Clock: clock.NewFake(day.Add(24 * time.Hour)), Agent: "dw-quality", Tool: "run_quality_check"}
	for _, req := range []CheckRequest{
		{Table: "shop.tiers"},
		{Table: "shop.tiers", Since: "2025-03-11T00:00:00Z", Until: "2025-03-12T00:00:00Z", TimeColumn: "at"},
	} {
		req.Checks = []Spec{{Kind: KindDistribution, Column: "tier"}, {Kind: KindDistribution, Column: "note"}, {Kind: KindDistribution, Column: "empty"}}
		for range 3 {
			rep, err := RunCheck(context.Background(), env, req)
			if err != nil {
				t.Fatal(err)
			}
			r := resultFor(t, rep, "distribution(tier)", MetricTopValueShare)
			if topOf(r) != "alpha" || r.Observed == nil || math.Abs(*r.Observed-50.0/130) > 1e-9 {
				t.Fatalf("%+v: top %q share %v, want alpha 50/130", req, topOf(r), deref(r.Observed))
			}
			// NULLs are not a value: the top of a mostly NULL column is
			// its one value, and a column of NULLs has none.
			if r := resultFor(t, rep, "distribution(note)", MetricTopValueShare); topOf(r) != "b" || r.Observed == nil || *r.Observed != 1 {
				t.Fatalf("%+v: note's top %q share %v, want b 30/30", req, topOf(r), deref(r.Observed))
			}
			for _, r := range rep.Results {
				if r.Check == "distribution(empty)" && r.Metric == MetricTopValueShare && r.TopValue != nil {
					t.Fatalf("%+v: a column of NULLs has top value %q", req, *r.TopValue)
				}
			}
		}
	}
}

// topOf is a result's top value, "(none)" when it names none.
func topOf(r MetricResult) string {
	if r.TopValue == nil {
		return "(none)"
	}
	return *r.TopValue
}

// A blank string that is the most common value is named in the answer,
// as a top value of "", not left out as if there were none.
func TestBlankTopValueIsNamed(t *testing.T) {
	wh := openFixture(t, `CREATE TABLE shop.codes AS
		SELECT range AS id, CASE WHEN range < 100 THEN '' ELSE 'x' END AS code FROM range(130)`)
	env := Env{DB: storetest.SQLite(t), Warehouse: wh, Clock: clock.NewFake(day.Add(24 * time.Hour)), Agent: "dw-quality", Tool: "run_quality_check"}
	rep, err := RunCheck(context.Background(), env, CheckRequest{Table: "shop.codes", Checks: []Spec{{Kind: KindDistribution, Column: "code"}}})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(data, &parsed); err != nil {
		t.Fatal(err)
	}
	for _, r := range parsed.Results {
		if r["metric"] != MetricTopValueShare {
			continue
		}
		if v, ok := r["top_value"]; !ok || v != "" || r["observed"] != 100.0/130 {
			t.Fatalf("top value %v (present %v), share %v; want \"\" at 100/130: %v", v, ok, r["observed"], r)
		}
		return
	}
	t.Fatalf("no top_value_share result in %s", data)
}
