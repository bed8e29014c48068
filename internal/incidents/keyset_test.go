package incidents

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/page/pagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// The walks below insert rows before and after the first page's last and
// delete one not yet shown: with offsets the first repeats a row and the
// delete skips one; by key neither does, on either engine.

func TestListIncidentsWalkSurvivesWrites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := newService(t, db, tue(8, 0), nil)
		open := func(i int) string {
			clk.Set(tue(8, 0).Add(time.Duration(i) * time.Minute))
			return mustReport(t, s, Symptom{Kind: SymptomVolume, Asset: fmt.Sprintf("duckdb://w.t%d", i), Metric: "row_count",
				Observed: 1, At: tue(8, 0)}).Incidents[0].ID
		}
		for i := range 7 {
			open(i)
		}
		ids := func(list []IncidentSummary) []string {
			out := make([]string, len(list))
			for i, x := range list {
				out[i] = x.ID
			}
			return out
		}
		all, _, err := s.ListIncidents(ctx, IncidentFilter{Params: page.Params{Limit: 100}})
		if err != nil {
			t.Fatal(err)
		}
		victim := all[4].ID
		pagetest.Walk(t, ids(all), func(cursor string) ([]string, string, error) {
			list, info, err := s.ListIncidents(ctx, IncidentFilter{Params: page.Params{Limit: 3, Cursor: cursor}})
			if err == nil && cursor == "" && info.Total != 7 {
				t.Errorf("total %d, want 7", info.Total)
			}
			return ids(list), info.NextCursor, err
		}, func() []string {
			open(10)
			open(11)
			if _, err := db.ExecContext(ctx, "DELETE FROM incidents WHERE id = ?", victim); err != nil {
				t.Fatal(err)
			}
			return []string{victim}
		})
	})
}

func TestIncidentHistoryWalkSurvivesWrites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		day := 24 * time.Hour
		s, clk := newService(t, db, tue(8, 0), nil)
		// One incident a day on the same table: each its own incident.
		open := func(d int) string {
			at := tue(8, 0).Add(time.Duration(d) * day)
			clk.Set(at.Add(time.Hour))
			return mustReport(t, s, Symptom{Kind: SymptomVolume, Asset: "duckdb://w.orders", Metric: "row_count", Observed: 1, At: at}).Incidents[0].ID
		}
		for d := range 7 {
			open(d)
		}
		ids := func(h *HistoryResult) []string {
			out := make([]string, len(h.Incidents))
			for i, x := range h.Incidents {
				out[i] = x.ID
			}
			return out
		}
		all, err := s.History(ctx, HistoryParams{Asset: "duckdb://w.orders", Params: page.Params{Limit: 100}})
		if err != nil || len(all.Incidents) != 7 {
			t.Fatalf("history: %v, %v", all, err)
		}
		victim := all.Incidents[4].ID
		var older string
		seen := pagetest.Walk(t, ids(all), func(cursor string) ([]string, string, error) {
			h, err := s.History(ctx, HistoryParams{Asset: "duckdb://w.orders", Params: page.Params{Limit: 3, Cursor: cursor}})
			if err != nil {
				return nil, "", err
			}
			return ids(h), h.NextCursor, nil
		}, func() []string {
			open(20)          // newest: before the cursor
			older = open(-10) // oldest: after it
			if _, err := db.ExecContext(ctx, "DELETE FROM incidents WHERE id = ?", victim); err != nil {
				t.Fatal(err)
			}
			return []string{victim}
		})
		if !slices.Contains(seen, older) {
			t.Errorf("walk %v misses %s, opened meanwhile with the oldest onset", seen, older)
		}
	})
}

func TestListMetricsWalkSurvivesWrites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := newService(t, db, tue(12, 0), nil)
		define := func(name string) {
			mustDefine(t, s, DefineMetricParams{Name: name, Description: name, Asset: "duckdb://m.rides"})
		}
		for i := range 7 {
			define(fmt.Sprintf("m%d", i))
		}
		names := func(defs []MetricDefinition) []string {
			out := make([]string, len(defs))
			for i, d := range defs {
				out[i] = d.Name
			}
			return out
		}
		all, _, err := s.ListMetricsPage(ctx, page.Params{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		seen := pagetest.Walk(t, names(all), func(cursor string) ([]string, string, error) {
			defs, info, err := s.ListMetricsPage(ctx, page.Params{Limit: 3, Cursor: cursor})
			return names(defs), info.NextCursor, err
		}, func() []string {
			define("a_first") // sorts before the cursor
			define("zz_last") // sorts after it
			if _, err := db.ExecContext(ctx, "DELETE FROM incident_metrics WHERE name = ?", "m4"); err != nil {
				t.Fatal(err)
			}
			return []string{"m4"}
		})
		if !slices.Contains(seen, "zz_last") || slices.Contains(seen, "a_first") {
			t.Errorf("walk %v: want zz_last (after the cursor) and not a_first", seen)
		}
	})
}
