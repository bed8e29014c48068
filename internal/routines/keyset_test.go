package routines

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/page/pagetest"
	"github.com/dataworkers/dw/internal/routines/runlog"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestListRunsWalkSurvivesWrites: runs recorded (newer and older than the
// first page's last) and one pruned between page 1 and page 2 make the
// walk neither skip nor repeat a run.
func TestListRunsWalkSurvivesWrites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		base := utc("2026-03-10T00:00:00Z")
		run := func(name string, h int) {
			at := base.Add(time.Duration(h) * time.Hour)
			id, _, err := claim(ctx, db, name, at, "w", 0, at, at, time.Minute)
			if err != nil || id == 0 {
				t.Fatalf("claim %s at %d: %d, %v", name, h, id, err)
			}
			if err := finish(ctx, db, &Run{ID: id, Watcher: "w", Status: StatusOK, Finished: at}); err != nil {
				t.Fatal(err)
			}
		}
		// Two routines tick at the same hours, so the id breaks ties.
		for h := range 4 {
			run("a", h)
			run("b", h)
		}
		ids := func(r *runlog.ListResult) []string {
			out := make([]string, len(r.Runs))
			for i, x := range r.Runs {
				out[i] = fmt.Sprint(x.ID)
			}
			return out
		}
		all, err := List(ctx, db, ListParams{Params: page.Params{Limit: 100}})
		if err != nil || all.Total != 8 {
			t.Fatalf("all runs: %+v, %v", all, err)
		}
		victim := all.Runs[5].ID
		pagetest.Walk(t, ids(all), func(cursor string) ([]string, string, error) {
			r, err := List(ctx, db, ListParams{Params: page.Params{Limit: 3, Cursor: cursor}})
			if err != nil {
				return nil, "", err
			}
			return ids(r), r.NextCursor, nil
		}, func() []string {
			run("c", 9)
			run("c", 10)
			run("c", -5)
			if _, err := db.ExecContext(ctx, "DELETE FROM routine_runs WHERE id = ?", victim); err != nil {
				t.Fatal(err)
			}
			return []string{fmt.Sprint(victim)}
		})
	})
}
