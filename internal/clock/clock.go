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
