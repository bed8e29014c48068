package deps

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

type closer struct{ closed atomic.Int32 }

func (c *closer) Close() { c.closed.Add(1) }

// TestCachedBuildsOnceAndClosesOnClose: concurrent first calls build the
// client once and all get it; Deps.Close closes it once.
func TestCachedBuildsOnceAndClosesOnClose(t *testing.T) {
	d := New("dw-test", nil, nil, nil)
	var builds atomic.Int32
	c := &closer{}
	var wg sync.WaitGroup
	got := make([]*closer, 16)
	for i := range got {
		wg.Go(func() {
			v, err := Cached(d, "x", func() (*closer, error) { builds.Add(1); return c, nil })
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Fatalf("built %d times for 16 concurrent calls, want 1", n)
	}
	for i, v := range got {
		if v != c {
			t.Fatalf("call %d got %p, want the one client %p", i, v, c)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if n := c.closed.Load(); n != 1 {
		t.Fatalf("closed %d times, want 1", n)
	}
	// After Close the next call builds afresh.
	if _, err := Cached(d, "x", func() (*closer, error) { builds.Add(1); return &closer{}, nil }); err != nil || builds.Load() != 2 {
		t.Fatalf("after Close: builds %d, %v", builds.Load(), err)
	}
}

// TestCachedKeepsNoFailure: a build that failed (a broker down, a secret
// unset) is tried again by the next call, which can then succeed; keys do
// not share values.
func TestCachedKeepsNoFailure(t *testing.T) {
	d := New("dw-test", nil, nil, nil)
	down := errors.New("broker 127.0.0.1:1 did not answer")
	if _, err := Cached(d, "kafka", func() (*closer, error) { return nil, down }); !errors.Is(err, down) {
		t.Fatalf("first build: %v", err)
	}
	c := &closer{}
	v, err := Cached(d, "kafka", func() (*closer, error) { return c, nil })
	if err != nil || v != c {
		t.Fatalf("second build after a failure: %v %v", v, err)
	}
	other, err := Cached(d, "flink", func() (*closer, error) { return &closer{}, nil })
	if err != nil || other == c {
		t.Fatalf("a second key got the first key's client: %v", err)
	}
}
