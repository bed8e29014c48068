package changelog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/page/pagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestListChangesWalkSurvivesWrites: changes recorded (newer, older, at
// the same instant as the page's last) and one removed between page 1 and
// page 2 make the walk neither skip nor repeat a change.
func TestListChangesWalkSurvivesWrites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s := &Log{DB: db, Clock: clock.NewFake(tue(23, 0))}
		rec := func(at time.Time, name string) Change {
			return recordOK(t, s, RecordChangeParams{At: at, Kind: "deploy", System: "flink", Assets: []string{"flink://job"}, Summary: name})
		}
		// Two changes share each hour, so the id breaks ties.
		for i := range 8 {
			rec(tue(10+i/2, 0), fmt.Sprintf("c%d", i))
		}
		ids := func(l *ChangeList) []string {
			out := make([]string, len(l.Changes))
			for i, c := range l.Changes {
				out[i] = c.Summary
			}
			return out
		}
		full, err := s.ListChanges(ctx, ChangeFilter{Params: page.Params{Limit: 100}})
		if err != nil {
			t.Fatal(err)
		}
		var lastOfFirst Change
		seen := pagetest.Walk(t, ids(full), func(cursor string) ([]string, string, error) {
			l, err := s.ListChanges(ctx, ChangeFilter{Params: page.Params{Limit: 3, Cursor: cursor}})
			if err != nil {
				return nil, "", err
			}
			if cursor == "" {
				lastOfFirst = l.Changes[len(l.Changes)-1]
				if l.Total != 8 {
					t.Errorf("total %d, want 8", l.Total)
				}
			}
			return ids(l), l.NextCursor, nil
		}, func() []string {
			rec(tue(22, 0), "newest")        // before page 1: an offset would repeat a row
			rec(lastOfFirst.At, "same-time") // same instant, higher id: also before the cursor
			rec(tue(9, 0), "oldest")         // after the cursor: belongs to a later page
			// c3 is on page 2: an offset would skip one row.
			if _, err := db.ExecContext(ctx, "DELETE FROM incident_changes WHERE summary = ?", "c3"); err != nil {
				t.Fatal(err)
			}
			return []string{"c3"}
		})
		if !strings.Contains(strings.Join(seen, ","), "oldest") || strings.Contains(strings.Join(seen, ","), "newest") {
			t.Errorf("walk %v: want the change older than the cursor and not the newer ones", seen)
		}
	})
}

// TestListChangesRefusesOldAndEditedCursors: a cursor in the offset
// layout list_changes gave before it paged by key, and one edited, are
// refused, each saying so, and change nothing.
func TestListChangesRefusesOldAndEditedCursors(t *testing.T) {
	db := storetest.SQLite(t)
	ctx := context.Background()
	s := &Log{DB: db, Clock: clock.NewFake(tue(23, 0))}
	for i := range 3 {
		recordOK(t, s, RecordChangeParams{At: tue(10+i, 0), Kind: "deploy", System: "flink", Assets: []string{"flink://job"}, Summary: fmt.Sprint(i)})
	}
	l, err := s.ListChanges(ctx, ChangeFilter{Params: page.Params{Limit: 1}})
	if err != nil || l.NextCursor == "" {
		t.Fatalf("first page: %+v, %v", l, err)
	}
	// The very cursor the offset version made for this list and filters.
	old, err := page.Params{Limit: 1}.Resolve("list_changes", time.Time{}.String(), time.Time{}.String(), "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	edited := []byte(l.NextCursor)
	edited[len(edited)/2] ^= 2
	for name, c := range map[string]string{"offset layout": old.Next(1, true), "edited": string(edited)} {
		_, err := s.ListChanges(ctx, ChangeFilter{Params: page.Params{Limit: 1, Cursor: c}})
		if !errors.Is(err, page.ErrBadCursor) || !strings.Contains(err.Error(), "omit cursor") {
			t.Errorf("%s cursor: %v; want ErrBadCursor saying to omit cursor", name, err)
		}
		if name == "offset layout" && (err == nil || !strings.Contains(err.Error(), "older cursor")) {
			t.Errorf("offset cursor: %v; want it named an older cursor", err)
		}
	}
}
