package seeded

import (
	"reflect"
	"testing"
	"time"
)

// The same seed gives the same scenario; another seed other names or
// sizes; history is 21–28 days; the healthy twin has no causing change and
// no faulty row, and its rows before the fault are the fault run's rows.
func TestGenerateIsSeededAndTheHealthyTwinDiffersOnlyByTheFault(t *testing.T) {
	for _, k := range Kinds() {
		a, err := Generate(k, 7, false)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Generate(k, 7, false)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: seed 7 gave two different scenarios", k)
		}
		c, _ := Generate(k, 8, false)
		if reflect.DeepEqual(a.Table.Rows, c.Table.Rows) {
			t.Errorf("%s: seeds 7 and 8 gave the same rows", k)
		}
		if days := a.Day.Sub(a.HistoryStart) / (24 * time.Hour); days < 21 || days > 28 {
			t.Errorf("%s: %d days of history, want 21–28", k, days)
		}
		if wd := a.Day.Weekday(); wd == time.Saturday || wd == time.Sunday {
			t.Errorf("%s: incident on a %s", k, wd)
		}
		if !a.FaultAt.After(a.Day) || !a.CheckAt.After(a.FaultAt) {
			t.Errorf("%s: fault %s, check %s on day %s", k, a.FaultAt, a.CheckAt, a.Day)
		}
		found := false
		for _, ch := range a.Changes {
			found = found || ch.Key == a.CauseKey
		}
		if !found || len(a.Changes) < 3 {
			t.Errorf("%s: %d changes, cause recorded %v", k, len(a.Changes), found)
		}
		h, _ := Generate(k, 7, true)
		for _, ch := range h.Changes {
			if ch.Key == h.CauseKey {
				t.Errorf("%s: the healthy twin records the cause", k)
			}
		}
		if !h.dataEnd().After(h.Day.AddDate(0, 0, 3)) {
			t.Errorf("%s: healthy data ends %s, before the week after the day", k, h.dataEnd())
		}
		// Rows that landed well before the fault are the same draw.
		// (Only the fault's own draws may differ after it.)
		before := func(s *Scenario) int {
			n := 0
			for _, r := range s.Table.Rows {
				if r.Landed.Before(s.Day) {
					n++
				}
			}
			return n
		}
		if before(a) == 0 || before(a) > before(h) {
			t.Errorf("%s: %d rows before the day with the fault, %d without", k, before(a), before(h))
		}
	}
	if _, err := Generate("nope", 1, false); err == nil {
		t.Error("an unknown kind was accepted")
	}
}
