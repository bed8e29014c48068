// Package routines is the watching that runs on a schedule: each routine
// of dw.yaml (quality checks, team metrics, consumer lag, topic health,
// connector status, new schema versions, Flink restores) runs when its
// cron or interval falls due, records the run in the store, opens or joins
// incidents through internal/incidents, and tells the owner of the affected
// asset first.
//
// Routines observe and propose; they never act: nothing here dispatches a
// run, registers a schema or changes a table.
//
// Several `dw watch` processes may share one PostgreSQL store: a run is a
// row per (routine, due tick) claimed with insert-or-conflict, kept alive
// by a heartbeat lease, so every due tick runs once, a routine never runs
// twice at once, and a watcher killed mid-run loses its lease to the next
// tick instead of holding the routine forever.
package routines

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/dataworkers/dw/internal/config"
)

// Schedule says when a routine is due.
type Schedule interface {
	// Next is the first tick strictly after t.
	Next(t time.Time) time.Time
	// Prev is the latest tick at or before t (zero if none within a year).
	Prev(t time.Time) time.Time
	// String is the schedule as configured, for people.
	String() string
}

// ParseSchedule builds a routine's schedule from its configuration.
func ParseSchedule(r config.Routine) (Schedule, error) {
	if r.Every > 0 {
		if r.Every < time.Minute || r.Every%time.Minute != 0 {
			return nil, fmt.Errorf("routine %s: every %s is not a whole number of minutes", r.Name, r.Every)
		}
		return every(r.Every), nil
	}
	spec := strings.TrimSpace(r.Cron)
	if spec == "" {
		return nil, fmt.Errorf("routine %s has no schedule: give cron or every", r.Name)
	}
	if strings.Contains(spec, "@every") {
		// Its ticks depend on when it was asked, so watchers would not agree.
		return nil, fmt.Errorf("routine %s: @every is not supported; use every: (e.g. every: 5m)", r.Name)
	}
	if r.Timezone != "" && !strings.HasPrefix(spec, "CRON_TZ=") && !strings.HasPrefix(spec, "TZ=") {
		spec = "CRON_TZ=" + r.Timezone + " " + spec
	}
	s, err := config.CronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("routine %s: cron %q: %w", r.Name, r.Cron, err)
	}
	return cronSchedule{s: s, text: spec}, nil
}

// every ticks at multiples of d since the Unix epoch, so every watcher,
// started whenever, agrees on the ticks.
type every time.Duration

func (e every) Next(t time.Time) time.Time {
	d := time.Duration(e)
	return t.Truncate(d).Add(d).UTC()
}

func (e every) Prev(t time.Time) time.Time { return t.Truncate(time.Duration(e)).UTC() }

func (e every) String() string { return "every " + time.Duration(e).String() }

type cronSchedule struct {
	s    cron.Schedule
	text string
}

func (c cronSchedule) Next(t time.Time) time.Time { return c.s.Next(t).UTC() }

// Prev finds the latest tick at or before t. robfig/cron only walks
// forward, so it steps back in growing windows and walks forward inside
// the first window that holds a tick; the ticks themselves (DST days
// included) are always the library's.
func (c cronSchedule) Prev(t time.Time) time.Time {
	t = t.Truncate(time.Minute)
	for back := time.Hour; back <= 400*24*time.Hour; back *= 4 {
		from := t.Add(-back)
		n := c.s.Next(from.Add(-time.Second))
		if n.IsZero() || n.After(t) {
			continue
		}
		for {
			next := c.s.Next(n)
			if next.IsZero() || next.After(t) {
				return n.UTC()
			}
			n = next
		}
	}
	return time.Time{}
}

func (c cronSchedule) String() string { return c.text }

// Due is the decision for one routine at one instant.
type Due struct {
	// Tick is the tick to run now; zero when nothing is due.
	Tick time.Time
	// Missed counts the ticks after the last run and before Tick that
	// will not run on their own: after downtime the routine catches up
	// once, for the latest tick, instead of once per missed tick.
	Missed int
}

// maxMissedCount bounds counting missed ticks after long downtime.
const maxMissedCount = 100000

// DueAt says whether a routine is due at now. last is the latest tick a
// run was recorded for (zero when it never ran); since is when watching
// began, so a routine that never ran does not run for ticks long before
// the watcher existed, only for the latest one at or after since.
func DueAt(s Schedule, last, since, now time.Time) Due {
	tick := s.Prev(now)
	if tick.IsZero() {
		return Due{}
	}
	if last.IsZero() {
		if tick.Before(since) {
			return Due{}
		}
		return Due{Tick: tick}
	}
	if !tick.After(last) {
		return Due{}
	}
	missed := 0
	for t := s.Next(last); t.Before(tick) && missed < maxMissedCount; t = s.Next(t) {
		missed++
	}
	return Due{Tick: tick, Missed: missed}
}
