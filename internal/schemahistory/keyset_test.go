package schemahistory

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
	"github.com/dataworkers/dw/internal/warehouse"
)

// TestListSchemaChangesWalkSurvivesWrites: snapshots taken (newer, older,
// at the same instant as the first page's last) and one removed between
// page 1 and page 2 make the walk neither skip nor repeat a change.
func TestListSchemaChangesWalkSurvivesWrites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		at := time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)
		// Each take on a table flips its columns, so every take after the
		// first is a change; tables t0..t3 are taken at the same instants.
		flip := map[string]bool{}
		take := func(table string, when time.Time) {
			c := cols("id", "BIGINT")
			if flip[table] = !flip[table]; flip[table] {
				c = cols("id", "BIGINT", "extra", "VARCHAR")
			}
			if _, _, err := Take(ctx, db, "demo", &warehouse.Table{Ref: warehouse.TableRef{Schema: "s", Name: table}, Columns: c}, when); err != nil {
				t.Fatal(err)
			}
		}
		for h := range 3 {
			for i := range 4 {
				take(fmt.Sprintf("t%d", i), at.Add(time.Duration(h)*time.Hour))
			}
		}
		ids := func(cs []Change) []string {
			out := make([]string, len(cs))
			for i, c := range cs {
				out[i] = c.Table + "@" + c.TakenAt.Format("15:04")
			}
			return out
		}
		all, info, err := Changes(ctx, db, "demo", "", page.Params{Limit: 100})
		if err != nil || info.Total != 8 {
			t.Fatalf("all changes: %d, %v", info.Total, err)
		}
		victim := all[5]
		seen := pagetest.Walk(t, ids(all), func(cursor string) ([]string, string, error) {
			cs, info, err := Changes(ctx, db, "demo", "", page.Params{Limit: 3, Cursor: cursor})
			return ids(cs), info.NextCursor, err
		}, func() []string {
			take("t9", at.Add(-time.Hour)) // first snapshot: not a change
			take("t9", at.Add(-time.Minute))
			take("t8", at.Add(10*time.Hour))
			take("t8", at.Add(11*time.Hour)) // newest: before the cursor
			if _, err := db.ExecContext(ctx, "DELETE FROM table_snapshots WHERE table_name = ? AND taken_ms = ?", victim.Table, store.Millis(victim.TakenAt)); err != nil {
				t.Fatal(err)
			}
			return ids([]Change{victim})
		})
		if !slices.Contains(seen, "s.t9@08:59") {
			t.Errorf("walk %v misses the change taken meanwhile before every listed one", seen)
		}
	})
}
