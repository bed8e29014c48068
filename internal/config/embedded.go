package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/clock"
)

// The embedded default is a complete demo: the scenario packs' people and
// domains (so proposals have approvers), the local OS user standing in for
// each of them (so `dw approve` works at this terminal), and a clock that
// reads the incident day (so "today" is the day the demo's data shows).
// Nothing here applies when a dw.yaml is in use.

// The people and domains are written in demo_people.yaml and reach the
// binary as Go values (demo_people_gen.go, written from the YAML by
// TestDemoPeopleAreCurrent): every agent starts on the embedded default,
// and parsing the YAML at each start was 4-5% of an agent's cold start.
//
//go:generate env UPDATE_DEMO_PEOPLE=true go test -run TestDemoPeopleAreCurrent .

// addDemoPeople gives the embedded default the demo's people and domains,
// with login (the OS account running this process, looked up by uid) added
// to every person's os_users: whoever runs the demo is its approver, in the
// demo's own store and nowhere else.
func (c *Config) addDemoPeople(login string) {
	people, domains := demoPeople() // fresh values: os_users is appended to
	if login != "" {
		for i := range people {
			if !slices.Contains(people[i].OSUsers, login) {
				people[i].OSUsers = append(people[i].OSUsers, login)
			}
		}
	}
	c.People, c.Domains = people, domains
}

// DemoIncidentTime is the demo's "now" on its incident day: 15:05 UTC, the
// quality check in both scenario packs (internal/demo's Timeline; a test in
// internal/packload keeps the two equal).
const DemoIncidentTime = 15*time.Hour + 5*time.Minute

// DemoClockSlowdown is how much slower than real time the demo's clock
// runs: a real hour is a demo minute, so the demo stays within its
// incident hour (its data stops at 15:05) for days of real time.
const DemoClockSlowdown = 60

// demoClockFile anchors the demo's clock in the data directory: the real
// time the demo started, which fixes its incident day for every process.
const demoClockFile = "demo-clock"

// DemoIncidentDay is the demo incident day for a real time: today if it is
// past 15:05 UTC, else yesterday, so the incident is never in the future.
func DemoIncidentDay(real time.Time) time.Time {
	real = real.UTC()
	day := time.Date(real.Year(), real.Month(), real.Day(), 0, 0, 0, 0, time.UTC)
	if real.Before(day.Add(DemoIncidentTime)) {
		day = day.AddDate(0, 0, -1)
	}
	return day
}

// DemoClock is the clock the agents and dw act by on the embedded default:
// it reads 15:05 UTC of the demo's incident day when the demo first
// started and moves DemoClockSlowdown times slower than real time. The
// anchor is a file in the data directory, written once, so every process
// reads the same time and the warehouse, the store and the agents agree on
// the day at any wall-clock time. ok is false for a configured dw.yaml.
func (c *Config) DemoClock() (clk clock.Slowed, ok bool, err error) {
	if !c.EmbeddedDefault() {
		return clock.Slowed{}, false, nil
	}
	anchor, err := c.demoAnchor(time.Now())
	if err != nil {
		// Without a writable data directory nothing can be seeded either;
		// still act on the incident day, anchored at this process's start.
		anchor = time.Now()
	}
	return clock.Slowed{At: DemoIncidentDay(anchor).Add(DemoIncidentTime), Since: anchor, Factor: DemoClockSlowdown}, true, err
}

// demoAnchor reads the anchor, creating it on first use. A data directory
// seeded before the anchor existed is anchored at its demo warehouse's
// creation, the time its tables were generated for.
func (c *Config) demoAnchor(now time.Time) (time.Time, error) {
	path := filepath.Join(c.Home, demoClockFile)
	if t, err := readAnchor(path); err == nil {
		return t, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return time.Time{}, err
	}
	anchor := now
	if len(c.Warehouses) > 0 {
		if st, err := os.Stat(c.Warehouses[0].Path); err == nil {
			anchor = st.ModTime()
		}
	}
	if err := os.MkdirAll(c.Home, 0o700); err != nil {
		return time.Time{}, err
	}
	tmp, err := os.CreateTemp(c.Home, demoClockFile+".*")
	if err != nil {
		return time.Time{}, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(anchor.UTC().Format(time.RFC3339Nano) + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return time.Time{}, err
	}
	// Link fails if another process anchored first; theirs wins.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return time.Time{}, err
	}
	return readAnchor(path)
}

func readAnchor(path string) (time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w (delete it to restart the demo's clock)", path, err)
	}
	return t, nil
}

// DemoClockFor returns the demo clock when the embedded default is in use
// and clk is the system clock (DW_CLOCK and tests' clocks win), else clk.
func DemoClockFor(c *Config, clk clock.Clock) clock.Clock {
	if _, system := clk.(clock.System); !system || c == nil {
		return clk
	}
	if dc, ok, _ := c.DemoClock(); ok {
		return dc
	}
	return clk
}

// DemoTimeNote is the line that tells a client the demo's time, "" when
// clk is not the demo's.
func DemoTimeNote(clk clock.Clock) string {
	s, ok := clk.(clock.Slowed)
	if !ok {
		return ""
	}
	return "demo time: " + s.Now().Format("2006-01-02 15:04 MST")
}
