// Package clock lets time-driven rules (approval expiry, escalation,
// baselines that must not train on the period being judged) be tested by
// moving time instead of waiting for it.
package clock

import (
	"fmt"
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// System is the real wall clock, in UTC.
type System struct{}

// Now returns the current time in UTC.
func (System) Now() time.Time { return time.Now().UTC() }

// Fake is a clock that only moves when told to. It is safe for concurrent use.
type Fake struct {
	mu sync.Mutex
	t  time.Time
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{t: t.UTC()} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

// Advance moves the clock forward by d.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// Set moves the clock to t.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.t = t.UTC()
	f.mu.Unlock()
}

// Offset is a clock that runs at real speed from a chosen start, for demos
// and replays of a past incident: the agents act as if it were that time.
type Offset struct {
	delta time.Duration
}

// NewOffset returns a clock that reads start now and moves with real time.
func NewOffset(start time.Time) Offset { return Offset{delta: start.Sub(time.Now())} }

// Now returns the shifted time in UTC.
func (o Offset) Now() time.Time { return time.Now().Add(o.delta).UTC() }

// Replayed is implemented by clocks that stand in for another time
// (DW_CLOCK). Such a clock may date what agents observe, but a person's
// decision is dated with it only on a store made for replay (the demo's):
// elsewhere it would let an expired request be approved, or a decision be
// dated before its proposal.
type Replayed interface {
	Replayed() bool
}

// Replayed reports that an offset clock stands in for another time.
func (Offset) Replayed() bool { return true }

// FromEnv returns the clock named by DW_CLOCK (an RFC 3339 time the
// process starts at, for demos and replays), else the system clock.
func FromEnv(getenv func(string) string) (Clock, error) {
	v := getenv("DW_CLOCK")
	if v == "" {
		return System{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, fmt.Errorf("DW_CLOCK=%q: want an RFC 3339 time such as 2026-03-10T15:05:00Z: %w", v, err)
	}
	return NewOffset(t), nil
}

// Slowed is a clock that reads At when the real time is Since and then
// moves Factor times slower than real time. The embedded default's demo
// uses it: every process (the five agents and dw) reads the same instant of
// the incident day from the same anchor, so a proposal is never dated after
// the decision on it, and a day of real time moves the demo on by only
// minutes, so the demo's data (which stops at the incident) never looks
// like an outage.
type Slowed struct {
	At, Since time.Time
	Factor    int
}

// Now returns the slowed time in UTC.
func (s Slowed) Now() time.Time {
	f := s.Factor
	if f < 1 {
		f = 1
	}
	return s.At.Add(time.Since(s.Since) / time.Duration(f)).UTC()
}

// Replayed reports that a slowed clock stands in for another time.
func (Slowed) Replayed() bool { return true }
