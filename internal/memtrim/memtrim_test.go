package memtrim

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestIdlerTrimsOnceQuiet: overlapping work holds the trim off; it runs
// once its quiet period has passed with nothing running, and work starting in the
// meantime calls it off.
func TestIdlerTrimsOnceQuiet(t *testing.T) {
	var trims atomic.Int32
	const after = 400 * time.Millisecond
	i := &Idler{after: after, trim: func() { trims.Add(1) }}
	i.Busy()
	i.Busy()
	i.Quiet() // one piece of work still runs
	time.Sleep(after + 300*time.Millisecond)
	if n := trims.Load(); n != 0 {
		t.Fatalf("trimmed %d times while work ran", n)
	}
	i.Quiet()
	time.Sleep(after / 2)
	i.Busy() // work came back before the trim
	time.Sleep(after/2 + 300*time.Millisecond)
	if n := trims.Load(); n != 0 {
		t.Fatalf("trimmed %d times though work started within its quiet period", n)
	}
	i.Quiet()
	time.Sleep(after + 300*time.Millisecond)
	if n := trims.Load(); n != 1 {
		t.Fatalf("trimmed %d times after a quiet period, want 1", n)
	}
}
