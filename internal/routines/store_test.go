package routines

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// Leases on both engines: a tick is claimed once however many try at
// once; a live run blocks the routine's next tick; a run whose lease ran
// out is marked lost by the next claim, and its watcher can no longer
// renew or record it.
func TestClaimLeaseAndLoss(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		tick := utc("2026-03-10T15:05:00Z")
		wall := utc("2026-12-01T09:00:00Z")
		var wg sync.WaitGroup
		ids := make([]int64, 8)
		errs := make([]error, 8)
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids[i], _, errs[i] = claim(ctx, db, "r1", tick, fmt.Sprintf("w%d", i), 0, tick, wall, time.Minute)
			}()
		}
		wg.Wait()
		won := 0
		var id int64
		for i := range ids {
			if errs[i] != nil {
				t.Fatalf("claim %d: %v", i, errs[i])
			}
			if ids[i] != 0 {
				won++
				id = ids[i]
			}
		}
		if won != 1 {
			t.Fatalf("%d watchers claimed one tick, want exactly 1", won)
		}
		// The next tick waits while the first run's lease is alive.
		next := tick.Add(time.Hour)
		if got, busy, err := claim(ctx, db, "r1", next, "w9", 0, next, wall.Add(30*time.Second), time.Minute); err != nil || got != 0 || busy == "" {
			t.Fatalf("claim during a live run = %d %q %v, want refused as busy", got, busy, err)
		}
		// Another routine is not blocked.
		if got, _, err := claim(ctx, db, "r2", tick, "w9", 0, tick, wall, time.Minute); err != nil || got == 0 {
			t.Fatalf("other routine: %d %v", got, err)
		}
		// The lease runs out (its watcher was killed): the next tick is
		// claimed and the first run is lost, not run again.
		got, busy, err := claim(ctx, db, "r1", next, "w9", 3, next, wall.Add(2*time.Minute), time.Minute)
		if err != nil || got == 0 {
			t.Fatalf("claim after the lease expired = %d %q %v", got, busy, err)
		}
		old, err := GetRun(ctx, db, id)
		if err != nil {
			t.Fatal(err)
		}
		if old.Status != StatusLost || old.Error == "" {
			t.Fatalf("expired run: %s %q, want lost with a reason", old.Status, old.Error)
		}
		if err := renew(ctx, db, id, old.Watcher, wall.Add(3*time.Minute)); !errors.Is(err, errLeaseLost) {
			t.Fatalf("renew a lost run: %v, want errLeaseLost", err)
		}
		if err := finish(ctx, db, &Run{ID: id, Watcher: old.Watcher, Status: StatusOK}); !errors.Is(err, errLeaseLost) {
			t.Fatalf("finish a lost run: %v, want errLeaseLost", err)
		}
		// The same tick is never claimed twice, even after it finished.
		run := &Run{ID: got, Watcher: "w9", Status: StatusFlagged, Finished: next.Add(time.Second), Summary: "s",
			Findings:  []Finding{{Kind: "check", Target: "t", Status: "problem", Detail: "d"}},
			Incidents: []Incident{{ID: "INC-1", Opened: true, Status: "open", Asset: "a"}},
			Notified:  []Notified{{Person: "sam", Incident: "INC-1", Via: "none"}}}
		if err := finish(ctx, db, run); err != nil {
			t.Fatal(err)
		}
		if again, busy, err := claim(ctx, db, "r1", next, "w1", 0, next, wall.Add(time.Hour), time.Minute); err != nil || again != 0 || busy == "" {
			t.Fatalf("re-claim of a finished tick = %d %q %v", again, busy, err)
		}
		back, err := GetRun(ctx, db, got)
		if err != nil {
			t.Fatal(err)
		}
		if back.Status != StatusFlagged || back.Missed != 3 || len(back.Incidents) != 1 || back.Incidents[0].ID != "INC-1" ||
			len(back.Notified) != 1 || back.Notified[0].Person != "sam" || len(back.Findings) != 1 {
			t.Fatalf("recorded run read back as %+v", back)
		}
		lasts, err := lastTicks(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if !lasts["r1"].Equal(next) || !lasts["r2"].Equal(tick) {
			t.Fatalf("last ticks %v", lasts)
		}
	})
}

func TestListPagesAndFilters(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		base := utc("2026-03-10T00:00:00Z")
		for i := 0; i < 7; i++ {
			name := "a"
			if i%2 == 1 {
				name = "b"
			}
			at := base.Add(time.Duration(i) * time.Hour)
			id, _, err := claim(ctx, db, name, at, "w", 0, at, at, time.Minute)
			if err != nil || id == 0 {
				t.Fatal(err)
			}
			if err := finish(ctx, db, &Run{ID: id, Watcher: "w", Status: StatusOK, Finished: at}); err != nil {
				t.Fatal(err)
			}
		}
		res, err := List(ctx, db, ListParams{Params: page.Params{Limit: 3}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Total != 7 || len(res.Runs) != 3 || res.NextCursor == "" || !res.Runs[0].Tick.Equal(base.Add(6*time.Hour)) {
			t.Fatalf("first page: total %d, %d runs, cursor %q", res.Total, len(res.Runs), res.NextCursor)
		}
		var seen []int64
		for cur := ""; ; {
			r, err := List(ctx, db, ListParams{Params: page.Params{Limit: 3, Cursor: cur}})
			if err != nil {
				t.Fatal(err)
			}
			for _, run := range r.Runs {
				seen = append(seen, run.ID)
			}
			if r.NextCursor == "" {
				break
			}
			cur = r.NextCursor
		}
		if len(seen) != 7 {
			t.Fatalf("paging saw %v", seen)
		}
		b, err := List(ctx, db, ListParams{Routine: "b", Status: "ok", Since: "2026-03-10T02:00:00Z"})
		if err != nil {
			t.Fatal(err)
		}
		if b.Total != 2 {
			t.Fatalf("filtered: %d runs, want b at 03:00 and 05:00", b.Total)
		}
		// A cursor from another filter, an invented one, a bad status, a
		// bad time and a hostile routine name are refused or harmless.
		if _, err := List(ctx, db, ListParams{Routine: "b", Params: page.Params{Cursor: res.NextCursor}}); err == nil {
			t.Error("cursor from another query accepted")
		}
		for _, p := range []ListParams{
			{Status: "exploded"}, {Since: "yesterday"}, {Params: page.Params{Limit: 501}}, {Params: page.Params{Limit: -1}},
			{Params: page.Params{Cursor: "AAAA"}}, {Routine: "x\x00y"},
		} {
			if _, err := List(ctx, db, p); err == nil {
				t.Errorf("%+v accepted", p)
			}
		}
		inj, err := List(ctx, db, ListParams{Routine: "a' OR '1'='1"})
		if err != nil || inj.Total != 0 {
			t.Fatalf("SQL in a routine name: %v, %d runs", err, inj.Total)
		}
		if _, err := GetRun(ctx, db, 999999); err == nil {
			t.Error("missing run found")
		}
	})
}

// The first message about an incident is reserved once per person; a
// second reservation finds where it went, to thread under it.
func TestNoticeThreading(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		now := utc("2026-03-10T15:05:00Z")
		first, _, _, _, err := claimNotice(ctx, db, "INC-1", "sam", "slack", now)
		if err != nil || !first {
			t.Fatalf("first claim: %v %v", first, err)
		}
		if err := noticePosted(ctx, db, "INC-1", "sam", "D01", "111.222", "slack"); err != nil {
			t.Fatal(err)
		}
		first, ch, ts, _, err := claimNotice(ctx, db, "INC-1", "sam", "slack", now)
		if err != nil || first || ch != "D01" || ts != "111.222" {
			t.Fatalf("second claim: first=%v %q %q %v", first, ch, ts, err)
		}
		// A failed post gives the reservation back.
		if f, _, _, _, _ := claimNotice(ctx, db, "INC-2", "sam", "slack", now); !f {
			t.Fatal("INC-2 not first")
		}
		if err := releaseNotice(ctx, db, "INC-2", "sam"); err != nil {
			t.Fatal(err)
		}
		if f, _, _, _, _ := claimNotice(ctx, db, "INC-2", "sam", "slack", now); !f {
			t.Fatal("released notice not claimable again")
		}
	})
}
